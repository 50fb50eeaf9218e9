#include "worker/token_output.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

namespace k3::server {

TokenLogprob token_logprob(std::span<const float> logits, int32_t id, int n_top, const Tokenizer& tok) {
    float max_logit = *std::max_element(logits.begin(), logits.end());
    double sum = 0;
    for (float l : logits) sum += std::exp(double(l) - max_logit);
    double log_z = max_logit + std::log(sum);
    TokenLogprob out;
    out.id = id;
    out.text = std::string(tok.token_bytes(id));
    out.logprob = float(double(logits[size_t(id)]) - log_z);
    if (n_top > 0) {
        std::vector<int32_t> ids(logits.size());
        for (size_t i = 0; i < ids.size(); ++i) ids[i] = int32_t(i);
        size_t k = std::min(ids.size(), size_t(n_top));
        std::partial_sort(ids.begin(), ids.begin() + long(k), ids.end(), [&](int32_t a, int32_t b) {
            return logits[size_t(a)] != logits[size_t(b)] ? logits[size_t(a)] > logits[size_t(b)] : a < b;
        });
        for (size_t i = 0; i < k; ++i)
            out.top.emplace_back(std::string(tok.token_bytes(ids[i])), float(double(logits[size_t(ids[i])]) - log_z));
    }
    return out;
}

OutputDecoder::OutputDecoder(const Tokenizer& tok, const GenerationParams& p) : tok_(tok), skip_special_(p.skip_special) {
    if (p.chat)
        chat_.emplace(tok, p.thinking, p.tools);
    else
        plain_.emplace(tok);
}

ChatOutputParser::Delta OutputDecoder::push(int32_t id) {
    if (chat_) return chat_->push(id);
    ChatOutputParser::Delta d;
    if (!(skip_special_ && tok_.is_special(id))) d.content = plain_->push(id);
    return d;
}

ChatOutputParser::Delta OutputDecoder::flush() {
    if (chat_) return chat_->flush();
    ChatOutputParser::Delta d;
    d.content = plain_->flush();
    return d;
}

}  // namespace k3::server

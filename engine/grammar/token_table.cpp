// TokenTable: built once at start-up from the tokenizer (what each id spells), so the matcher
// never calls the tokenizer per step.
#include "grammar/token_table.h"

#include <algorithm>
#include <chrono>

#include "k3/grammar.h"

namespace k3 {

TokenTable::TokenTable(const Tokenizer& tokenizer, int n_vocab, std::vector<int32_t> end_ids)
    : data_(std::make_unique<grammar::TokenTableData>()) {
    auto start = std::chrono::steady_clock::now();
    grammar::TokenTableData& d = *data_;
    d.n_vocab = std::max(n_vocab, tokenizer.n_vocab());
    d.offset.reserve(size_t(d.n_vocab) + 1);
    d.is_special.assign(size_t(d.n_vocab), 0);
    for (int32_t id = 0; id < d.n_vocab; ++id) {
        d.offset.push_back(uint32_t(d.bytes.size()));
        if (id >= tokenizer.n_vocab()) continue;  // logits past the tokenizer: never allowed
        std::string_view b = tokenizer.token_bytes(id);
        if (tokenizer.is_special(id)) {
            d.is_special[size_t(id)] = 1;
            d.special_ids.emplace(std::string(b), id);
            continue;  // a special never spells its text as output bytes
        }
        d.bytes.append(b);
        d.max_token_bytes = std::max(d.max_token_bytes, b.size());
        if (!b.empty()) d.sorted.push_back(id);
    }
    d.offset.push_back(uint32_t(d.bytes.size()));
    std::sort(d.sorted.begin(), d.sorted.end(), [&](int32_t a, int32_t b) {
        std::string_view x = d.token(a), y = d.token(b);
        return x != y ? x < y : a < b;
    });
    d.shared_prefix.assign(d.sorted.size(), 0);
    for (size_t i = 1; i < d.sorted.size(); ++i) {
        std::string_view x = d.token(d.sorted[i - 1]), y = d.token(d.sorted[i]);
        size_t n = 0;
        while (n < x.size() && n < y.size() && x[n] == y[n]) ++n;
        d.shared_prefix[i] = uint16_t(std::min<size_t>(n, 65535));
    }
    d.end_ids = std::move(end_ids);
    d.build_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

TokenTable::~TokenTable() = default;

int TokenTable::n_vocab() const { return data_->n_vocab; }

double TokenTable::build_seconds() const { return data_->build_seconds; }

}  // namespace k3

#include "wire/answer_limit.h"

#include <algorithm>
#include <cstdio>
#include <string>

#include "wire/generation_request.h"

namespace k3::server {

namespace {

// The most bytes one byte of text becomes in a JSON string as dump() writes it
// (wire/generation_request.h, dump(): nlohmann's escapes, invalid UTF-8 replaced by U+FFFD): a control character
// is \u00XX or a two-byte escape, a quote or backslash is escaped, a byte of a multi-byte
// sequence is itself when the sequence is valid and at most one U+FFFD (3 bytes) when not.
size_t escaped_cost(unsigned char c) {
    switch (c) {
        case '"': case '\\': case '\b': case '\f': case '\n': case '\r': case '\t': return 2;
        default: break;
    }
    if (c < 0x20) return 6;
    return c >= 0x80 ? 3 : 1;
}

// A byte in a chat-logprobs "bytes" array: its decimal digits and a comma.
size_t byte_array_cost(unsigned char c) { return (c >= 100 ? 3 : c >= 10 ? 2 : 1) + 1; }

// A logprob as dump() writes a float widened to double: sign, 17 significant digits, point and
// exponent ("-1.4012984643248171e-45"), or null.
constexpr size_t kNumber = 24;
// What one choice and one answer add besides their tokens: keys, index, finish reason, role,
// refusal, the logprobs wrapper; the envelope's id, object, created, fingerprint and usage.
constexpr size_t kPerChoice = 1024;
constexpr size_t kPerAnswer = 4096;

// Bytes one generated token can add to the body.
size_t per_token_bytes(const GenerationRequest& r, const AnswerLimit& a) {
    // The text: three times, since chat with thinking sends reasoning twice (reasoning_content
    // and reasoning), Messages sends thinking and its base64 signature; 32 more for a tool
    // call's id, type and keys, spread over the several tokens (markers, name) every call takes.
    size_t text = 3 * a.piece + 32;
    if (r.params.logprobs < 0) return text;
    const size_t k = size_t(r.params.logprobs);
    if (r.endpoint == Endpoint::Completions)
        // tokens "…", token_logprobs N, top_logprobs {"…":N,…}, text_offset N, with commas
        return text + a.piece + 3 + kNumber + 1 + 2 + k * (a.piece + 4 + kNumber) + 21;
    if (r.endpoint == Endpoint::ChatCompletions) {
        // {"bytes":[…],"logprob":N,"token":"…","top_logprobs":[…]}, each alternative without
        // its own top_logprobs
        size_t entry = a.piece + a.piece_bytes + kNumber + 40;
        return text + entry + 20 + k * (entry + 1);
    }
    return text;  // Responses and Messages bodies carry no logprobs
}

size_t fixed_bytes(const GenerationRequest& r) {
    size_t fixed = kPerAnswer + dump(json(r.model)).size();
    if (!r.responses_echo.is_null()) fixed += dump(r.responses_echo).size();
    size_t per_choice = kPerChoice;
    if (r.echo) per_choice += dump(json(r.echo_text)).size();
    return fixed + size_t(std::max(1, r.params.n)) * per_choice;
}

std::string mib(size_t bytes) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.1f MiB", double(bytes) / double(1 << 20));
    return buf;
}

const char* max_tokens_param(Endpoint e) {
    switch (e) {
        case Endpoint::Responses: return "max_output_tokens";
        default: return "max_tokens";
    }
}

}  // namespace

AnswerLimit answer_limit(const Tokenizer& tok, int max_answer_mb) {
    AnswerLimit a;
    a.max_bytes = size_t(std::max(0, max_answer_mb)) << 20;
    for (int32_t id = 0; id < tok.n_vocab(); ++id) {
        size_t piece = 0, bytes = 0;
        for (unsigned char c : tok.token_bytes(id)) {
            piece += escaped_cost(c);
            bytes += byte_array_cost(c);
        }
        a.piece = std::max(a.piece, piece);
        a.piece_bytes = std::max(a.piece_bytes, bytes);
    }
    return a;
}

size_t answer_bound(const GenerationRequest& r, const AnswerLimit& limit) {
    const size_t n = size_t(std::max(1, r.params.n));
    return fixed_bytes(r) + n * size_t(std::max(0, r.params.max_tokens)) * per_token_bytes(r, limit);
}

void check_answer_fits(const GenerationRequest& r, const AnswerLimit& limit) {
    if (r.stream || limit.max_bytes == 0) return;
    const size_t bound = answer_bound(r, limit);
    if (bound <= limit.max_bytes) return;
    const size_t n = size_t(std::max(1, r.params.n));
    const size_t per_token = per_token_bytes(r, limit);
    const size_t fixed = fixed_bytes(r);
    const size_t fit = fixed < limit.max_bytes ? (limit.max_bytes - fixed) / (n * per_token) : 0;
    const char* param = max_tokens_param(r.endpoint);
    std::string asked = "n " + std::to_string(n) + " x " + std::to_string(r.params.max_tokens) + " tokens x up to " +
                        std::to_string(per_token) + " bytes a token";
    if (r.params.logprobs >= 0) asked += " with logprobs and " + std::to_string(r.params.logprobs) + " alternatives";
    std::string lower = fit > 0 ? "lower " + std::string(param) + " (at most " + std::to_string(fit) + " fit at n " +
                                      std::to_string(n) + "), n or the logprobs alternatives"
                                : "lower n or the logprobs alternatives";
    throw bad_request(param,
                      "this answer could take up to " + mib(bound) + " whole (" + asked +
                          "), more than this server's limit for a whole answer (--max-answer-mb, " +
                          mib(limit.max_bytes) + "): " + lower + ", or set \"stream\": true (a stream is not bound by it)",
                      "answer_too_large");
}

}  // namespace k3::server

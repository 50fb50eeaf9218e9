// Test doubles behind the real worker and HTTP layer: a byte-level FakeTokenizer (ids 0..255 are
// bytes, then the K3 chat specials) and a FakeEngine whose sessions "generate" a fixed script of
// token ids after every prompt, with optional per-token delays and cancel checks, so server
// behaviour (streaming, stop strings, cancellation, queueing, reuse) is testable without a model.
// The engine records every prompt it is given (prompts()), so a test can assert on the prompt
// the server built (chat layout, roles, thinking) and on what a reused state skipped.
#pragma once
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/wait.h"
#include "k3/engine.h"
#include "k3/tokenizer.h"

namespace k3::test {

inline const std::vector<std::string> kFakeSpecials = {"[BOS]", "[EOS]", "<|end_of_msg|>", "<|open|>", "<|close|>",
                                                       "<|sep|>", "[EOT]"};

class FakeTokenizer : public Tokenizer {
public:
    static constexpr int32_t kEos = 257;       // "[EOS]"
    static constexpr int32_t kEndOfMsg = 258;  // "<|end_of_msg|>"
    static constexpr int32_t kOpen = 259;      // "<|open|>"
    static constexpr int32_t kClose = 260;     // "<|close|>"
    static constexpr int32_t kSep = 261;       // "<|sep|>"

    std::vector<int32_t> encode(std::string_view text, bool allow_special) const override {
        std::vector<int32_t> out;
        for (size_t i = 0; i < text.size();) {
            bool matched = false;
            if (allow_special)
                for (size_t s = 0; s < kFakeSpecials.size(); ++s)
                    if (text.substr(i).starts_with(kFakeSpecials[s])) {
                        out.push_back(int32_t(256 + s));
                        i += kFakeSpecials[s].size();
                        matched = true;
                        break;
                    }
            if (!matched) out.push_back(static_cast<unsigned char>(text[i++]));
        }
        return out;
    }
    std::string decode(std::span<const int32_t> ids) const override {
        std::string out;
        for (int32_t id : ids) out += token_bytes(id);
        return out;
    }
    std::string_view token_bytes(int32_t id) const override {
        static const std::vector<std::string> bytes = [] {
            std::vector<std::string> b;
            for (int i = 0; i < 256; ++i) b.push_back(std::string(1, char(i)));
            for (const auto& s : kFakeSpecials) b.push_back(s);
            return b;
        }();
        return id >= 0 && size_t(id) < bytes.size() ? std::string_view(bytes[size_t(id)]) : std::string_view();
    }
    bool is_special(int32_t id) const override { return id >= 256 && id < n_vocab(); }
    std::optional<int32_t> special_id(std::string_view content) const override {
        for (size_t s = 0; s < kFakeSpecials.size(); ++s)
            if (kFakeSpecials[s] == content) return int32_t(256 + s);
        return std::nullopt;
    }
    int n_vocab() const override { return int(256 + kFakeSpecials.size()); }
};

// Token ids of a text (bytes), for building scripts.
inline std::vector<int32_t> bytes_of(const std::string& s) {
    std::vector<int32_t> out;
    for (unsigned char c : s) out.push_back(c);
    return out;
}

// The tail a chat answer ends with in the K3 layout.
inline std::vector<int32_t> chat_answer(const std::string& content) {
    auto out = bytes_of(content);
    out.push_back(FakeTokenizer::kClose);
    for (int32_t b : bytes_of("response")) out.push_back(b);
    out.push_back(FakeTokenizer::kSep);
    out.push_back(FakeTokenizer::kClose);
    for (int32_t b : bytes_of("message")) out.push_back(b);
    out.push_back(FakeTokenizer::kSep);
    out.push_back(FakeTokenizer::kEndOfMsg);
    return out;
}

struct FakeEngineOptions {
    std::vector<int32_t> script = bytes_of("The quick brown fox jumps over the lazy dog. ");
    std::chrono::milliseconds token_delay{0};    // per append()
    std::chrono::milliseconds prefill_delay{0};  // per prompt token evaluated in sync()
    std::string io_error;                        // non-empty: the prompt fails with this IoError
    int n_ctx_max = 256;
    // Non-empty: a prompt that ends by opening the think channel (thinking on, the default of a
    // request that says nothing) is answered as K3 answers it: this reasoning, the think channel
    // closed and the response opened, then `script`. Empty: `script` whatever the prompt.
    std::string reasoning;
    // Called with every prompt given to a session's sync(), on the engine's thread.
    std::function<void(const std::vector<int32_t>&)> on_prompt;
    // A latch for tests that need the engine stopped at a known point instead of a timing
    // window: with `hold` set, a session blocks before evaluating prompt position
    // hold_at_prompt_token (sync) or before generating token number hold_at_token (append),
    // until `hold` opens or the job is cancelled (then it returns Cancelled). `held` opens when
    // it first blocks.
    std::shared_ptr<Gate> hold = nullptr, held = std::make_shared<Gate>();
    int hold_at_prompt_token = -1;
    int hold_at_token = -1;
};

// Every prompt a FakeEngine's sessions were given, in order, how many of its leading tokens
// each sync() reused from the session's state, and the prompt cache partition it ran in.
struct FakePromptLog {
    mutable std::mutex mutex;
    std::vector<std::vector<int32_t>> prompts;
    std::vector<int> reused;
    std::vector<uint64_t> partitions;
};

class FakeSession : public Session {
public:
    FakeSession(const FakeEngineOptions& o, int n_ctx, std::atomic<uint64_t>& evaluated, FakePromptLog& log)
        : o_(o), n_ctx_(n_ctx), evaluated_(evaluated), log_(log), script_(o.script), logits_(256 + kFakeSpecials.size()) {}

    Status sync(std::span<const int32_t> tokens, const CancelFlag& cancel, int* reused) override {
        if (Status s = start_prompt(tokens, reused); !s.ok()) return s;
        for (size_t i = tokens_.size(); i < tokens.size(); ++i) {
            if (cancel.load()) return {StatusCode::Cancelled, "cancelled"};  // "between layers"
            if (int(i) == o_.hold_at_prompt_token && !wait_while_held(cancel))
                return {StatusCode::Cancelled, "cancelled"};
            std::this_thread::sleep_for(o_.prefill_delay);
            tokens_.push_back(tokens[i]);
            ++evaluated_;
        }
        generated_ = 0;
        compute_logits();
        return {};
    }
    Status append(int32_t token, const CancelFlag& cancel) override {
        if (cancel.load()) return {StatusCode::Cancelled, "cancelled"};
        if (generated_ == o_.hold_at_token && !wait_while_held(cancel)) return {StatusCode::Cancelled, "cancelled"};
        if (int(tokens_.size()) >= n_ctx_) return {StatusCode::ContextFull, "context full"};
        std::this_thread::sleep_for(o_.token_delay);
        tokens_.push_back(token);
        ++evaluated_;
        ++generated_;
        compute_logits();
        return {};
    }
    // The worker's path: the prompt one token per step (so a cancel lands between prompt
    // tokens, like the real engine's check between layers), then one token per step.
    Status begin_prompt(std::span<const int32_t> tokens, int* reused) override {
        if (Status s = start_prompt(tokens, reused); !s.ok()) return s;
        prompt_.assign(tokens.begin(), tokens.end());
        generated_ = 0;
        return {};
    }
    std::span<const int32_t> next_prompt_chunk(size_t max_tokens) const override {
        if (prompt_pending() == 0 || max_tokens == 0) return {};
        return std::span<const int32_t>(prompt_).subspan(tokens_.size(), 1);
    }
    void prompt_chunk_done() override {}
    void set_prompt_images(std::vector<PromptImage> images) override { images_ = std::move(images); }
    const std::vector<PromptImage>& prompt_images() const { return images_; }
    size_t prompt_pending() const override {
        return tokens_.size() < prompt_.size() ? prompt_.size() - tokens_.size() : 0;
    }
    void remember() override {}
    // As the real session: another partition's live state is not reused.
    void set_cache_partition(uint64_t partition) override {
        if (partition != partition_) tokens_.clear();
        partition_ = partition;
    }
    std::span<const float> step_logits(size_t i) const override {
        return i == 0 ? std::span<const float>(logits_) : std::span<const float>();
    }
    Status truncate(size_t n) override {
        return n >= tokens_.size() ? Status{} : Status{StatusCode::InvalidArgument, "the fake does not verify drafts"};
    }
    // One step's worth of tokens (FakeEngine::step), held like sync()/append() when asked.
    Status evaluate(std::span<const int32_t> tokens, const CancelFlag* cancel) {
        if (tokens_.size() + tokens.size() > size_t(n_ctx_)) return {StatusCode::ContextFull, "context full"};
        const bool prompt = prompt_pending() > 0;
        static const CancelFlag never{false};
        const CancelFlag& c = cancel ? *cancel : never;
        if (c.load()) return {StatusCode::Cancelled, "cancelled"};
        const bool hold_here = prompt ? int(tokens_.size()) == o_.hold_at_prompt_token : generated_ == o_.hold_at_token;
        if (hold_here && !wait_while_held(c)) return {StatusCode::Cancelled, "cancelled"};
        for (int32_t t : tokens) {
            tokens_.push_back(t);
            ++evaluated_;
        }
        if (!prompt) ++generated_;
        if (!prompt || prompt_pending() == 0) compute_logits();
        return {};
    }
    std::chrono::milliseconds delay_of(std::span<const int32_t> tokens) const {
        return prompt_pending() > 0 ? o_.prefill_delay * int(tokens.size()) : o_.token_delay;
    }

    std::span<const float> logits() const override { return logits_; }
    std::span<const int32_t> tokens() const override { return tokens_; }
    int n_ctx() const override { return n_ctx_; }
    Status prefill_all_logits(std::span<const int32_t>, std::vector<float>&) override {
        return {StatusCode::Internal, "not used by the server"};
    }

private:
    // What sync() and begin_prompt() share: the prompt is recorded (what the test asserts on),
    // checked, and the session keeps the longest common prefix with its tokens, less the last
    // position, which is always recomputed (its logits).
    Status start_prompt(std::span<const int32_t> tokens, int* reused) {
        const std::vector<int32_t> given(tokens.begin(), tokens.end());
        if (o_.on_prompt) o_.on_prompt(given);
        {
            std::lock_guard lock(log_.mutex);
            log_.prompts.push_back(given);
            log_.reused.push_back(0);
            log_.partitions.push_back(partition_);
        }
        if (tokens.empty()) return {StatusCode::InvalidArgument, "empty prompt"};
        if (!o_.io_error.empty()) return {StatusCode::IoError, o_.io_error};
        script_ = o_.script;
        if (!o_.reasoning.empty() && ends_with_think_opener(given)) {
            script_ = bytes_of(o_.reasoning);
            std::vector<int32_t> turn = {FakeTokenizer::kClose};
            for (int32_t b : bytes_of("think")) turn.push_back(b);
            turn.insert(turn.end(), {FakeTokenizer::kSep, FakeTokenizer::kOpen});
            for (int32_t b : bytes_of("response")) turn.push_back(b);
            turn.push_back(FakeTokenizer::kSep);
            script_.insert(script_.end(), turn.begin(), turn.end());
            script_.insert(script_.end(), o_.script.begin(), o_.script.end());
        }
        if (int(tokens.size()) > n_ctx_) return {StatusCode::ContextFull, "prompt longer than the context"};
        size_t common = 0;
        while (common < tokens_.size() && common < tokens.size() && tokens_[common] == tokens[common]) ++common;
        if (common == tokens.size()) --common;
        tokens_.resize(common);
        if (reused) *reused = int(common);
        {
            std::lock_guard lock(log_.mutex);
            log_.reused.back() = int(common);
        }
        return {};
    }

    // <|open|>think<|sep|>: the generation prompt with thinking on.
    static bool ends_with_think_opener(const std::vector<int32_t>& tokens) {
        std::vector<int32_t> opener = {FakeTokenizer::kOpen};
        for (int32_t b : bytes_of("think")) opener.push_back(b);
        opener.push_back(FakeTokenizer::kSep);
        return tokens.size() >= opener.size() && std::equal(opener.begin(), opener.end(), tokens.end() - std::ptrdiff_t(opener.size()));
    }

    // Blocks while the test holds the engine here; false when the job was cancelled meanwhile.
    bool wait_while_held(const CancelFlag& cancel) {
        if (!o_.hold) return true;
        o_.held->open();
        while (!o_.hold->wait(std::chrono::milliseconds(2)))
            if (cancel.load()) return false;
        return true;
    }

    // The script's next token gets logit 10, the byte after it 9: greedy follows the script,
    // sampling with a seed sometimes does not.
    void compute_logits() {
        std::fill(logits_.begin(), logits_.end(), 0.0f);
        int32_t next = script_[size_t(generated_) % script_.size()];
        logits_[size_t(next)] = 10.0f;
        logits_[size_t((next + 1) % 256)] = 9.0f;
    }

    const FakeEngineOptions& o_;
    int n_ctx_;
    std::atomic<uint64_t>& evaluated_;
    FakePromptLog& log_;
    std::vector<int32_t> script_;  // what this prompt is answered with (o_.script, after reasoning when it thinks)
    std::vector<int32_t> tokens_;
    std::vector<int32_t> prompt_;
    std::vector<PromptImage> images_;
    std::vector<float> logits_;
    int generated_ = 0;
    uint64_t partition_ = 0;
};

class FakeEngine : public Engine {
public:
    explicit FakeEngine(FakeEngineOptions o = {}) : o_(std::move(o)) {
        info_.name = "fake";
        info_.shape = "fake: byte vocabulary, scripted output";
        info_.kernels = "none";
        info_.memory_plan = "none";
        info_.n_vocab = 256 + int(kFakeSpecials.size());
        info_.n_ctx_max = o_.n_ctx_max;
        info_.eos_token_id = FakeTokenizer::kEos;
        info_.fingerprint = "fake0123456789abcdef";
    }
    const ModelInfo& info() const override { return info_; }
    EngineStats stats() const override {
        EngineStats s;
        s.tokens_evaluated = evaluated_.load();
        s.expert_requests = 10;
        s.expert_hits = 7;
        return s;
    }
    std::unique_ptr<Session> new_session(int n_ctx) override {
        return std::make_unique<FakeSession>(o_, n_ctx, evaluated_, log_);
    }
    // A batched step costs what its slowest member costs (the real engine reads the weights once).
    Status step(std::span<const StepItem> items) override {
        std::chrono::milliseconds delay{0};
        for (const StepItem& it : items)
            delay = std::max(delay, static_cast<FakeSession*>(it.session)->delay_of(it.tokens));
        std::this_thread::sleep_for(delay);
        for (const StepItem& it : items)
            if (Status s = static_cast<FakeSession*>(it.session)->evaluate(it.tokens, it.cancel); !s.ok()) return s;
        return {};
    }
    int max_step_tokens() const override { return 64; }
    std::vector<PromptCacheEntry> prompt_cache_entries() const override { return {}; }
    uint64_t progress() const override { return evaluated_.load(); }
    FakeEngineOptions& options() { return o_; }
    uint64_t evaluated() const { return evaluated_.load(); }
    // The prompts given to sync() so far, oldest first.
    std::vector<std::vector<int32_t>> prompts() const {
        std::lock_guard lock(log_.mutex);
        return log_.prompts;
    }
    std::vector<int32_t> last_prompt() const {
        std::lock_guard lock(log_.mutex);
        return log_.prompts.empty() ? std::vector<int32_t>{} : log_.prompts.back();
    }
    // The prompt cache partition each prompt ran in.
    std::vector<uint64_t> partitions() const {
        std::lock_guard lock(log_.mutex);
        return log_.partitions;
    }
    // How many leading tokens each sync() reused from the session's state.
    std::vector<int> reused() const {
        std::lock_guard lock(log_.mutex);
        return log_.reused;
    }

private:
    FakeEngineOptions o_;
    ModelInfo info_;
    mutable std::atomic<uint64_t> evaluated_{0};
    FakePromptLog log_;
};

}  // namespace k3::test

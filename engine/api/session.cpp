// Session (engine.h): one sequence's tokens, state and logits, with prefix reuse. The MLA
// latent rows of a prefix stay valid as long as its tokens do; the KDA state exists only for
// the current position, so a sequence can be resumed only from the live state (when the new
// tokens extend it) or from a snapshot of the KDA state taken at the end of an earlier synced
// prompt. A failed or cancelled evaluation rolls back to the best snapshot, so the session is
// always at a consistent prefix.
#include <algorithm>
#include <cstring>

#include "api/engine_impl.h"

namespace k3 {

namespace {

// How many KDA snapshots a session keeps (each is the whole KDA state: 434 MB for Kimi K3).
constexpr size_t kMaxSnapshots = 3;

class SessionImpl final : public Session {
public:
    SessionImpl(EngineImpl& engine, int n_ctx)
        : engine_(engine), st_(engine.config(), n_ctx, engine.n_threads()),
          chunk_(size_t(engine.model().act.max_tokens)) {
        tokens_.reserve(size_t(n_ctx));
        logits_.assign(size_t(engine.config().vocab_size), 0.0f);
    }

    Status sync(std::span<const int32_t> tokens, const CancelFlag& cancel, int* reused) override {
        if (reused) *reused = 0;
        if (Status s = check_tokens(tokens); !s.ok()) return s;
        const size_t common = common_prefix(tokens);
        if (common == tokens.size() && common == tokens_.size() && logits_valid_) {
            if (reused) *reused = int(common);
            return Status::Ok();
        }
        // Resume from the live state if the new tokens extend it, else from the best snapshot;
        // the last token is always evaluated (its logits are the result).
        const size_t limit = std::min(common, tokens.size() - 1);
        if (tokens_.size() > limit) restore_best(limit);
        const size_t resume = tokens_.size();
        drop_snapshots_after(resume);

        logits_valid_ = false;
        for (size_t p = resume; p < tokens.size(); p += chunk_) {
            const size_t n = std::min(chunk_, tokens.size() - p);
            const bool last = p + n == tokens.size();
            Status s = engine_.evaluate(st_, tokens.subspan(p, n), last ? logits_.data() : nullptr, false, &cancel);
            if (!s.ok()) {
                restore_best(tokens_.size());
                return s;
            }
            tokens_.insert(tokens_.end(), tokens.begin() + std::ptrdiff_t(p), tokens.begin() + std::ptrdiff_t(p + n));
        }
        logits_valid_ = true;
        take_snapshot();
        if (reused) *reused = int(resume);
        return Status::Ok();
    }

    Status append(int32_t token, const CancelFlag& cancel) override {
        if (cancel.load()) return {StatusCode::Cancelled, "cancelled"};
        const int32_t one[1] = {token};
        if (Status s = check_tokens(one, tokens_.size() + 1); !s.ok()) return s;
        logits_valid_ = false;
        if (Status s = engine_.evaluate(st_, one, logits_.data(), false, nullptr); !s.ok()) {
            restore_best(tokens_.size());
            return s;
        }
        tokens_.push_back(token);
        logits_valid_ = true;
        return Status::Ok();
    }

    std::span<const float> logits() const override { return logits_; }
    std::span<const int32_t> tokens() const override { return tokens_; }
    int n_ctx() const override { return st_.n_ctx; }

    Status prefill_all_logits(std::span<const int32_t> tokens, std::vector<float>& out) override {
        if (Status s = check_tokens(tokens); !s.ok()) return s;
        const size_t V = logits_.size();
        out.assign(tokens.size() * V, 0.0f);
        snapshots_.clear();
        reset();
        for (size_t p = 0; p < tokens.size(); p += chunk_) {
            const size_t n = std::min(chunk_, tokens.size() - p);
            Status s = engine_.evaluate(st_, tokens.subspan(p, n), out.data() + p * V, true, nullptr);
            if (!s.ok()) {
                reset();
                return s;
            }
            tokens_.insert(tokens_.end(), tokens.begin() + std::ptrdiff_t(p), tokens.begin() + std::ptrdiff_t(p + n));
        }
        std::copy_n(out.data() + (tokens.size() - 1) * V, V, logits_.data());
        logits_valid_ = true;
        take_snapshot();
        return Status::Ok();
    }

private:
    struct Snapshot {
        size_t n_tokens = 0;
        std::vector<float> kda;  // SequenceState::kda at n_tokens
    };

    Status check_tokens(std::span<const int32_t> tokens, size_t total = 0) const {
        if (tokens.empty()) return {StatusCode::InvalidArgument, "empty token sequence"};
        if (std::max(total, tokens.size()) > size_t(st_.n_ctx))
            return {StatusCode::ContextFull, "sequence of " + std::to_string(std::max(total, tokens.size())) +
                                                 " tokens exceeds the context of " + std::to_string(st_.n_ctx)};
        const int V = int(logits_.size());
        for (int32_t id : tokens)
            if (id < 0 || id >= V)
                return {StatusCode::InvalidArgument,
                        "token id " + std::to_string(id) + " is outside the vocabulary 0.." + std::to_string(V - 1)};
        return Status::Ok();
    }

    size_t common_prefix(std::span<const int32_t> tokens) const {
        size_t n = 0;
        while (n < tokens.size() && n < tokens_.size() && tokens[n] == tokens_[n]) ++n;
        return n;
    }

    void reset() {
        st_.reset_recurrent();
        tokens_.clear();
        logits_valid_ = false;
    }

    // Puts the session at the largest snapshot of at most `limit` tokens (or empty).
    void restore_best(size_t limit) {
        const Snapshot* best = nullptr;
        for (const Snapshot& s : snapshots_)
            if (s.n_tokens <= limit && (!best || s.n_tokens > best->n_tokens)) best = &s;
        if (!best) {
            reset();
            return;
        }
        std::copy(best->kda.begin(), best->kda.end(), st_.kda.begin());
        st_.n_past = int(best->n_tokens);
        tokens_.resize(best->n_tokens);
        logits_valid_ = false;
    }

    // Snapshots past `n` describe tokens about to be overwritten.
    void drop_snapshots_after(size_t n) {
        std::erase_if(snapshots_, [n](const Snapshot& s) { return s.n_tokens > n; });
    }

    void take_snapshot() {
        std::erase_if(snapshots_, [this](const Snapshot& s) { return s.n_tokens == tokens_.size(); });
        if (snapshots_.size() >= kMaxSnapshots) snapshots_.erase(snapshots_.begin());
        snapshots_.push_back(Snapshot{tokens_.size(), st_.kda});
    }

    EngineImpl& engine_;
    SequenceState st_;
    size_t chunk_;                  // tokens per forward() call
    std::vector<int32_t> tokens_;   // the tokens whose state st_ holds (st_.n_past == size)
    std::vector<float> logits_;     // [V] of the last token
    bool logits_valid_ = false;
    std::vector<Snapshot> snapshots_;  // oldest first; each a prefix of tokens_
};

}  // namespace

std::unique_ptr<Session> make_session(EngineImpl& engine, int n_ctx) {
    return std::make_unique<SessionImpl>(engine, n_ctx);
}

}  // namespace k3

// Session (engine.h): one sequence's tokens, state and logits, with prefix reuse. The MLA
// latent rows of a prefix stay valid as long as its tokens do; the KDA state exists only for
// the current position, so a sequence resumes either from the live state (when the new tokens
// extend it) or from a snapshot in the engine's shared prompt cache (prompt_cache.h), whichever
// is longer. The session puts snapshots there at the end of every prompt, at every chunk_
// tokens of a long prompt, at the point where a prompt left the cache's tree (the next prompt
// sharing that prefix resumes exactly there) and when the caller asks (remember()). A failed or
// cancelled evaluation empties the session, so it always holds a consistent prefix; the next
// prompt resumes from the cache. Everything it takes from or gives to the cache is in its
// partition (set_cache_partition), and its live state never outlives a change of partition.
//
// Images (docs/model.md "Images in the prompt"): a prompt's image positions hold image row ids,
// so the cache's prefixes already tell one image from another; the session only supplies their
// rows to the forward pass, running the tower in begin_prompt for the images the prompt will
// evaluate (from its resume point on) and dropping the rows once the prompt is in.
#include <algorithm>
#include <cstring>

#include "k3/error.h"

#include "api/engine_impl.h"
#include "model/blocks.h"

namespace k3 {

namespace {

class SessionImpl final : public Session {
public:
    SessionImpl(EngineImpl& engine, int n_ctx)
        : engine_(engine), st_(engine.config(), n_ctx),
          chunk_(size_t(engine.model().act.max_tokens)) {
        tokens_.reserve(size_t(n_ctx));
        logits_.assign(size_t(engine.config().vocab_size), 0.0f);
    }

    Status sync(std::span<const int32_t> tokens, const CancelFlag& cancel, int* reused) override {
        if (Status s = begin_prompt(tokens, reused); !s.ok()) return s;
        while (prompt_pending() > 0) {
            if (Status s = evaluate(next_prompt_chunk(chunk_), &cancel); !s.ok()) return s;
            prompt_chunk_done();
        }
        return Status::Ok();
    }

    void set_prompt_images(std::vector<PromptImage> images) override {
        images_ = std::move(images);
        image_rows_.assign(images_.size(), nullptr);
    }

    Status begin_prompt(std::span<const int32_t> prompt, int* reused) override {
        if (reused) *reused = 0;
        if (Status s = check_images(prompt); !s.ok()) return s;
        if (Status s = check_tokens(prompt); !s.ok()) return s;
        prompt_.assign(prompt.begin(), prompt.end());
        snapshot_at_ = 0;

        // The live state is usable when the prompt extends it (all of it when the prompt is the
        // same and its logits are there); the cache may offer a longer prefix.
        const size_t common = common_prefix(prompt);
        size_t live = 0;
        if (common == tokens_.size() && (common < prompt.size() || logits_valid_)) live = common;
        PromptCache& cache = engine_.prompt_cache();
        const PromptCache::Match match = cache.find(partition_, prompt);
        if (match.resume > live && cache.restore(partition_, prompt, match.resume, st_, logits_)) {
            tokens_.assign(prompt.begin(), prompt.begin() + std::ptrdiff_t(match.resume));
            logits_valid_ = match.resume == prompt.size();
        } else {
            cache.count_miss();
            if (live == 0) reset();
        }
        // Where this prompt leaves the tree: a snapshot there serves the next prompt that
        // shares the same prefix (a common system prompt, a conversation's earlier turns).
        if (match.matched > tokens_.size() && match.matched < prompt.size()) snapshot_at_ = match.matched;
        if (reused) *reused = int(tokens_.size());
        return image_rows_from(tokens_.size());
    }

    std::span<const int32_t> next_prompt_chunk(size_t max_tokens) const override {
        const size_t pos = tokens_.size();
        if (prompt_pending() == 0 || max_tokens == 0) return {};
        size_t end = std::min(prompt_.size(), pos + max_tokens);
        // chunks end where snapshots are taken
        if (snapshot_at_ > pos && snapshot_at_ < end) end = snapshot_at_;
        const size_t boundary = (pos / chunk_ + 1) * chunk_;
        if (boundary < end) end = boundary;
        return std::span<const int32_t>(prompt_).subspan(pos, end - pos);
    }

    void prompt_chunk_done() override {
        const size_t n = tokens_.size();
        if (n == prompt_.size() || n == snapshot_at_ || n % chunk_ == 0) remember();
        // the prompt is in: its images' rows are not needed again (a later prompt that needs them
        // encodes them again)
        if (prompt_pending() == 0) image_rows_.assign(images_.size(), nullptr);
    }

    size_t prompt_pending() const override {
        const size_t n = tokens_.size();
        if (n >= prompt_.size() || !std::equal(tokens_.begin(), tokens_.end(), prompt_.begin())) return 0;
        return prompt_.size() - n;
    }

    void remember() override {
        if (tokens_.empty()) return;
        engine_.prompt_cache().insert(partition_, tokens_, st_,
                                      logits_valid_ ? std::span<const float>(logits_) : std::span<const float>());
    }

    void set_cache_partition(uint64_t partition) override {
        if (partition == partition_) return;
        reset();  // the live state belongs to the old partition: resuming from it would serve it across
        prompt_.clear();
        snapshot_at_ = 0;
        partition_ = partition;
    }

    Status append(int32_t token, const CancelFlag& cancel) override {
        if (cancel.load()) return {StatusCode::Cancelled, "cancelled"};
        const int32_t one[1] = {token};
        return evaluate(one, &cancel);
    }

    std::span<const float> logits() const override { return logits_; }
    std::span<const int32_t> tokens() const override { return tokens_; }
    int n_ctx() const override { return st_.n_ctx; }

    std::span<const float> step_logits(size_t i) const override {
        const size_t V = logits_.size();
        if (i >= step_rows_) return {};
        return std::span<const float>(step_logits_).subspan(i * V, V);
    }

    Status truncate(size_t n) override {
        if (n >= tokens_.size()) return Status::Ok();
        const size_t from = tokens_.size() - step_rows_;
        if (step_rows_ == 0 || n < from)
            return {StatusCode::InvalidArgument, "truncate reaches before the last all_logits step"};
        // back to the step's start, then forward by the kept tokens without reading weights
        st_.kda = st_.kda_at_step;
        kda_replay(engine_.model(), st_, int(n - from));
        st_.n_past = int(n);
        tokens_.resize(n);
        if (n > from) {
            const size_t V = logits_.size();
            std::copy_n(step_logits_.begin() + std::ptrdiff_t((n - from - 1) * V), V, logits_.begin());
            logits_valid_ = true;
        } else {
            logits_valid_ = false;
        }
        step_rows_ = n - from;
        return Status::Ok();
    }

    Status prefill_all_logits(std::span<const int32_t> tokens, std::vector<float>& out) override {
        if (Status s = check_images(tokens); !s.ok()) return s;
        if (Status s = check_tokens(tokens); !s.ok()) return s;
        if (Status s = image_rows_from(0); !s.ok()) return s;
        const size_t V = logits_.size();
        out.assign(tokens.size() * V, 0.0f);
        reset();
        for (size_t p = 0; p < tokens.size(); p += chunk_) {
            const size_t n = std::min(chunk_, tokens.size() - p);
            const ForwardItem item{&st_, tokens.subspan(p, n), out.data() + p * V, true, rows_at(p, tokens.subspan(p, n))};
            Status s = engine_.evaluate_batch(std::span<const ForwardItem>(&item, 1), nullptr);
            if (!s.ok()) {
                reset();
                return s;
            }
            tokens_.insert(tokens_.end(), tokens.begin() + std::ptrdiff_t(p), tokens.begin() + std::ptrdiff_t(p + n));
        }
        std::copy_n(out.data() + (tokens.size() - 1) * V, V, logits_.data());
        logits_valid_ = true;
        remember();
        return Status::Ok();
    }

    // ---- for step_sessions() ----
    // `tokens` at positions pos.. (`total`: the sequence's length with them, 0: tokens.size()).
    Status check_tokens(std::span<const int32_t> tokens, size_t total = 0, size_t pos = 0) const {
        if (tokens.empty()) return {StatusCode::InvalidArgument, "empty token sequence"};
        if (std::max(total, tokens.size()) > size_t(st_.n_ctx))
            return {StatusCode::ContextFull, "sequence of " + std::to_string(std::max(total, tokens.size())) +
                                                 " tokens exceeds the context of " + std::to_string(st_.n_ctx)};
        const int V = int(logits_.size());
        for (size_t i = 0; i < tokens.size(); ++i) {
            const int32_t id = tokens[i];
            if (id >= 0 && (id < V || image_at(pos + i))) continue;
            return {StatusCode::InvalidArgument,
                    "token id " + std::to_string(id) + " is outside the vocabulary 0.." + std::to_string(V - 1) +
                        (id >= V ? " (an image row id where the prompt has no image)" : "")};
        }
        return Status::Ok();
    }
    ForwardItem forward_item(std::span<const int32_t> tokens, bool all_logits) {
        logits_valid_ = false;
        step_rows_ = 0;
        const std::span<const float* const> rows = rows_at(tokens_.size(), tokens);
        if (!all_logits) return ForwardItem{&st_, tokens, logits_.data(), false, rows};
        step_logits_.resize(tokens.size() * logits_.size());
        st_.begin_capture(int(tokens.size()));
        return ForwardItem{&st_, tokens, step_logits_.data(), true, rows};
    }
    void committed(std::span<const int32_t> tokens) {
        tokens_.insert(tokens_.end(), tokens.begin(), tokens.end());
        if (st_.capture) {
            st_.capture = false;
            step_rows_ = tokens.size();
            std::copy_n(step_logits_.end() - std::ptrdiff_t(logits_.size()), logits_.size(), logits_.begin());
        }
        logits_valid_ = true;
    }
    // After a failed evaluation the KDA state is partly advanced: back to the longest prefix of
    // what the session held that the prompt cache can restore (or empty).
    void roll_back() {
        const std::vector<int32_t> had = tokens_;
        reset();
        PromptCache& cache = engine_.prompt_cache();
        const PromptCache::Match m = cache.find(partition_, had);
        if (m.resume > 0 && cache.restore(partition_, had, m.resume, st_, logits_)) {
            tokens_.assign(had.begin(), had.begin() + std::ptrdiff_t(m.resume));
            logits_valid_ = m.resume == had.size();
        }
    }
    void reset() {
        st_.reset_recurrent();
        st_.capture = false;
        tokens_.clear();
        logits_valid_ = false;
        step_rows_ = 0;
    }

private:
    // The image whose rows take position `pos` of the prompt, or null.
    const PromptImage* image_at(size_t pos) const {
        for (const PromptImage& im : images_)
            if (pos >= im.position && pos < im.position + size_t(im.rows)) return &im;
        return nullptr;
    }

    // The images must lie inside the prompt, in order, on image row ids of their content.
    Status check_images(std::span<const int32_t> prompt) const {
        const int V = int(logits_.size());
        const size_t E = size_t(engine_.config().hidden_size);
        size_t end = 0;
        for (size_t i = 0; i < images_.size(); ++i) {
            const PromptImage& im = images_[i];
            const std::string which = "image " + std::to_string(i);
            if (im.rows <= 0 || im.position < end || im.position + size_t(im.rows) > prompt.size())
                return {StatusCode::InvalidArgument, which + ": its rows are not inside the prompt, after the previous image's"};
            end = im.position + size_t(im.rows);
            if (im.embeddings && im.embeddings->size() != size_t(im.rows) * E)
                return {StatusCode::InvalidArgument, which + ": its embeddings are not [rows][" + std::to_string(E) + "]"};
            if (!im.embeddings && !im.image) return {StatusCode::InvalidArgument, which + ": neither an image nor its rows"};
            if (im.embeddings) continue;
            if (im.image->geometry.rows() != im.rows)
                return {StatusCode::InvalidArgument, which + ": rows differ from the image's geometry"};
            const std::vector<int32_t> ids = image_row_ids(im.image->content_hash, im.rows, V);
            if (!std::equal(ids.begin(), ids.end(), prompt.begin() + std::ptrdiff_t(im.position)))
                return {StatusCode::InvalidArgument, which + ": the prompt's ids there are not the image's row ids"};
        }
        return Status::Ok();
    }

    // Rows for every image the prompt evaluates from position `from` on: the given embeddings,
    // or the tower's output.
    Status image_rows_from(size_t from) {
        for (size_t i = 0; i < images_.size(); ++i) {
            const PromptImage& im = images_[i];
            if (image_rows_[i] || im.position + size_t(im.rows) <= from) continue;
            if (im.embeddings) {
                image_rows_[i] = im.embeddings;
                continue;
            }
            try {
                auto rows = std::make_shared<const std::vector<float>>(engine_.encode_image(*im.image));
                if (rows->size() != size_t(im.rows) * size_t(engine_.config().hidden_size))
                    return {StatusCode::Internal, "the vision tower gave a wrong number of rows"};
                image_rows_[i] = std::move(rows);
            } catch (const Error& e) {
                return {StatusCode::InvalidArgument, e.what()};
            }
        }
        return Status::Ok();
    }

    // Per token of `tokens` (at positions pos..): its image row, or null; empty when none is.
    std::span<const float* const> rows_at(size_t pos, std::span<const int32_t> tokens) {
        if (images_.empty()) return {};
        chunk_rows_.assign(tokens.size(), nullptr);
        bool any = false;
        const size_t E = size_t(engine_.config().hidden_size);
        for (size_t i = 0; i < images_.size(); ++i) {
            const PromptImage& im = images_[i];
            if (!image_rows_[i]) continue;
            for (size_t t = 0; t < tokens.size(); ++t)
                if (pos + t >= im.position && pos + t < im.position + size_t(im.rows)) {
                    chunk_rows_[t] = image_rows_[i]->data() + (pos + t - im.position) * E;
                    any = true;
                }
        }
        if (!any) return {};
        return chunk_rows_;
    }

    Status evaluate(std::span<const int32_t> tokens, const CancelFlag* cancel) {
        if (Status s = check_tokens(tokens, tokens_.size() + tokens.size(), tokens_.size()); !s.ok()) return s;
        const ForwardItem item = forward_item(tokens, false);
        if (Status s = engine_.evaluate_batch(std::span<const ForwardItem>(&item, 1), cancel); !s.ok()) {
            roll_back();
            return s;
        }
        committed(tokens);
        return Status::Ok();
    }

    size_t common_prefix(std::span<const int32_t> tokens) const {
        size_t n = 0;
        while (n < tokens.size() && n < tokens_.size() && tokens[n] == tokens_[n]) ++n;
        return n;
    }

    EngineImpl& engine_;
    SequenceState st_;
    size_t chunk_;                  // tokens per forward() call, and the snapshot interval
    std::vector<int32_t> tokens_;   // the tokens whose state st_ holds (st_.n_past == size)
    std::vector<float> logits_;     // [V] of the last token
    bool logits_valid_ = false;
    std::vector<int32_t> prompt_;   // the prompt of begin_prompt
    size_t snapshot_at_ = 0;        // where that prompt leaves the prompt cache's tree (0: none)
    uint64_t partition_ = 0;        // of the prompt cache: where every find, restore and insert goes
    std::vector<float> step_logits_;  // [rows][V] of the last all_logits step
    size_t step_rows_ = 0;            // its tokens still in the state (0: no such step)
    std::vector<PromptImage> images_;  // of the prompts given next (set_prompt_images)
    std::vector<std::shared_ptr<const std::vector<float>>> image_rows_;  // [images] their rows, while needed
    std::vector<const float*> chunk_rows_;  // [chunk] rows_at()'s answer
};

}  // namespace

Status step_sessions(EngineImpl& engine, std::span<const Engine::StepItem> items, const BetweenLayers* between_layers) {
    std::vector<ForwardItem> forward_items;
    std::vector<SessionImpl*> sessions;
    size_t total = 0;
    std::vector<std::span<const int32_t>> tokens;
    std::vector<bool> all_logits;
    for (const Engine::StepItem& it : items) {
        if (it.tokens.empty()) continue;
        auto* s = static_cast<SessionImpl*>(it.session);
        if (std::find(sessions.begin(), sessions.end(), s) != sessions.end())
            return {StatusCode::InvalidArgument, "a session appears twice in one step"};
        if (Status st = s->check_tokens(it.tokens, s->tokens().size() + it.tokens.size(), s->tokens().size()); !st.ok())
            return st;
        sessions.push_back(s);
        tokens.push_back(it.tokens);
        all_logits.push_back(it.all_logits);
        total += it.tokens.size();
    }
    if (total == 0) return Status::Ok();
    if (total > size_t(engine.model().act.max_tokens))
        return {StatusCode::InvalidArgument, "a step of " + std::to_string(total) + " tokens exceeds " +
                                                 std::to_string(engine.model().act.max_tokens)};
    for (size_t i = 0; i < sessions.size(); ++i)
        forward_items.push_back(sessions[i]->forward_item(tokens[i], all_logits[i]));
    const CancelFlag* cancel = items.size() == 1 ? items[0].cancel : nullptr;
    if (Status st = engine.evaluate_batch(forward_items, cancel, between_layers); !st.ok()) {
        for (SessionImpl* s : sessions) s->roll_back();
        return st;
    }
    for (size_t i = 0; i < sessions.size(); ++i) sessions[i]->committed(tokens[i]);
    return Status::Ok();
}

std::unique_ptr<Session> make_session(EngineImpl& engine, int n_ctx) {
    return std::make_unique<SessionImpl>(engine, n_ctx);
}

}  // namespace k3

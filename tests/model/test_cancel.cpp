// Cancellation in the middle of a forward pass, at layer k (as a client hanging up mid-prompt
// would, at that moment). Under forward(): a store raises the flag while it hands out layer k's
// weights; the pass must stop at the next layer boundary with Cancelled, produce no logits and
// not advance n_past, and once the caller restores the recurrent state the next evaluation gives
// the bits of a run that was never cancelled. Through a Session: a trace raises the flag at
// layer k's attention output; the session must roll back to its snapshot, and the next sync
// must reuse it and give a cold run's bits.
#include <doctest/doctest.h>

#include <algorithm>

#include "api/engine_impl.h"
#include "kernels/kernels.h"
#include "model/model.h"
#include "model/model_test_util.h"
#include "model/state.h"
#include "model/trace.h"
#include "store/weight_store.h"

using namespace k3;
using namespace k3::test;

namespace {

constexpr int kSeed = 5;

// A resident store that raises `cancel` when layer `cancel_at` is acquired (-1: never), and
// records the highest layer handed out.
class CancelAtLayerStore final : public WeightStore {
public:
    CancelAtLayerStore(const Checkpoint& c, CancelFlag& cancel) : inner_(make_resident_store(c)), cancel_(cancel) {}
    Status acquire_layer(int il, const uint8_t** run) override {
        if (il == cancel_at) cancel_.store(true);
        highest_layer = std::max(highest_layer, il);
        return inner_->acquire_layer(il, run);
    }
    void release_layer(int il) override { inner_->release_layer(il); }
    Status acquire_experts(int il, std::span<const int32_t> ex, const uint8_t** out) override {
        return inner_->acquire_experts(il, ex, out);
    }
    void release_experts(int il) override { inner_->release_experts(il); }
    int max_experts_per_acquire() const override { return inner_->max_experts_per_acquire(); }
    WeightStoreStats stats() const override { return inner_->stats(); }

    int cancel_at = -1;
    int highest_layer = -1;

private:
    std::unique_ptr<WeightStore> inner_;
    CancelFlag& cancel_;
};

}  // namespace

TEST_CASE("forward: a cancel raised during layer k stops the pass at the next layer, with no logits") {
    const Checkpoint ckpt = open_checkpoint(cached_model("tiny", kSeed));
    const ModelConfig& c = ckpt.config;
    REQUIRE(c.num_hidden_layers >= 3);
    const auto first = test_prompt(6, c.vocab_size, 1), second = test_prompt(5, c.vocab_size, 2);
    const size_t V = size_t(c.vocab_size);

    // The reference: both prompts evaluated, never cancelled.
    std::vector<float> want(V);
    {
        CancelFlag never{false};
        CancelAtLayerStore store(ckpt, never);
        Model m(ckpt, select_kernels(), 2, store);
        SequenceState st(c, 32);
        REQUIRE(forward(m, st, first, nullptr, false, &never).ok());
        REQUIRE(forward(m, st, second, want.data(), false, &never).ok());
    }

    for (int k : {1, c.num_hidden_layers / 2, c.num_hidden_layers - 2}) {
        CAPTURE(k);
        CancelFlag cancel{false};
        CancelAtLayerStore store(ckpt, cancel);
        Model m(ckpt, select_kernels(), 2, store);
        SequenceState st(c, 32);
        REQUIRE(forward(m, st, first, nullptr, false, &cancel).ok());
        const SequenceState before = st;  // what a Session's snapshot holds
        store.cancel_at = k;
        store.highest_layer = -1;

        std::vector<float> logits(V, -7.0f);
        const Status s = forward(m, st, second, logits.data(), false, &cancel);
        CHECK(s.code == StatusCode::Cancelled);
        CHECK(store.highest_layer == k);  // layer k ran, layer k + 1 was never fetched
        CHECK(st.n_past == int(first.size()));
        CHECK(std::all_of(logits.begin(), logits.end(), [](float v) { return v == -7.0f; }));
        // The KDA layers up to k did advance their recurrent state: the pass really stopped
        // midway, so the state must be rolled back before the sequence continues.
        bool kda_before_k = false;
        for (int il = 0; il <= k; ++il) kda_before_k |= !c.is_mla(il);
        if (kda_before_k) CHECK(st.kda != before.kda);

        // Rolled back, the same evaluation gives the bits of the run that was never cancelled.
        st = before;
        cancel.store(false);
        store.cancel_at = -1;
        REQUIRE(forward(m, st, second, logits.data(), false, &cancel).ok());
        CHECK(same_bits(logits, want));
    }
}

namespace {

// A trace (model/trace.h) that raises `cancel` when layer `layer`'s attention output is recorded,
// the `nth` time it is (0 = the first evaluation that reaches it).
class CancelAtStep final : public Trace {
public:
    CancelAtStep(CancelFlag& cancel, int layer, int nth) : cancel_(cancel), layer_(layer), nth_(nth) {}
    void record(const char* step, int layer, const float*, int, int64_t) override {
        if (layer == layer_ && std::string(step) == "attn_out" && seen_++ == nth_) cancel_.store(true);
    }

private:
    CancelFlag& cancel_;
    int layer_, nth_, seen_ = 0;
};

// On an engine of its own without a prompt cache, so the engine under test has not seen `ids`.
std::vector<float> cold_logits(Engine&, const std::vector<int32_t>& ids) {
    auto cold = load_engine(cached_model("tiny", kSeed), 2, "", 0);
    auto s = cold->new_session(int(ids.size()) + 8);
    CancelFlag cancel{false};
    REQUIRE(s->sync(ids, cancel).ok());
    return {s->logits().begin(), s->logits().end()};
}

}  // namespace

TEST_CASE("session: a cancel in the middle of a forward pass rolls back, and the next sync is exact") {
    auto e = load_engine(cached_model("tiny", kSeed), 2);
    Model& model = static_cast<EngineImpl&>(*e).model();
    const ModelConfig& c = static_cast<EngineImpl&>(*e).config();
    const int V = e->info().n_vocab;
    const auto A = test_prompt(10, V, 7);

    for (int k : {1, c.num_hidden_layers / 2, c.num_hidden_layers - 2}) {
        CAPTURE(k);
        // A continuation of its own for each k: the engine's prompt cache keeps the AB of an
        // earlier k, which a repeated AB would resume from without any forward pass to cancel.
        const auto B = test_prompt(6, V, 8 + k);
        std::vector<int32_t> AB = A;
        AB.insert(AB.end(), B.begin(), B.end());
        const auto want = cold_logits(*e, AB);
        auto s = e->new_session(64);
        CancelFlag cancel{false};
        REQUIRE(s->sync(A, cancel).ok());  // the session now holds A and a snapshot at its end
        CancelAtStep trip(cancel, k, 0);
        model.trace = &trip;
        const Status st = s->sync(AB, cancel);
        model.trace = nullptr;
        CHECK(st.code == StatusCode::Cancelled);
        // Rolled back to the snapshot at the end of A: tokens and state agree again.
        CHECK(std::vector<int32_t>(s->tokens().begin(), s->tokens().end()) == A);
        cancel.store(false);
        int reused = -1;
        REQUIRE(s->sync(AB, cancel, &reused).ok());
        CHECK(reused == int(A.size()));
        CHECK(same_bits(s->logits(), want));
    }
}

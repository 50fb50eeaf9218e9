// Cancellation in the middle of a forward pass: a store that raises the cancel flag while it
// hands out layer k's weights (as a client hanging up mid-prompt would, at that moment). The
// pass must stop at the next layer boundary with Cancelled, produce no logits and not advance
// n_past; the recurrent state it did advance must be restored by the caller, and once it is,
// the next evaluation gives the bits of a run that was never cancelled.
#include <doctest/doctest.h>

#include <algorithm>

#include "kernels/kernels.h"
#include "model/model.h"
#include "model/model_test_util.h"
#include "model/state.h"
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
        SequenceState st(c, 32, 2);
        REQUIRE(forward(m, st, first, nullptr, false, &never).ok());
        REQUIRE(forward(m, st, second, want.data(), false, &never).ok());
    }

    for (int k : {1, c.num_hidden_layers / 2, c.num_hidden_layers - 2}) {
        CAPTURE(k);
        CancelFlag cancel{false};
        CancelAtLayerStore store(ckpt, cancel);
        Model m(ckpt, select_kernels(), 2, store);
        SequenceState st(c, 32, 2);
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

// Session behaviour: prefix reuse gives the bits of a cold run (extending the live state,
// resuming from the prompt cache after a divergence, an identical re-sync), context and id limits,
// cancellation leaving a consistent prefix; and, under the forward pass, a store whose expert
// read fails makes the step fail with IoError and produce nothing, while a store that hands
// out one expert at a time gives the same bits as the resident one.
#include <doctest/doctest.h>

#include <stdexcept>

#include "kernels/kernels.h"
#include "model/model.h"
#include "model/model_test_util.h"
#include "store/weight_store.h"

using namespace k3;
using namespace k3::test;

namespace {

constexpr int kSeed = 5;

// On an engine of its own without a prompt cache, so nothing is resumed.
std::vector<float> cold_logits(Engine& e, const std::vector<int32_t>& ids) {
    static std::unique_ptr<Engine> cold;
    if (!cold) cold = load_engine(cached_model("tiny", kSeed), 2, "", 0);
    REQUIRE(cold->info().fingerprint == e.info().fingerprint);
    auto s = cold->new_session(int(ids.size()) + 8);
    CancelFlag cancel{false};
    REQUIRE(s->sync(ids, cancel).ok());
    return {s->logits().begin(), s->logits().end()};
}

std::vector<int32_t> concat(std::vector<int32_t> a, const std::vector<int32_t>& b) {
    a.insert(a.end(), b.begin(), b.end());
    return a;
}

}  // namespace

TEST_CASE("session: prefix reuse gives the logits of a cold run") {
    auto e = load_engine(cached_model("tiny", kSeed), 2);
    const int V = e->info().n_vocab;
    const auto A = test_prompt(20, V, 1), B = test_prompt(9, V, 2), C = test_prompt(7, V, 3);
    auto s = e->new_session(128);
    CancelFlag cancel{false};
    int reused = -1;

    REQUIRE(s->sync(A, cancel, &reused).ok());
    CHECK(reused == 0);
    CHECK(same_bits(s->logits(), cold_logits(*e, A)));

    SUBCASE("extending the live state") {
        REQUIRE(s->sync(concat(A, B), cancel, &reused).ok());
        CHECK(reused == int(A.size()));
        CHECK(same_bits(s->logits(), cold_logits(*e, concat(A, B))));
    }
    SUBCASE("after decode steps, a prompt that extends them reuses them") {
        REQUIRE(s->append(B[0], cancel).ok());
        REQUIRE(s->append(B[1], cancel).ok());
        const auto next = concat(A, B);
        REQUIRE(s->sync(next, cancel, &reused).ok());
        CHECK(reused == int(A.size()) + 2);
        CHECK(same_bits(s->logits(), cold_logits(*e, next)));
    }
    SUBCASE("a diverging prompt resumes from the snapshot at the end of the earlier prompt") {
        REQUIRE(s->sync(concat(A, B), cancel, &reused).ok());
        REQUIRE(s->sync(concat(A, C), cancel, &reused).ok());
        CHECK(reused == int(A.size()));
        CHECK(same_bits(s->logits(), cold_logits(*e, concat(A, C))));
        // and back again: the prompt cache still holds all of A + B (with its logits)
        REQUIRE(s->sync(concat(A, B), cancel, &reused).ok());
        CHECK(reused == int(A.size() + B.size()));
        CHECK(same_bits(s->logits(), cold_logits(*e, concat(A, B))));
    }
    SUBCASE("a prompt diverging before any snapshot is recomputed from empty") {
        auto D = A;
        D[3] = (D[3] + 1) % V;
        REQUIRE(s->sync(D, cancel, &reused).ok());
        CHECK(reused == 0);
        CHECK(same_bits(s->logits(), cold_logits(*e, D)));
    }
    SUBCASE("re-syncing the same tokens reuses everything") {
        REQUIRE(s->sync(A, cancel, &reused).ok());
        CHECK(reused == int(A.size()));
        CHECK(same_bits(s->logits(), cold_logits(*e, A)));
    }
    SUBCASE("a prefix of the current tokens is recomputed from the best snapshot") {
        const std::vector<int32_t> shorter(A.begin(), A.begin() + 12);
        REQUIRE(s->sync(shorter, cancel, &reused).ok());
        CHECK(reused == 0);
        CHECK(same_bits(s->logits(), cold_logits(*e, shorter)));
    }
}

TEST_CASE("session: limits and cancellation") {
    auto e = load_engine(cached_model("tiny", kSeed), 2);
    const int V = e->info().n_vocab;
    CancelFlag cancel{false};
    auto s = e->new_session(16);
    const auto A = test_prompt(10, V, 4);

    CHECK(s->sync(test_prompt(17, V), cancel).code == StatusCode::ContextFull);
    CHECK(s->sync({}, cancel).code == StatusCode::InvalidArgument);
    CHECK(s->sync(std::vector<int32_t>{1, V}, cancel).code == StatusCode::InvalidArgument);
    CHECK(s->sync(std::vector<int32_t>{-1}, cancel).code == StatusCode::InvalidArgument);

    REQUIRE(s->sync(A, cancel).ok());
    for (int i = 0; i < 6; ++i) REQUIRE(s->append(1, cancel).ok());
    CHECK(s->tokens().size() == 16);
    CHECK(s->append(1, cancel).code == StatusCode::ContextFull);
    CHECK(s->tokens().size() == 16);

    // A cancelled sync leaves the session at a consistent prefix, and it still computes right.
    CancelFlag stop{true};
    const auto B = test_prompt(14, V, 5);
    CHECK(s->sync(B, stop).code == StatusCode::Cancelled);
    CHECK(s->tokens().size() <= B.size());
    CHECK(s->append(2, stop).code == StatusCode::Cancelled);
    REQUIRE(s->sync(B, cancel).ok());
    CHECK(same_bits(s->logits(), cold_logits(*e, B)));
    CHECK_THROWS(e->new_session(0));
}

namespace {

// Serves everything from a resident store, but can fail the n-th expert acquisition and can
// limit how many experts one acquisition may ask for.
class FaultyStore final : public WeightStore {
public:
    FaultyStore(const Checkpoint& c, int fail_at, int max_per_acquire)
        : inner_(make_resident_store(c)), fail_at_(fail_at), max_(max_per_acquire) {}
    Status acquire_layer(int il, const uint8_t** run) override { return inner_->acquire_layer(il, run); }
    void release_layer(int il) override { inner_->release_layer(il); }
    Status acquire_experts(int il, std::span<const int32_t> ex, const uint8_t** out) override {
        REQUIRE(int(ex.size()) <= max_);
        if (++calls_ == fail_at_) return {StatusCode::IoError, "injected: short read of an expert"};
        return inner_->acquire_experts(il, ex, out);
    }
    void release_experts(int il) override { inner_->release_experts(il); }
    int max_experts_per_acquire() const override { return max_; }
    WeightStoreStats stats() const override { return inner_->stats(); }

private:
    std::unique_ptr<WeightStore> inner_;
    int fail_at_, max_, calls_ = 0;
};

}  // namespace

TEST_CASE("forward: a failed expert read is an IoError; a one-expert store gives the same bits") {
    const Checkpoint ckpt = open_checkpoint(cached_model("tiny", kSeed));
    const ModelConfig& c = ckpt.config;
    const auto ids = test_prompt(9, c.vocab_size, 6);
    std::vector<float> ref(size_t(ids.size()) * size_t(c.vocab_size));
    {
        FaultyStore store(ckpt, -1, c.num_experts);
        Model m(ckpt, select_kernels(), 2, store);
        SequenceState st(c, 16);
        REQUIRE(forward(m, st, ids, ref.data(), true, nullptr).ok());
    }
    SUBCASE("failure") {
        FaultyStore store(ckpt, 3, c.num_experts);
        Model m(ckpt, select_kernels(), 2, store);
        SequenceState st(c, 16);
        std::vector<float> logits(size_t(c.vocab_size), -7.0f);
        const Status s = forward(m, st, ids, logits.data(), false, nullptr);
        CHECK(s.code == StatusCode::IoError);
        CHECK(s.message.find("injected") != std::string::npos);
        CHECK(st.n_past == 0);
        for (float v : logits) REQUIRE(v == -7.0f);
    }
    SUBCASE("one expert per acquisition") {
        FaultyStore store(ckpt, -1, 1);
        Model m(ckpt, select_kernels(), 3, store);
        SequenceState st(c, 16);
        std::vector<float> out(ref.size());
        REQUIRE(forward(m, st, ids, out.data(), true, nullptr).ok());
        CHECK(same_bits(out, ref));
    }
}

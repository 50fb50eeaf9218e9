// The three gates against the independent numpy reference's goldens (tests/fixtures/golden,
// written by tests/reference/make_goldens.py from the same make-model checkpoints):
//   1. prefill logits at every position within the preset's rel-L2 bound of the golden
//      (golden_tolerance.h: 1.3x the measured worst), same argmax;
//   2. greedy decoding by repeated full prefill gives the golden ids;
//   3. incremental decoding (prefill the prompt, then one token at a time) gives the same ids.
// On tiny and tiny-wide, with the selected kernel set and with scalar.
#include <doctest/doctest.h>

#include "model/golden_fixture.h"
#include "model/golden_tolerance.h"
#include "model/model_test_util.h"
#include "model/trace_compare.h"

using namespace k3;
using namespace k3::test;

namespace {

void check_gates(const std::string& preset, const std::string& kernels) {
    const Golden g = load_golden(preset);
    const std::string dir = cached_model(preset, g.seed);
    auto e = load_engine(dir, 2, kernels);
    INFO("preset " << preset << ", kernels " << e->info().kernels);
    REQUIRE(e->info().n_vocab == g.vocab);
    const size_t V = size_t(g.vocab), n_prompt = g.prompt.size();
    const double max_rel_l2 = golden_rel_l2_bound(preset);

    SUBCASE("gate 1: prefill logits at every position") {
        auto s = e->new_session(int(g.greedy.size()));
        std::vector<float> logits;
        REQUIRE(s->prefill_all_logits(g.greedy, logits).ok());
        double worst = 0;
        for (size_t t = 0; t < g.greedy.size(); ++t) {
            const double r = rel_l2(&logits[t * V], &g.logits[t * V], int(V));
            worst = std::max(worst, r);
            CHECK_MESSAGE(r <= max_rel_l2, "position " << t << " rel-L2 " << r);
            CHECK_MESSAGE(argmax(std::span(logits).subspan(t * V, V)) == g.argmax[t], "position " << t);
        }
        MESSAGE(preset << " (" << e->info().kernels << "): worst rel-L2 over " << g.greedy.size()
                       << " positions = " << worst);
        if (worst > max_rel_l2) {
            // Name the step where the engine first parts from the reference (test_trace.cpp).
            AttachedTrace trace(*e);
            REQUIRE(e->new_session(int(g.greedy.size()))->prefill_all_logits(g.greedy, logits).ok());
            const std::string scratch = scratch_dir("golden-trace").string();
            MESSAGE("first step that diverges from the reference: "
                    << first_divergence(trace.recorder.steps, reference_trace(dir, g.greedy, scratch),
                                        kTraceRelL2Tiny));  // the intermediates' bound, measured on tiny
        }
    }
    SUBCASE("gate 2: greedy by repeated full prefill") {
        std::vector<int32_t> seq = g.prompt;
        CancelFlag cancel{false};
        while (seq.size() < g.greedy.size()) {
            auto s = e->new_session(int(g.greedy.size()));  // a cold session: a full prefill every time
            REQUIRE(s->sync(seq, cancel).ok());
            seq.push_back(argmax(s->logits()));
        }
        CHECK(seq == g.greedy);
    }
    SUBCASE("gate 3: incremental decode") {
        auto s = e->new_session(int(g.greedy.size()));
        CancelFlag cancel{false};
        REQUIRE(s->sync(g.prompt, cancel).ok());
        std::vector<int32_t> seq = g.prompt;
        while (seq.size() < g.greedy.size()) {
            seq.push_back(argmax(s->logits()));
            if (seq.size() < g.greedy.size()) REQUIRE(s->append(seq.back(), cancel).ok());
        }
        CHECK(seq == g.greedy);
        CHECK(seq.size() - n_prompt == g.greedy.size() - n_prompt);
    }
}

}  // namespace

TEST_CASE("golden gates: tiny, selected kernels") { check_gates("tiny", ""); }
TEST_CASE("golden gates: tiny, scalar kernels") { check_gates("tiny", "scalar"); }
TEST_CASE("golden gates: tiny-wide, selected kernels") { check_gates("tiny-wide", ""); }
TEST_CASE("golden gates: tiny-wide, scalar kernels") { check_gates("tiny-wide", "scalar"); }

// PrefillProgress (k3/prefill_progress.h), the one model of a prompt's progress behind /v1/status,
// /slots and `k3serve run`'s line: exact at chunk boundaries, per layer inside a chunk (never past
// the chunk's end, never back), rate over the evaluated tokens only, frozen once the prompt is in.
#include <doctest/doctest.h>

#include "k3/prefill_progress.h"

using k3::PrefillFigures;
using k3::PrefillProgress;
using namespace std::chrono_literals;

TEST_CASE("prefill progress: chunks, layers inside a chunk, rate and time left, frozen at the end") {
    const auto t0 = PrefillProgress::Clock::now();
    PrefillProgress p;
    p.begin(/*total=*/1000, /*cached=*/200, /*n_layers=*/4, t0);
    PrefillFigures f = p.at(0, t0);
    CHECK(f.done_tokens == 200);
    CHECK(f.total_tokens == 1000);
    CHECK(f.cached_tokens == 200);
    CHECK_FALSE(f.tokens_per_s.has_value());  // nothing evaluated yet: no rate, no guess
    CHECK_FALSE(f.eta_s.has_value());

    // A chunk of 300 tokens starting at layer counter 40: 300 * l / 4 after l layers.
    p.chunk_started(300, 40);
    CHECK(p.at(40, t0 + 1s).done_tokens == 200);
    // the pass under way: the prompt's first, its tokens, the layers it has been through (never
    // past the model's: the counter also moves for the next step's layers)
    REQUIRE(p.at(40, t0 + 1s).pass.has_value());
    CHECK(p.at(40, t0 + 1s).pass->number == 1);
    CHECK(p.at(40, t0 + 1s).pass->tokens == 300);
    CHECK(p.at(40, t0 + 1s).pass->layers_done == 0);
    CHECK(p.at(43, t0 + 1s).pass->layers_done == 3);
    CHECK(p.at(90, t0 + 1s).pass->layers_done == 4);
    CHECK(p.at(43, t0 + 1s).pass->layers == 4);
    CHECK(p.at(41, t0 + 1s).done_tokens == 275);
    CHECK(p.at(43, t0 + 1s).done_tokens == 425);
    // the counter also moves for the next step's layers: the chunk never counts past its end
    CHECK(p.at(44, t0 + 1s).done_tokens == 500);
    CHECK(p.at(90, t0 + 1s).done_tokens == 500);
    f = p.at(42, t0 + 2s);
    REQUIRE(f.tokens_per_s.has_value());
    CHECK(*f.tokens_per_s == doctest::Approx(150.0 / 2.0));  // evaluated tokens only, not cached
    REQUIRE(f.eta_s.has_value());
    CHECK(*f.eta_s == doctest::Approx(650.0 / 75.0));

    p.chunk_done(500, t0 + 2s);
    f = p.at(44, t0 + 2s);
    CHECK(f.done_tokens == 500);
    CHECK(f.chunks_done == 1);
    CHECK_FALSE(f.pass.has_value());  // between passes

    // a reported end below a count already shown does not take it back
    p.chunk_done(400, t0 + 2s);
    CHECK(p.at(44, t0 + 2s).done_tokens == 500);
    p.chunk_started(500, 44);
    CHECK(p.at(46, t0 + 3s).done_tokens == 750);
    CHECK(p.at(46, t0 + 3s).pass->number == 3);  // (the two chunk_done calls above count two passes)
    CHECK(p.at(46, t0 + 3s).pass->tokens == 500);
    CHECK(p.at(46, t0 + 3s).pass->layers_done == 2);
    p.chunk_done(1000, t0 + 4s);
    f = p.at(99, t0 + 60s);
    CHECK(f.done_tokens == 1000);
    CHECK(p.finished());
    CHECK(f.elapsed_s == doctest::Approx(4.0));  // frozen at the prompt's end
    CHECK(*f.tokens_per_s == doctest::Approx(800.0 / 4.0));
    CHECK(*f.eta_s == 0.0);
}

TEST_CASE("prefill progress: a fully cached prompt is done at once; no layer count counts per chunk only") {
    const auto t0 = PrefillProgress::Clock::now();
    PrefillProgress cached;
    cached.begin(64, 64, 4, t0);
    CHECK(cached.finished());
    PrefillFigures f = cached.at(0, t0 + 5s);
    CHECK(f.done_tokens == 64);
    CHECK(f.elapsed_s == 0.0);
    CHECK(*f.eta_s == 0.0);

    PrefillProgress plain;
    plain.begin(100, 0, /*n_layers=*/0, t0);
    plain.chunk_started(50, 7);
    CHECK(plain.at(1000, t0 + 1s).done_tokens == 0);
    plain.chunk_done(50, t0 + 1s);
    CHECK(plain.at(1000, t0 + 1s).done_tokens == 50);

    // a chunk longer than what is left is counted as what is left
    PrefillProgress rest;
    rest.begin(100, 0, 2, t0);
    rest.chunk_started(500, 0);
    CHECK(rest.at(1, t0 + 1s).done_tokens == 50);
    CHECK(rest.at(2, t0 + 1s).done_tokens == 100);
}

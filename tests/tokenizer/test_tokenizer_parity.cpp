// Parity with the reference tokenizer (npm tiktoken, the WASM build of the Rust core): every
// corpus case must give exactly the golden ids, with the Kimi pattern over o200k_base and with
// cl100k_base, and the special-token cases with and without specials allowed.
#include <doctest/doctest.h>

#include <cstdio>

#include "tokenizer/rank_table.h"
#include "tokenizer/tokenizer_fixtures.h"

using namespace k3;
using namespace k3::test;

namespace {

std::string ids_text(const std::vector<int32_t>& ids) { return nlohmann::json(ids).dump(); }

// Returns the number of mismatching cases; prints the first few.
int compare_corpus(const Tokenizer& tok, const char* golden_file, const std::string& label) {
    auto corpus = read_jsonl(tokenizer_fixtures() / "corpus.jsonl");
    auto golden = read_jsonl(tokenizer_fixtures() / golden_file);
    REQUIRE(corpus.size() == golden.size());
    REQUIRE(corpus.size() >= 2000);
    int mismatches = 0;
    for (size_t i = 0; i < corpus.size(); ++i) {
        std::string text = corpus[i].get<std::string>();
        std::vector<int32_t> want = golden[i].get<std::vector<int32_t>>();
        std::vector<int32_t> got = tok.encode(text, false);
        if (got != want && ++mismatches <= 5)
            MESSAGE(label << " case " << i << " " << corpus[i].dump() << "\n  want " << ids_text(want) << "\n  got  "
                          << ids_text(got));
        // Decoding gives the text back, byte for byte.
        if (tok.decode(got) != text && ++mismatches <= 5) MESSAGE(label << " case " << i << " does not round-trip");
    }
    std::printf("tokenizer parity %s: %zu cases, %d mismatches\n", label.c_str(), corpus.size(), mismatches);
    return mismatches;
}

}  // namespace

TEST_CASE("Kimi pattern over o200k_base matches tiktoken on the whole corpus") {
    auto tok = kimi_over_o200k();
    CHECK(compare_corpus(*tok, "golden_kimi_o200k.jsonl", "kimi/o200k") == 0);
}

TEST_CASE("cl100k_base matches tiktoken on the whole corpus") {
    auto tok = cl100k();
    CHECK(compare_corpus(*tok, "golden_cl100k.jsonl", "cl100k") == 0);
}

TEST_CASE("special tokens: ids when allowed, plain text otherwise (matches tiktoken)") {
    auto tok = kimi_over_o200k();
    auto cases = read_jsonl(tokenizer_fixtures() / "special_cases.jsonl");
    auto golden = read_jsonl(tokenizer_fixtures() / "golden_specials.jsonl");
    REQUIRE(cases.size() == golden.size());
    int specials_seen = 0;
    for (size_t i = 0; i < cases.size(); ++i) {
        std::string text = cases[i].get<std::string>();
        auto allowed = tok->encode(text, true);
        auto plain = tok->encode(text, false);
        CAPTURE(text);
        CHECK(ids_text(allowed) == ids_text(golden[i]["allowed"].get<std::vector<int32_t>>()));
        CHECK(ids_text(plain) == ids_text(golden[i]["plain"].get<std::vector<int32_t>>()));
        for (int32_t id : plain) CHECK_FALSE(tok->is_special(id));
        for (int32_t id : allowed) specials_seen += tok->is_special(id);
        CHECK(tok->decode(allowed) == text);
        CHECK(tok->decode(plain) == text);
    }
    CHECK(specials_seen > 30);  // the cases do exercise specials
    CHECK(tok->special_id("[BOS]") == 199998);
    CHECK(tok->special_id("<|open|>") == 199998 + 3);
    CHECK_FALSE(tok->special_id("[bos]").has_value());
}

TEST_CASE("the two BPE merge strategies agree on long and random pieces") {
    // Long pieces use the heap merge, short ones the rescan; both must give the reference
    // result, so compare them directly on pieces of every length, including repetitive ones.
    auto tok = kimi_over_o200k();
    RankTable table;
    auto enc = npm_encoder("o200k_base");
    auto ranks = parse_tiktoken_bpe_ranks(enc["bpe_ranks"].get<std::string>());
    REQUIRE(table.build(ranks, nullptr));
    uint64_t state = 12345;
    auto next = [&] { state = state * 6364136223846793005ull + 1442695040888963407ull; return state >> 33; };
    const std::string alphabet[] = {"a", "b", "ab", " ", "e", "\xC3\xA9", "\xE4\xB8\xAD", "th", "in", "\xF0\x9F\x99\x82", "\xFF"};
    for (int trial = 0; trial < 400; ++trial) {
        std::string piece;
        size_t len = 1 + next() % 400;
        while (piece.size() < len) piece += alphabet[next() % (trial % 2 ? 4 : std::size(alphabet))];
        std::vector<int32_t> scan, heap;
        bpe_merge_scan(table, piece, scan);
        bpe_merge_heap(table, piece, heap);
        CAPTURE(piece);
        REQUIRE(scan == heap);
    }
}

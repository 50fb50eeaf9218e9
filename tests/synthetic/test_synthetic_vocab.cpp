// make-model's tokenizer files (tiktoken.model, tokenizer_config.json) and the synthetic
// vocabulary behind them: byte ranks first, every merge made of two lower ranks, K3's special
// tokens at K3's ids relative to the end, real words learnt from the corpus, deterministic.
#include <doctest/doctest.h>

#include "common/scratch.h"

#include <algorithm>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>

#include "k3/error.h"
#include "synthetic/checkpoint.h"
#include "synthetic/model_presets.h"
#include "synthetic/vocab.h"

using namespace k3;
namespace fs = std::filesystem;
using Json = nlohmann::json;

TEST_CASE("tokenizer files: byte ranks, unique merges, K3 specials at K3's relative ids") {
    const fs::path dir = k3::test::scratch_path("tokenizer");
    const ModelPreset* p = find_preset("tiny-wide");
    REQUIRE(p);
    const ModelConfig& c = p->config;
    write_synthetic_model(c, dir, 0, p->default_shards, false);
    const SyntheticVocab v = build_synthetic_vocab(c.vocab_size);

    // tiktoken.model: "base64 rank" lines, ranks 0..n-1 in order, bytes unique.
    std::istringstream lines(k3::test::read_file(dir / "tiktoken.model"));
    std::string line;
    int rank = 0;
    std::set<std::string> seen;
    while (std::getline(lines, line)) {
        const auto space = line.find(' ');
        REQUIRE(space != std::string::npos);
        CHECK(std::stoi(line.substr(space + 1)) == rank);
        CHECK(line.substr(0, space) == base64_encode(v.ranks[size_t(rank)]));
        CHECK(seen.insert(v.ranks[size_t(rank)]).second);
        ++rank;
    }
    CHECK(rank == c.vocab_size - 256);
    for (int b = 0; b < 256; ++b) CHECK(v.ranks[size_t(b)] == std::string(1, char(b)));
    // Every merged token is two lower-ranked tokens joined (so rank-BPE can produce it).
    std::map<std::string, int> index;
    for (int r = 0; r < int(v.ranks.size()); ++r) index[v.ranks[size_t(r)]] = r;
    for (int r = 256; r < int(v.ranks.size()); ++r) {
        const std::string& t = v.ranks[size_t(r)];
        bool split = false;
        for (size_t cut = 1; cut < t.size() && !split; ++cut) {
            auto a = index.find(t.substr(0, cut)), b = index.find(t.substr(cut));
            split = a != index.end() && b != index.end() && a->second < r && b->second < r;
        }
        CHECK_MESSAGE(split, "rank ", r);
    }

    // tokenizer_config.json: 256 specials keyed by id, the named ones where K3 has them.
    const Json tc = Json::parse(k3::test::read_file(dir / "tokenizer_config.json"));
    const Json& dec = tc["added_tokens_decoder"];
    CHECK(dec.size() == 256);
    const int base = c.vocab_size - 256;
    CHECK(dec[std::to_string(base)]["content"] == "[BOS]");
    CHECK(dec[std::to_string(base + 1)]["content"] == "[EOS]");
    CHECK(dec[std::to_string(base + 2)]["content"] == "<|end_of_msg|>");
    CHECK(dec[std::to_string(base + 3)]["content"] == "<|open|>");
    CHECK(dec[std::to_string(base + 4)]["content"] == "<|close|>");
    CHECK(dec[std::to_string(base + 5)]["content"] == "<|sep|>");
    CHECK(dec[std::to_string(base + 9)]["content"] == "[EOT]");
    CHECK(dec[std::to_string(base + 21)]["content"] == "<|media_pad|>");
    CHECK(dec[std::to_string(base + 65)]["content"] == "<osagent_mode>");
    CHECK(dec[std::to_string(base + 254)]["content"] == "[UNK]");
    CHECK(dec[std::to_string(base + 255)]["content"] == "[PAD]");
    CHECK(dec[std::to_string(base + 8)]["content"] == "<|reserved_token_" + std::to_string(base + 8) + "|>");
    for (const auto& [id, entry] : dec.items()) CHECK(entry["special"] == true);
    CHECK(tc["bos_token"] == "[BOS]");
    CHECK(tc["eos_token"] == "[EOS]");
    CHECK(!tc.contains("chat_template"));
    // config.json's ids point at [BOS], <|end_of_msg|>, [PAD].
    const Json cfg = Json::parse(k3::test::read_file(dir / "config.json"));
    CHECK(dec[std::to_string(cfg["text_config"]["bos_token_id"].get<int>())]["content"] == "[BOS]");
    CHECK(dec[std::to_string(cfg["text_config"]["eos_token_id"].get<int>())]["content"] == "<|end_of_msg|>");
    CHECK(dec[std::to_string(cfg["text_config"]["pad_token_id"].get<int>())]["content"] == "[PAD]");
}

TEST_CASE("larger vocabularies learn real words from the corpus and stay deterministic") {
    const SyntheticVocab demo = build_synthetic_vocab(4096);
    REQUIRE(demo.ranks.size() == 3840);
    std::set<std::string> tokens(demo.ranks.begin(), demo.ranks.end());
    CHECK(tokens.size() == demo.ranks.size());
    for (const char* word : {" the", " and", " of", "The", " model", " return", "    "}) CHECK_MESSAGE(tokens.count(word), word);
    const SyntheticVocab again = build_synthetic_vocab(4096);
    CHECK(again.ranks == demo.ranks);
    const SyntheticVocab big = build_synthetic_vocab(32768);  // k3-mini: extension beyond the corpus
    CHECK(big.ranks.size() == 32512);
    CHECK(std::set<std::string>(big.ranks.begin(), big.ranks.end()).size() == big.ranks.size());
    CHECK(std::equal(demo.ranks.begin(), demo.ranks.begin() + 300, big.ranks.begin()));  // same merges first
    CHECK_THROWS_AS(build_synthetic_vocab(511), Error);
}

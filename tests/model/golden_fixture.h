// The independent numpy reference's goldens (tests/fixtures/golden, written by
// tests/reference/make_goldens.py from the make-model checkpoints): the prompt, the greedy ids,
// every position's argmax and logits, and the seed of the checkpoint they were computed from.
#pragma once
#include <doctest/doctest.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/scratch.h"

namespace k3::test {

struct Golden {
    int seed = 0;
    int vocab = 0;
    std::vector<int32_t> prompt, greedy, argmax;
    std::vector<float> logits;  // [positions][vocab]
};

inline Golden load_golden(const std::string& preset) {
    const std::string dir = env_or("K3_SOURCE_DIR", ".") + "/tests/fixtures/golden/";
    std::ifstream in(dir + preset + ".json");
    REQUIRE_MESSAGE(in, "missing golden " << dir << preset << ".json");
    const nlohmann::json j = nlohmann::json::parse(in);
    Golden g;
    // the generator arguments the goldens were computed from
    const std::vector<std::string> args = j.at("make_model_args");
    REQUIRE(args.size() == 4);
    REQUIRE(args[0] == "--preset");
    REQUIRE(args[1] == preset);
    REQUIRE(args[2] == "--seed");
    g.seed = std::stoi(args[3]);
    g.vocab = j.at("vocab_size");
    g.prompt = j.at("prompt_ids").get<std::vector<int32_t>>();
    g.greedy = j.at("greedy_ids").get<std::vector<int32_t>>();
    g.argmax = j.at("argmax").get<std::vector<int32_t>>();
    std::ifstream lf(dir + j.at("logits_file").get<std::string>(), std::ios::binary);
    g.logits.resize(g.greedy.size() * size_t(g.vocab));
    lf.read(reinterpret_cast<char*>(g.logits.data()), std::streamsize(g.logits.size() * sizeof(float)));
    REQUIRE_MESSAGE(lf.gcount() == std::streamsize(g.logits.size() * sizeof(float)), "short golden logits file");
    return g;
}

// |a - b| / |b| over n values
inline double rel_l2(const float* a, const float* b, int n) {
    double num = 0, den = 0;
    for (int i = 0; i < n; ++i) {
        num += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
        den += double(b[i]) * b[i];
    }
    return std::sqrt(num / den);
}

}  // namespace k3::test

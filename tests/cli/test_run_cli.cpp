// `k3serve run` as users and scripts see it: the generated ids on the tiny golden model equal
// the reference's greedy ids, --dump-logits writes [positions][vocab] float32 matching the
// golden rows, --report has the documented fields, and the exit-code contract holds (0 ok,
// 2 usage or an untrusted checkpoint, --help 0).
#include <doctest/doctest.h>
#include <sys/wait.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "cli/run_command.h"
#include "common/daemon.h"
#include "k3/forward_stages.h"
#include "kernels/kernels.h"
#include "model/golden_tolerance.h"
#include "model/model_test_util.h"

using namespace k3::test;

namespace {

using Result = RunResult;
Result run(const std::string& args) { return run_k3serve(args); }

std::string join(const std::vector<int32_t>& v, const char* sep) {
    std::ostringstream s;
    for (size_t i = 0; i < v.size(); ++i) s << (i ? sep : "") << v[i];
    return s.str();
}

}  // namespace

TEST_CASE("k3serve run: golden ids, logits dump, report, exit codes") {
    const std::string golden_dir = env_or("K3_SOURCE_DIR", ".") + "/tests/fixtures/golden/";
    std::ifstream in(golden_dir + "tiny.json");
    REQUIRE(in);
    const nlohmann::json g = nlohmann::json::parse(in);
    const std::vector<int32_t> prompt = g.at("prompt_ids"), greedy = g.at("greedy_ids");
    const int V = g.at("vocab_size"), n_gen = int(greedy.size() - prompt.size());
    const std::string model = cached_model("tiny", std::stoi(g.at("make_model_args")[3].get<std::string>()));
    const std::string tmp = scratch_dir("run_cli").string() + "/";

    const Result r = run(model + " --ids " + join(prompt, ",") + " --gen " + std::to_string(n_gen) +
                         " --dump-logits " + tmp + "logits.f32 --report " + tmp + "report.json");
    REQUIRE(r.code == 0);
    const std::vector<int32_t> generated(greedy.begin() + std::ptrdiff_t(prompt.size()), greedy.end());
    CHECK(r.out.find("generated ids: " + join(generated, " ") + "\n") != std::string::npos);
    CHECK(r.out.find("step 0: token " + std::to_string(generated[0])) != std::string::npos);

    // the dump: the prompt's positions, float32 [positions][vocab], close to the golden rows
    std::ifstream lf(tmp + "logits.f32", std::ios::binary | std::ios::ate);
    REQUIRE(lf);
    CHECK(int64_t(lf.tellg()) == int64_t(prompt.size()) * V * 4);
    lf.seekg(0);
    std::vector<float> dumped(prompt.size() * size_t(V)), golden(dumped.size());
    lf.read(reinterpret_cast<char*>(dumped.data()), std::streamsize(dumped.size() * 4));
    std::ifstream gf(golden_dir + "tiny.logits.f32", std::ios::binary);
    gf.read(reinterpret_cast<char*>(golden.data()), std::streamsize(golden.size() * 4));
    double num = 0, den = 0;
    for (size_t i = 0; i < dumped.size(); ++i) {
        num += (double(dumped[i]) - golden[i]) * (double(dumped[i]) - golden[i]);
        den += double(golden[i]) * golden[i];
    }
    // over all prompt positions at once: never above the worst single position's bound
    CHECK(std::sqrt(num / den) < kGoldenRelL2Tiny);

    // the report
    std::ifstream rf(tmp + "report.json");
    REQUIRE(rf);
    const nlohmann::json rep = nlohmann::json::parse(rf);
    CHECK(rep.at("prompt_ids").get<std::vector<int32_t>>() == prompt);
    CHECK(rep.at("generated_ids").get<std::vector<int32_t>>() == generated);
    CHECK(rep.at("steps").size() == generated.size());
    CHECK(rep.at("peak_rss_bytes").get<int64_t>() > 0);
    CHECK(rep.at("seconds_per_token").get<double>() > 0);
    CHECK(rep.at("kv_bytes_per_position").get<int64_t>() == 4 * (32 + 8) * 4);  // 4 MLA layers x 40 floats
    CHECK(rep.at("exit_code") == 0);
    for (const char* key : {"trunk_bytes_read", "expert_bytes_read", "expert_requests", "kernels", "fingerprint"})
        CHECK_MESSAGE(rep.contains(key), key);

    // exit codes
    CHECK(run("--help").code == 0);
    CHECK(run(model).code == 2);                                   // no prompt
    CHECK(run(model + " --ids 1,2 --prompt x").code == 2);         // two prompts
    CHECK(run(model + " --ids 1,x").code == 2);                    // bad id list
    CHECK(run(model + " --ids 1 --bogus").code == 2);              // unknown option
    CHECK(run(tmp + "no-such-model --ids 1").code == 2);           // no checkpoint there
    CHECK(run(model + " --ids 1 --kernels sse9").code == 2);       // unknown kernel set
    // a known set this build or CPU lacks is refused too, never silently replaced
    for (const k3::KernelSet& set : k3::kernel_sets())
        if (set.usable() == nullptr) CHECK_MESSAGE(run(model + " --ids 1 --kernels " + set.name).code == 2, set.name);
    CHECK(run(model + " --ids 1," + std::to_string(V) + " --gen 1").code == 1);  // id outside the vocabulary
}

TEST_CASE("k3serve run: the report's forward_stage_seconds name every stage and account for the forward pass") {
    // tiny has every kind of layer: dense, KDA, MLA, MoE (k3/forward_stages.h)
    const std::string model = cached_model("tiny", 7);
    const std::string tmp = scratch_dir("run_cli_stages").string() + "/";
    std::vector<int32_t> prompt;
    for (int i = 0; i < 200; ++i) prompt.push_back(1 + (i * 37) % 500);
    const std::string ids = join(prompt, ",");
    const Result r = run(model + " --ids " + ids + " --gen 3 --report " + tmp + "report.json");
    REQUIRE(r.code == 0);
    CHECK(r.out.find("forward by stage:") != std::string::npos);
    std::ifstream rf(tmp + "report.json");
    REQUIRE(rf);
    const nlohmann::json rep = nlohmann::json::parse(rf);
    REQUIRE(rep.contains("forward_stage_seconds"));
    const nlohmann::json& st = rep.at("forward_stage_seconds");
    CHECK(st.size() == size_t(k3::kForwardStages));
    double sum = 0;
    for (int i = 0; i < k3::kForwardStages; ++i) {
        const char* name = k3::forward_stage_name(k3::ForwardStage(i));
        REQUIRE_MESSAGE(st.contains(name), name);
        CHECK(st.at(name).get<double>() >= 0);
        sum += st.at(name).get<double>();
    }
    // the stages every layer kind runs took time (a stage left without its clock would stay 0)
    for (const char* name : {"residual_mix", "norms", "kda_products", "kda_heads", "mla_products", "mla_attention",
                             "dense_mlp", "moe_products", "routing", "experts", "output"})
        CHECK_MESSAGE(st.at(name).get<double>() > 0, name);
    // they are parts of the forward pass (compute + waiting on reads), and cover nearly all of it:
    // only the few instructions between one clock and the next are left out
    const double forward = rep.at("compute_seconds").get<double>() + rep.at("io_seconds").get<double>();
    CHECK(sum <= forward * (1 + 1e-9) + 1e-6);
    CHECK(sum >= 0.8 * forward);
}

TEST_CASE("k3serve run: a damaged vision tower is refused by name; --no-vision serves the text without it") {
    const std::string model = cached_model("tiny", 7);
    const std::filesystem::path dir = scratch_dir("run_no_vision");
    std::filesystem::remove_all(dir);
    std::filesystem::copy(model, dir);
    // config.json now asks for a third tower block the shards do not hold.
    nlohmann::json config;
    {
        std::ifstream in(dir / "config.json");
        config = nlohmann::json::parse(in);
    }
    config["vision_config"]["vt_num_hidden_layers"] = 3;
    std::ofstream(dir / "config.json") << config.dump(2);

    const Result refused = run_k3serve(dir.string() + " --ids 1,2 --gen 1", /*with_stderr=*/true);
    CHECK(refused.code == 2);
    CHECK_MESSAGE(refused.out.find("missing vision tensor vision_tower.encoder.blocks.2.norm0.weight") != std::string::npos,
                  refused.out);
    CHECK(refused.out.find("--no-vision") != std::string::npos);

    const Result text_only = run(dir.string() + " --ids 1,2 --gen 1 --no-vision");
    CHECK(text_only.code == 0);
    CHECK(text_only.out.find("vision tower") == std::string::npos);
    // The sound model holds its tower, and the memory plan counts it.
    const Result with_tower = run(model + " --ids 1,2 --gen 1");
    CHECK(with_tower.code == 0);
    CHECK_MESSAGE(with_tower.out.find("with the vision tower's") != std::string::npos, with_tower.out);

    // The daemon the same way: refused at load (exit 2, naming the tensor).
    {
        DaemonProcess refused_daemon({dir.string(), "--port", "0", "--threads", "1"}, /*wait_ready=*/false);
        CHECK(refused_daemon.wait_exit() == 2);
        CHECK_MESSAGE(refused_daemon.log().find("missing vision tensor vision_tower.encoder.blocks.2.norm0.weight") !=
                          std::string::npos,
                      refused_daemon.log());
    }
}

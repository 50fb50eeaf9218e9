// Expert parallelism over MPI on this machine (docs/operations.md "Several machines"): a job of
// 2 or 3 ranks over loopback gives exactly one process's logits (every prompt position, bit for
// bit) and generated ids, resident and within small budgets, a prompt in one prefill pass or in
// several (docs/performance.md "Prefill passes"), and in decode; a daemon of 2 or 3 ranks gives
// one process's batched completions. The reference is the same binary as one process: the claim
// is equality, and any difference in which rows an expert computes or in what order a token's
// experts are summed changes low bits of the logits (checked by planting a reversed top-k sum on
// the distributed path in moe.cpp: the tiny-wide cases, top-3, failed on the dump; tiny's top-2
// sum of two terms is the same bits either way). Faults: another checkpoint and a rank whose own
// memory plan is refused stop the job at start, naming the rank; a rank killed, stopped or unable
// to read its experts turns /health and the requests, the one in flight included, to 503 naming
// it. netbench's exchange is the bytes plan --ranks counts.
#include <doctest/doctest.h>
#include <signal.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "cli/rank_projection.h"
#include "common/daemon.h"
#include "common/loopback_socket.h"
#include "common/model_cache.h"
#include "common/scratch.h"
#include "common/skip.h"
#include "common/wait.h"
#include "mpi_job.h"
#include "weights/config.h"

using namespace k3::test;

namespace {

struct Answer {
    std::string logits;                 // the --dump-logits file's bytes
    std::vector<int32_t> generated;     // the report's generated_ids
    std::string memory_plan;
};

Answer read_answer(const std::string& dir, const ProcessResult& r) {
    INFO(r.output);
    REQUIRE(r.exit_code == 0);
    Answer a;
    a.logits = read_file(dir + "/logits.f32");
    std::ifstream in(dir + "/report.json");
    const nlohmann::json report = nlohmann::json::parse(in);
    a.generated = report.at("generated_ids").get<std::vector<int32_t>>();
    a.memory_plan = report.at("memory_plan");
    return a;
}

// The tokens of a prefill pass, from the memory plan's "prefill pass N tokens".
int pass_tokens(const std::string& memory_plan) {
    const std::regex pass("prefill pass ([0-9]+) tokens");
    std::smatch m;
    REQUIRE(std::regex_search(memory_plan, m, pass));
    return std::stoi(m[1]);
}

std::string prompt_ids(int n) {
    std::ostringstream s;
    for (int i = 0; i < n; ++i) s << (i ? "," : "") << (7 + 37 * i) % 500;
    return s.str();
}

}  // namespace

TEST_CASE("2 and 3 ranks give one process's logits and ids at several budgets") {
    if (std::string why = mpi_missing(); !why.empty()) K3_SKIP(why);
    struct Budget {
        const char* name;
        std::string rank0, rank;   // memory options of rank 0 (run) and of the other ranks
        bool several_passes;       // the prompt takes several prefill passes
    };
    constexpr int kPromptTokens = 40;
    const Budget budgets[] = {
        {"resident, one pass", "", "", false},
        // passes of 7-10 tokens: several tokens per expert in a pass
        {"resident, several passes", "--prefill-mb 0.1", "", true},
        // a read ring for the trunk, 6-8 expert slots on every rank, passes of 2 tokens (the pass
        // would borrow the lm_head and the pinned layers for more: --pass-tokens keeps it short)
        {"streamed, small caches, short passes", "--trunk-gb 0.001 --cache-gb 0.0001 --prefill-mb 0.05 --pass-tokens 2",
         "--cache-gb 0.0001", true},
        // the same, the pass sized by what it borrows (the lm_head, rank 0's two pinned layers)
        {"streamed, small caches, passes sized by lent memory", "--trunk-gb 0.001 --cache-gb 0.0001 --prefill-mb 0.02",
         "--cache-gb 0.0001", true},
    };
    for (const char* preset : {"tiny", "tiny-wide"}) {
        const std::string model = cached_model(preset);
        for (const Budget& b : budgets) {
            const std::string args = model + " --ids " + prompt_ids(kPromptTokens) + " --gen 6 --threads 1 " + b.rank0;
            const std::string one_dir = scratch_dir("one").string();
            const Answer one = read_answer(
                one_dir, run_command(k3serve_bin() + " run " + args + " --dump-logits " + one_dir +
                                     "/logits.f32 --report " + one_dir + "/report.json"));
            CAPTURE(one.memory_plan);
            if (b.several_passes) CHECK(pass_tokens(one.memory_plan) < kPromptTokens);
            else CHECK(pass_tokens(one.memory_plan) >= kPromptTokens);
            for (int ranks : {2, 3}) {
                CAPTURE(preset);
                CAPTURE(b.name);
                CAPTURE(ranks);
                const std::string dir = scratch_dir("job").string();
                const Answer job = read_answer(
                    dir, run_command(mpi_job(ranks, "run " + args + " --dump-logits " + dir + "/logits.f32 --report " +
                                                        dir + "/report.json",
                                             model + " --threads 1 " + b.rank)));
                CHECK(job.memory_plan.find("expert parallelism: rank 0 of " + std::to_string(ranks)) != std::string::npos);
                CHECK(job.logits.size() == one.logits.size());
                CHECK(job.logits == one.logits);
                CHECK(job.generated == one.generated);
            }
        }
    }
}

TEST_CASE("ranks refuse another checkpoint, naming the rank") {
    if (std::string why = mpi_missing(); !why.empty()) K3_SKIP(why);
    const std::string model = cached_model("tiny"), other = cached_model("tiny-wide");
    const ProcessResult r =
        run_command(mpi_job(2, "run " + model + " --ids 1,2,3 --gen 1 --threads 1", other + " --threads 1"));
    INFO(r.output);
    // (mpirun's own exit code says little with --enable-recovery: each rank's word is checked)
    CHECK(r.output.find("generated ids") == std::string::npos);
    CHECK(r.output.find("k3serve run: expert parallelism: rank 1 (") != std::string::npos);
    CHECK(r.output.find("serves checkpoint") != std::string::npos);
    CHECK(r.output.find("k3serve rank: rank 0 refused this rank") != std::string::npos);
}

TEST_CASE("a rank whose memory plan is refused stops the job at start, naming the rank and why") {
    if (std::string why = mpi_missing(); !why.empty()) K3_SKIP(why);
    const std::string model = cached_model("tiny");
    // rank 1's expert cache holds no expert: its own plan refuses, rank 0's is fine
    const ProcessResult r = run_command(
        mpi_job(2, "run " + model + " --ids 1,2,3 --gen 1 --threads 1", model + " --threads 1 --cache-gb 0.000001"));
    INFO(r.output);
    CHECK(r.output.find("generated ids") == std::string::npos);
    CHECK(r.output.find("expert parallelism: rank 1 (") != std::string::npos);
    CHECK(r.output.find("could not load its experts: expert cache budget") != std::string::npos);
}

namespace {

// `k3serve serve` on `model` (with `serve_options`) as rank 0 of `ranks`, the others `k3serve
// rank` on `rank_model` (default: the same) with `rank_options`, with a 2 s heartbeat.
DaemonProcess start_job(int ranks, const std::string& model, std::string rank_model = "",
                        const std::vector<std::string>& rank_options = {},
                        const std::vector<std::string>& serve_options = {}) {
    if (rank_model.empty()) rank_model = model;
    std::vector<std::string> argv;
    std::istringstream words(mpirun_prefix() + " -x K3_RANK_HEARTBEAT_S=2 -n 1");
    for (std::string w; words >> w;) argv.push_back(w);
    const std::string bin = env_or_throw("K3SERVE_BIN");
    for (const std::string& w : {bin, std::string("serve"), model, std::string("--port"), std::string("0"),
                                 std::string("--threads"), std::string("1")})
        argv.push_back(w);
    argv.insert(argv.end(), serve_options.begin(), serve_options.end());
    for (const std::string& w : {std::string(":"), std::string("-n"),
                                 std::to_string(ranks - 1), bin, std::string("rank"), rank_model, std::string("--threads"),
                                 std::string("1")})
        argv.push_back(w);
    argv.insert(argv.end(), rank_options.begin(), rank_options.end());
    return DaemonProcess(DaemonProcess::Command{argv});
}

// The pid rank r printed at start ("rank R of N (pid P)").
pid_t rank_pid(const DaemonProcess& d, int r) {
    const std::regex line("rank " + std::to_string(r) + " of [0-9]+ \\(pid ([0-9]+)\\)");
    std::smatch m;
    const std::string log = d.log();
    REQUIRE(std::regex_search(log, m, line));
    return pid_t(std::stol(m[1]));
}

// Tokens a completion asks for when it must still be generating seconds later.
constexpr int kLongCompletion = 3000;

std::string completion_body() {
    return R"({"prompt":"The sea is","max_tokens":4,"temperature":0})";
}

// The choices (text and every token's logprobs) of greedy completions of `prompts` sent to `d`
// at once.
std::vector<std::string> concurrent_choices(DaemonProcess& d, const std::vector<std::string>& prompts) {
    std::vector<std::string> choices(prompts.size());
    std::vector<std::thread> clients;
    for (size_t i = 0; i < prompts.size(); ++i)
        clients.emplace_back([&, i] {
            const nlohmann::json body = {{"prompt", prompts[i]}, {"max_tokens", 40},  {"temperature", 0},
                                         {"ignore_eos", true},   {"logprobs", 3}};
            auto r = d.client().Post("/v1/completions", body.dump(), "application/json");
            if (r && r->status == 200) choices[i] = nlohmann::json::parse(r->body)["choices"].dump();
            else choices[i] = r ? r->body : "no answer";
        });
    for (auto& t : clients) t.join();
    return choices;
}

}  // namespace

TEST_CASE("batched decode over 2 and 3 ranks gives one process's texts and logprobs") {
    if (std::string why = mpi_missing(); !why.empty()) K3_SKIP(why);
    const std::string model = cached_model("tiny-wide");
    const std::vector<std::string> prompts = {"The sea", "A long time ago in a land far away", "Numbers: 1 2 3"};
    // passes of a few tokens, so that the prompts' prefill also goes in several passes
    const std::vector<std::string> options = {"--parallel", "3", "--prefill-mb", "0.1"};
    std::vector<std::string> serve_args = {model, "--port", "0", "--threads", "1"};
    serve_args.insert(serve_args.end(), options.begin(), options.end());
    std::vector<std::string> one;
    {
        DaemonProcess d(serve_args);
        one = concurrent_choices(d, prompts);
    }
    for (int ranks : {2, 3}) {
        CAPTURE(ranks);
        DaemonProcess job = start_job(ranks, model, "", {}, options);
        const std::vector<std::string> several = concurrent_choices(job, prompts);
        for (size_t i = 0; i < prompts.size(); ++i) {
            CAPTURE(i);
            CHECK(one[i].find("\"logprobs\"") != std::string::npos);
            CHECK(several[i] == one[i]);
        }
        auto c = job.client();
        REQUIRE(eventually([&] {
            auto r = c.Get("/slots");
            return r && r->status == 200 && nlohmann::json::parse(r->body)["steps"].get<int>() > 0;
        }));
        auto slots = c.Get("/slots");
        REQUIRE(slots);
        CHECK(nlohmann::json::parse(slots->body)["batched_decode_tokens"].get<int>() > 0);
        CHECK(job.log().find("expert parallelism: rank " + std::to_string(ranks - 1)) != std::string::npos);
    }
}

TEST_CASE("a killed or stopped rank turns /health to 503 naming it within seconds") {
    if (std::string why = mpi_missing(); !why.empty()) K3_SKIP(why);
    const std::string model = cached_model("tiny");
    for (int sig : {SIGKILL, SIGSTOP}) {
        CAPTURE(sig);
        DaemonProcess d = start_job(3, model);
        auto c = d.client();
        auto ok = c.Post("/v1/completions", completion_body(), "application/json");
        REQUIRE(ok);
        CHECK(ok->status == 200);
        const pid_t victim = rank_pid(d, 2);
        REQUIRE(kill(victim, sig) == 0);
        const bool unhealthy = eventually(
            [&] {
                auto h = c.Get("/health");
                return h && h->status == 503 && h->body.find("rank 2") != std::string::npos;
            },
            std::chrono::seconds(20));
        INFO(d.log());
        CHECK(unhealthy);
        CHECK(d.log().find("expert parallelism: rank 2") != std::string::npos);
        auto after = c.Post("/v1/completions", completion_body(), "application/json");
        REQUIRE(after);
        CHECK(after->status == 503);
        CHECK(after->body.find("rank 2") != std::string::npos);
    }
}

TEST_CASE("a request in flight when a rank stops or dies fails naming it, within seconds, without more tokens") {
    if (std::string why = mpi_missing(); !why.empty()) K3_SKIP(why);
    const std::string model = cached_model("tiny");
    const nlohmann::json long_request = {
        {"prompt", "The sea is"}, {"max_tokens", kLongCompletion}, {"temperature", 0}, {"ignore_eos", true}};
    for (int sig : {SIGSTOP, SIGKILL}) {
        CAPTURE(sig);
        DaemonProcess d = start_job(3, model);
        // A streamed completion, generating when the rank goes: its headers (200) are out, so
        // the failure is its last event, and no finish_reason or [DONE] follows.
        LoopbackSocket stream(d.port());
        nlohmann::json streamed = long_request;
        streamed["stream"] = true;
        REQUIRE(stream.send(json_post("/v1/completions", streamed.dump())));
        REQUIRE(stream.read_until("\"text\"").find("\"text\"") != std::string::npos);
        const pid_t victim = rank_pid(d, 2);
        const auto at = std::chrono::steady_clock::now();
        REQUIRE(kill(victim, sig) == 0);
        const std::string events = stream.read_until("data: [DONE]", 60000);
        const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - at).count();
        INFO(d.log());
        INFO(events.substr(events.size() > 2000 ? events.size() - 2000 : 0));
        CHECK(LoopbackSocket::status_of(events) == 200);
        CHECK(events.find("model_unhealthy") != std::string::npos);
        CHECK(events.find("rank 2") != std::string::npos);
        CHECK(events.find("\"finish_reason\":\"length\"") == std::string::npos);
        CHECK(seconds < 20);  // the 2 s heartbeat's deadline, not the 120 s exchange's
        // and the next request, not streamed: a 503 naming it
        auto r = d.client().Post("/v1/completions", long_request.dump(), "application/json");
        REQUIRE(r);
        CHECK(r->status == 503);
        CHECK(r->body.find("rank 2") != std::string::npos);
    }
}

TEST_CASE("a rank that cannot read its experts turns /health to 503 naming it") {
    if (std::string why = mpi_missing(); !why.empty()) K3_SKIP(why);
    const std::string model = cached_model("tiny");
    // Rank 1 streams its experts from a copy of the checkpoint (a small cache: nothing is read
    // before a request asks), whose shards then lose their data.
    const std::filesystem::path copy = scratch_dir("rank1") / "tiny";
    std::filesystem::copy(model, copy, std::filesystem::copy_options::recursive);
    DaemonProcess d = start_job(2, model, copy.string(), {"--cache-gb", "0.0001"});
    for (const auto& f : std::filesystem::directory_iterator(copy))
        if (f.path().extension() == ".safetensors") std::filesystem::resize_file(f.path(), 4096);
    auto c = d.client();
    auto r = c.Post("/v1/completions", completion_body(), "application/json");
    REQUIRE(r);
    INFO(d.log());
    CHECK(r->status == 503);
    CHECK(r->body.find("rank 1") != std::string::npos);
    auto h = c.Get("/health");
    REQUIRE(h);
    CHECK(h->status == 503);
    CHECK(h->body.find("rank 1 (") != std::string::npos);
    CHECK(h->body.find("cannot compute its experts") != std::string::npos);
}

TEST_CASE("netbench times a layer's exchange over 2 and 3 ranks, at the bytes plan --ranks counts") {
    if (std::string why = mpi_missing(); !why.empty()) K3_SKIP(why);
    const std::string model = cached_model("tiny-wide");
    const k3::ModelConfig c = k3::load_config(std::filesystem::path(model) / "config.json");
    for (int ranks : {2, 3}) {
        CAPTURE(ranks);
        const ProcessResult r = run_command(mpirun_prefix() + " -n " + std::to_string(ranks) + " " + k3serve_bin() +
                                            " netbench " + model + " --tokens 1,8,64 --seconds 0.2 --json");
        INFO(r.output);
        REQUIRE(r.exit_code == 0);
        // rank 0 alone prints: one JSON object
        const size_t from = r.output.find('{'), to = r.output.rfind('}');
        REQUIRE(from < to);
        const nlohmann::json j = nlohmann::json::parse(r.output.substr(from, to + 1 - from));
        CHECK(j["ranks"] == ranks);
        CHECK(j["width"] == c.routed_expert_hidden_size);
        REQUIRE(j["passes"].size() == 3);
        int64_t last_bytes = 0;
        for (const auto& p : j["passes"]) {
            const int tokens = p["tokens"];
            CAPTURE(tokens);
            CHECK(p["bytes"].get<int64_t>() == k3::cli::exchange_bytes(c, ranks, tokens));
            CHECK(p["bytes"].get<int64_t>() > last_bytes);
            last_bytes = p["bytes"];
            CHECK(p["rounds"].get<int>() >= 5);
            CHECK(p["min_us"].get<double>() > 0);
            CHECK(p["min_us"].get<double>() <= p["median_us"].get<double>());
            CHECK(p["median_us"].get<double>() <= p["p90_us"].get<double>());
        }
        CHECK(j["latency_us"].get<double>() >= 0);
    }
    // outside a job of several ranks: a usage error that says how to start it
    const ProcessResult alone = run_command(k3serve_bin() + " netbench " + model + " --tokens 1");
    CHECK(alone.exit_code == 2);
    CHECK(alone.output.find("mpirun -n 2 k3serve netbench") != std::string::npos);
}

TEST_CASE("decode steps between a long prompt's layers over 2 ranks give one process's texts") {
    // Rank 0 drives the other ranks layer by layer; a decode step between two layers of a pass
    // is a walk of its own through the layers, each exchange complete before the next
    // (docs/performance.md, "Other streams during a prefill").
    if (std::string why = mpi_missing(); !why.empty()) K3_SKIP(why);
    const std::string model = cached_model("tiny-wide");
    const std::vector<std::string> options = {"--parallel", "2", "--prefill-mb", "0.1", "--interleave-tokens", "2",
                                              "--decode-wait-s", "0.000001", "--draft-max", "0"};
    nlohmann::json long_prompt = nlohmann::json::array();
    for (int i = 0; i < 60; ++i) long_prompt.push_back(1 + (i * 37) % 500);
    const nlohmann::json short_body = {{"prompt", "The sea"}, {"max_tokens", 400}, {"temperature", 0}, {"ignore_eos", true}};
    const nlohmann::json long_body = {{"prompt", long_prompt}, {"max_tokens", 8}, {"temperature", 0}, {"ignore_eos", true}};
    // the short request decodes when the long prompt comes
    auto run = [&](DaemonProcess& d) {
        std::vector<std::string> texts(2);
        std::thread short_client([&] {
            auto r = d.client().Post("/v1/completions", short_body.dump(), "application/json");
            texts[0] = r && r->status == 200 ? nlohmann::json::parse(r->body)["choices"][0]["text"].dump() : "no answer";
        });
        auto c = d.client();
        REQUIRE(eventually([&] {
            auto s = c.Get("/v1/status");
            if (!s || s->status != 200) return false;
            const nlohmann::json active = nlohmann::json::parse(s->body)["active"];
            return !active.empty() && active[0]["generated_tokens"].get<int>() > 0;
        }));
        auto r = c.Post("/v1/completions", long_body.dump(), "application/json");
        texts[1] = r && r->status == 200 ? nlohmann::json::parse(r->body)["choices"][0]["text"].dump() : "no answer";
        short_client.join();
        auto slots = c.Get("/slots");
        REQUIRE(slots);
        return std::make_pair(texts, nlohmann::json::parse(slots->body)["steps_between_layers"].get<int>());
    };
    std::vector<std::string> serve_args = {model, "--port", "0", "--threads", "1"};
    serve_args.insert(serve_args.end(), options.begin(), options.end());
    std::vector<std::string> one;
    {
        DaemonProcess d(serve_args);
        one = run(d).first;
    }
    DaemonProcess job = start_job(2, model, "", {}, options);
    const auto [several, between] = run(job);
    CHECK(several[0] == one[0]);
    CHECK(several[1] == one[1]);
    CHECK(between > 0);
}

// k3serve run: greedy generation from a prompt on the command line. Prints one line per step
// (the token, the seconds it took, the bytes read for it), the generated ids and text, and
// totals; optionally dumps the prompt's logits at every position and a JSON report. This is
// the tool the golden and speed checks script against, so its output is plain and stable.
#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "k3/engine.h"
#include "k3/tokenizer.h"
#include "k3/cli.h"
#include "k3/error.h"

namespace k3::cli {

namespace {

constexpr const char* kUsage =
    "usage: k3serve run MODEL_DIR (--ids 1,2,3 | --prompt TEXT | --prompt-file PATH) [options]\n"
    "\n"
    "Greedy generation (argmax, lowest id on ties), incremental decode.\n"
    "  --ids LIST           prompt as comma-separated token ids\n"
    "  --prompt TEXT        prompt text (encoded with the model's tokenizer, no special tokens)\n"
    "  --prompt-file PATH   prompt text read from a file (use this for non-ASCII text)\n"
    "  --gen N              tokens to generate (default 8)\n"
    "  --threads N          compute threads (default: physical cores)\n"
    "  --kernels NAME       force a kernel set: scalar, avx2, avx512 (default: best for this CPU)\n"
    "  --ctx N              session context (default: prompt + gen)\n"
    "  --dump-logits PATH   write the prompt's logits at every position, float32 LE [positions][vocab]\n"
    "  --report PATH        write the run's facts as JSON\n"
    "\n"
    "Memory (README, 'Memory budgets'; default: everything resident):\n"
    "  --preset NAME        laptop, desktop, workstation, server, max (K3-sized trunk/cache GB) or auto\n"
    "  --trunk-gb X         trunk budget: pinned layers + a 2-slot read ring (overrides the preset)\n"
    "  --cache-gb X         expert cache budget (overrides the preset)\n"
    "  --trunk DIR          read the trunk from a pack made by `k3serve pack-trunk`\n"
    "\n"
    "Exit codes: 0 ok, 1 runtime failure, 2 usage or untrusted checkpoint, 4 a routed expert failed to load.\n";

struct Args {
    std::string model_dir;
    std::vector<int32_t> ids;
    std::string prompt;
    bool have_ids = false, have_prompt = false;
    int gen = 8;
    int threads = 0;
    int ctx = 0;
    std::string kernels, dump_logits, report;
    MemoryOptions memory;
};

double parse_gb(const std::string& flag, const char* v) {
    char* end = nullptr;
    errno = 0;
    const double x = std::strtod(v, &end);
    if (errno || end == v || *end || !(x >= 0) || x > 1e6)
        throw Error(ErrorKind::Usage, flag + " expects a size in GB (a non-negative number), got '" + v + "'");
    return x;
}

int parse_int(const std::string& flag, const char* v) {
    char* end = nullptr;
    errno = 0;
    const long n = std::strtol(v, &end, 10);
    if (errno || end == v || *end || n < 0 || n > 1'000'000'000)
        throw Error(ErrorKind::Usage, flag + " expects a non-negative integer, got '" + v + "'");
    return int(n);
}

std::vector<int32_t> parse_ids(const char* v) {
    std::vector<int32_t> ids;
    std::stringstream in(v);
    std::string item;
    while (std::getline(in, item, ','))
        if (!item.empty()) ids.push_back(parse_int("--ids", item.c_str()));
    if (ids.empty()) throw Error(ErrorKind::Usage, "--ids needs at least one id");
    return ids;
}

Args parse_args(int argc, char** argv) {
    Args a;
    for (int i = 1; i < argc; ++i) {
        const std::string f = argv[i];
        auto value = [&]() -> const char* {
            if (i + 1 >= argc) throw Error(ErrorKind::Usage, f + " needs a value");
            return argv[++i];
        };
        if (f == "--ids") a.ids = parse_ids(value()), a.have_ids = true;
        else if (f == "--prompt") a.prompt = value(), a.have_prompt = true;
        else if (f == "--prompt-file") {
            const std::string path = value();
            std::ifstream in(path, std::ios::binary);
            if (!in) throw Error(ErrorKind::Usage, "cannot read --prompt-file " + path);
            a.prompt.assign(std::istreambuf_iterator<char>(in), {});
            if (a.have_prompt) throw Error(ErrorKind::Usage, "give only one of --prompt and --prompt-file");
            a.have_prompt = true;
        } else if (f == "--gen") a.gen = parse_int(f, value());
        else if (f == "--threads") a.threads = parse_int(f, value());
        else if (f == "--ctx") a.ctx = parse_int(f, value());
        else if (f == "--kernels") a.kernels = value();
        else if (f == "--dump-logits") a.dump_logits = value();
        else if (f == "--report") a.report = value();
        else if (f == "--preset") a.memory.preset = value();
        else if (f == "--trunk-gb") a.memory.trunk_gb = parse_gb(f, value());
        else if (f == "--cache-gb") a.memory.cache_gb = parse_gb(f, value());
        else if (f == "--trunk") a.memory.trunk_dir = value();
        else if (!f.empty() && f[0] == '-') throw Error(ErrorKind::Usage, "unknown option " + f);
        else if (a.model_dir.empty()) a.model_dir = f;
        else throw Error(ErrorKind::Usage, "unexpected argument " + f);
    }
    if (a.model_dir.empty()) throw Error(ErrorKind::Usage, "missing MODEL_DIR");
    if (a.have_ids == a.have_prompt) throw Error(ErrorKind::Usage, "give exactly one of --ids, --prompt, --prompt-file");
    return a;
}

int32_t argmax(std::span<const float> logits) {
    int32_t best = 0;
    for (size_t i = 1; i < logits.size(); ++i)
        if (logits[i] > logits[size_t(best)]) best = int32_t(i);
    return best;
}

int64_t peak_rss_bytes() {
    rusage ru{};
    getrusage(RUSAGE_SELF, &ru);
    return int64_t(ru.ru_maxrss) * 1024;
}

struct Step {
    int32_t token;
    double seconds;
    uint64_t trunk_bytes, expert_bytes;
};

void write_logits(const std::string& path, const std::vector<float>& logits) {
    std::ofstream out(path, std::ios::binary);
    out.write(reinterpret_cast<const char*>(logits.data()), std::streamsize(logits.size() * sizeof(float)));
    if (!out) throw Error(ErrorKind::Io, "cannot write --dump-logits " + path);
}

int run(const Args& args) {
    EngineOptions opt;
    opt.model_dir = args.model_dir;
    opt.threads = args.threads;
    opt.kernels = args.kernels;
    opt.memory = args.memory;
    auto engine = Engine::load(opt, [](const std::string& s) { std::fprintf(stderr, "k3serve: %s\n", s.c_str()); });
    const ModelInfo& info = engine->info();
    std::printf("%s\n", info.memory_plan.c_str());

    // The tokenizer is needed for --prompt; with --ids it only adds the text to the output.
    std::unique_ptr<Tokenizer> tok;
    if (args.have_prompt || std::filesystem::exists(std::filesystem::path(args.model_dir) / "tiktoken.model")) {
        try {
            tok = Tokenizer::load(args.model_dir);
        } catch (const Error& e) {
            if (args.have_prompt) throw;
            std::fprintf(stderr, "k3serve: no text output: %s\n", e.what());
        }
    }
    std::vector<int32_t> prompt = args.ids;
    if (args.have_prompt) {
        if (!tok) throw Error(ErrorKind::Usage, "--prompt needs a tokenizer (tiktoken.model) in " + args.model_dir);
        prompt = tok->encode(args.prompt, /*allow_special=*/false);
        if (prompt.empty()) throw Error(ErrorKind::Usage, "the prompt encodes to no tokens");
    }
    const int n_ctx = args.ctx > 0 ? args.ctx : int(prompt.size()) + std::max(args.gen, 1);
    auto session = engine->new_session(n_ctx);
    const CancelFlag cancel{false};

    std::vector<Step> steps;
    std::vector<int32_t> generated;
    Status status;
    auto bytes_now = [&] { return engine->stats(); };
    auto clock = [] { return std::chrono::steady_clock::now(); };
    auto record = [&](std::chrono::steady_clock::time_point t0, const EngineStats& s0) {
        const EngineStats s1 = bytes_now();
        const int32_t next = argmax(session->logits());
        steps.push_back({next, std::chrono::duration<double>(clock() - t0).count(),
                         s1.trunk_bytes_read - s0.trunk_bytes_read, s1.expert_bytes_read - s0.expert_bytes_read});
        generated.push_back(next);
        const Step& st = steps.back();
        std::printf("step %zu: token %d  %.4f s  read %.3f GB (trunk %.3f, experts %.3f)\n", steps.size() - 1,
                    st.token, st.seconds, double(st.trunk_bytes + st.expert_bytes) / 1e9, double(st.trunk_bytes) / 1e9,
                    double(st.expert_bytes) / 1e9);
        std::fflush(stdout);
    };

    // step 0: the prompt (all positions' logits when dumping them)
    auto t0 = clock();
    EngineStats s0 = bytes_now();
    if (!args.dump_logits.empty()) {
        std::vector<float> all;
        status = session->prefill_all_logits(prompt, all);
        if (status.ok()) write_logits(args.dump_logits, all);
    } else {
        status = session->sync(prompt, cancel);
    }
    if (status.ok() && args.gen > 0) record(t0, s0);
    // decode steps
    for (int i = 1; status.ok() && i < args.gen; ++i) {
        t0 = clock();
        s0 = bytes_now();
        status = session->append(generated.back(), cancel);
        if (status.ok()) record(t0, s0);
    }

    const EngineStats total = engine->stats();
    double decode_s = 0;
    for (size_t i = 1; i < steps.size(); ++i) decode_s += steps[i].seconds;
    const double s_per_token = steps.size() > 1 ? decode_s / double(steps.size() - 1) : 0;
    std::string text;
    if (tok) {
        try {
            text = tok->decode(generated);
        } catch (const Error&) {
            text.clear();
        }
    }
    std::printf("prompt ids:");
    for (int32_t id : prompt) std::printf(" %d", id);
    std::printf("\ngenerated ids:");
    for (int32_t id : generated) std::printf(" %d", id);
    std::printf("\n");
    if (tok) std::printf("text: %s\n", text.c_str());
    std::printf("prompt: %zu tokens in %.4f s; decode: %.4f s/token over %zu steps; peak RSS %.3f GB; kernels %s\n",
                prompt.size(), steps.empty() ? 0.0 : steps[0].seconds, s_per_token,
                steps.size() > 1 ? steps.size() - 1 : 0, double(peak_rss_bytes()) / 1e9, info.kernels.c_str());

    // Where the time and the bytes went (whole run).
    double wall = 0;
    for (const Step& s : steps) wall += s.seconds;
    const double bytes_read = double(total.trunk_bytes_read + total.expert_bytes_read);
    const double io_share = wall > 0 ? total.io_seconds / wall : 0;
    const double read_mb_per_s = wall > 0 ? bytes_read / 1e6 / wall : 0;
    const double retention = total.expert_requests ? double(total.expert_hits) / double(total.expert_requests) : 0;
    std::printf("reads: trunk %.3f GB, experts %.3f GB in %.3f s of wall time: %.0f MB/s; waiting on reads %.3f s "
                "(I/O share %.1f%%)\n",
                double(total.trunk_bytes_read) / 1e9, double(total.expert_bytes_read) / 1e9, wall, read_mb_per_s,
                total.io_seconds, 100 * io_share);
    std::printf("experts: %llu requests, %llu served without a read (true retention %.1f%%), %llu evictions, "
                "%llu failed; trunk: %d layers pinned, ring of %d slots\n",
                (unsigned long long)total.expert_requests, (unsigned long long)total.expert_hits, 100 * retention,
                (unsigned long long)total.expert_evictions, (unsigned long long)total.expert_read_failures,
                total.pinned_layers, total.ring_slots);

    int code = 0;
    if (!status.ok()) {
        std::fprintf(stderr, "k3serve run: step %zu failed: %s\n", steps.size(), status.message.c_str());
        code = 1;
    }
    // A step that failed stopped the run (exit 1); 4 is for a run that completed although an
    // expert read failed along the way.
    if (status.ok() && total.expert_read_failures > 0) {
        std::fprintf(stderr, "k3serve run: %llu routed expert read(s) failed; the output cannot be trusted\n",
                     (unsigned long long)total.expert_read_failures);
        code = 4;
    }

    if (!args.report.empty()) {
        nlohmann::json r;
        r["model"] = info.name;
        r["fingerprint"] = info.fingerprint;
        r["kernels"] = info.kernels;
        r["memory_plan"] = info.memory_plan;
        r["prompt_ids"] = prompt;
        r["generated_ids"] = generated;
        if (tok) r["text"] = text;
        r["steps"] = nlohmann::json::array();
        for (const Step& s : steps)
            r["steps"].push_back({{"token", s.token}, {"seconds", s.seconds}, {"trunk_bytes", s.trunk_bytes},
                                  {"expert_bytes", s.expert_bytes}});
        r["prefill_seconds"] = steps.empty() ? 0.0 : steps[0].seconds;
        r["seconds_per_token"] = s_per_token;
        r["peak_rss_bytes"] = peak_rss_bytes();
        r["trunk_bytes_read"] = total.trunk_bytes_read;
        r["expert_bytes_read"] = total.expert_bytes_read;
        r["expert_requests"] = total.expert_requests;
        r["expert_hits"] = total.expert_hits;
        r["expert_read_failures"] = total.expert_read_failures;
        r["expert_evictions"] = total.expert_evictions;
        r["expert_true_retention"] = retention;
        r["pinned_layers"] = total.pinned_layers;
        r["ring_slots"] = total.ring_slots;
        r["wall_seconds"] = wall;
        r["io_share"] = io_share;
        r["read_mb_per_s"] = read_mb_per_s;
        r["io_seconds"] = total.io_seconds;
        r["compute_seconds"] = total.compute_seconds;
        r["kv_bytes_per_position"] = info.kv_bytes_per_position;
        r["status"] = status.ok() ? "ok" : status.message;
        r["exit_code"] = code;
        std::ofstream out(args.report);
        // Generated text may end inside a UTF-8 sequence (or be invalid bytes from a random model):
        // the report replaces such bytes with U+FFFD rather than failing.
        out << r.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
        if (!out) throw Error(ErrorKind::Io, "cannot write --report " + args.report);
    }
    return code;
}

}  // namespace

int run_main(int argc, char** argv) {
    for (int i = 1; i < argc; ++i)
        if (std::strcmp(argv[i], "--help") == 0 || std::strcmp(argv[i], "-h") == 0) {
            std::fputs(kUsage, stdout);
            return 0;
        }
    try {
        return run(parse_args(argc, argv));
    } catch (const Error& e) {
        std::fprintf(stderr, "k3serve run: %s\n", e.what());
        if (e.kind() == ErrorKind::Usage) std::fputs(kUsage, stderr);
        return exit_code_for(e.kind());
    } catch (const std::exception& e) {
        std::fprintf(stderr, "k3serve run: %s\n", e.what());
        return 1;
    }
}

}  // namespace k3::cli

// k3serve run: greedy generation from a prompt on the command line. Prints one line per step
// (the token, the seconds it took, the bytes read for it), the generated ids and text, and
// totals; optionally dumps the prompt's logits at every position and a JSON report. This is
// the tool the golden and speed checks script against, so its output is plain and stable (the
// prompt's progress line goes to stderr, and only when that is a terminal).
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <optional>
#include <span>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "cli/prefill_line.h"
#include "k3/chat.h"
#include "k3/engine.h"
#include "k3/forward_stages.h"
#include "k3/xtml.h"
#include "k3/next_token.h"
#include "k3/kernel_set_names.h"
#include "k3/stats.h"
#include "k3/tokenizer.h"
#include "k3/cli.h"
#include "cli/subcommand.h"
#include "k3/error.h"

namespace k3::cli {

namespace {

constexpr const char* kUsageHead =
    "usage: k3serve run MODEL_DIR (--ids 1,2,3 | --prompt TEXT | --prompt-file PATH) [options]\n"
    "\n"
    "Greedy generation (argmax, lowest id on ties), incremental decode. While the prompt is\n"
    "evaluated, a progress line (tokens done, rate, time left) is kept on stderr if it is a terminal.\n"
    "  --ids LIST           prompt as comma-separated token ids\n"
    "  --prompt TEXT        prompt text (encoded with the model's tokenizer, no special tokens)\n"
    "  --prompt-file PATH   prompt text read from a file (use this for non-ASCII text)\n"
    "  --image PATH         a PNG or JPEG (repeatable; needs --prompt or --prompt-file): the prompt becomes\n"
    "                       one user chat turn, the images then the text, and the generation prompt\n"
    "                       (docs/model.md 'Images in the prompt')\n"
    "  --no-thinking        that chat turn without thinking: no effort message, the answer's channel\n"
    "                       opened at once (default: thinking on, as for an API request that says nothing)\n"
    "  --thinking-effort E  that chat turn's thinking effort: low, high or max (default max)\n"
    "  --gen N              tokens to generate (default 8)\n"
    "  --threads N          compute threads (default: physical cores)\n"
    "  --kernels NAME       force a kernel set: ";
// then the kernel-set table's names (k3/kernel_set_names.h) and
constexpr const char* kUsageTail =
    " (default: best for this CPU)\n"
    "  --no-vision          text only: the checkpoint's vision tower is neither checked nor read\n"
    "  --ctx N              session context (default: prompt + gen)\n"
    "  --dump-logits PATH   write the prompt's logits at every position, float32 LE [positions][vocab]\n"
    "  --report PATH        write the run's facts as JSON\n"
    "\n"
    "Memory (README, 'Memory budgets'; default: everything resident):\n"
    "  --preset NAME        laptop, desktop, workstation, server, max (K3-sized trunk/cache GB) or auto\n"
    "  --trunk-gb X         trunk budget: pinned layers + a read ring of the rest (overrides the preset)\n"
    "  --cache-gb X         expert cache budget (overrides the preset)\n"
    "  --trunk DIR          read the trunk from a pack made by `k3serve pack-trunk`\n"
    "  --no-lookahead       do not prefetch the experts the next layer's router predicts\n"
    "  --prefill-mb X       a prefill pass's own memory, to which a budget lends the expert cache's\n"
    "                       spare slots, the lm_head and pinned trunk layers; a pass is as many\n"
    "                       tokens as that holds (default: the preset's, else 256 MiB)\n"
    "  --pass-tokens N      at most N tokens a prefill pass (default 0: as many as memory allows)\n"
    "\n"
    "Exit codes: 0 ok, 1 runtime failure, 2 usage or untrusted checkpoint, 4 a routed expert failed to load.\n";

std::string usage() { return kUsageHead + kernel_set_list() + kUsageTail; }

struct Args {
    std::string model_dir;
    std::vector<int32_t> ids;
    std::string prompt;
    bool have_ids = false, have_prompt = false;
    int gen = 8;
    int threads = 0;
    int ctx = 0;
    std::string kernels, dump_logits, report;
    std::vector<std::string> images;
    bool vision = true;
    // The chat turn's thinking, as the API's default (docs/api.md "Thinking"): on, effort max.
    bool thinking = true;
    std::string thinking_effort = "max";
    bool thinking_flag = false;  // --no-thinking or --thinking-effort given (they need a chat turn)
    MemoryOptions memory;
};

std::vector<int32_t> parse_ids(const char* v) {
    std::vector<int32_t> ids;
    std::stringstream in(v);
    std::string item;
    while (std::getline(in, item, ',')) {
        if (item.empty()) continue;
        char* end = nullptr;
        errno = 0;
        const long n = std::strtol(item.c_str(), &end, 10);
        if (errno || *end || n < 0 || n > 1'000'000'000)
            throw Error(ErrorKind::Usage, "--ids expects non-negative integers, got '" + item + "'");
        ids.push_back(int32_t(n));
    }
    if (ids.empty()) throw Error(ErrorKind::Usage, "--ids needs at least one id");
    return ids;
}

Args parse_args(ArgList& args) {
    Args a;
    while (args.next()) {
        if (args.is("--ids")) a.ids = parse_ids(args.value()), a.have_ids = true;
        else if (args.is("--prompt")) a.prompt = args.value(), a.have_prompt = true;
        else if (args.is("--prompt-file")) {
            const std::string path = args.value();
            std::ifstream in(path, std::ios::binary);
            if (!in) throw Error(ErrorKind::Usage, "cannot read --prompt-file " + path);
            a.prompt.assign(std::istreambuf_iterator<char>(in), {});
            if (a.have_prompt) throw Error(ErrorKind::Usage, "give only one of --prompt and --prompt-file");
            a.have_prompt = true;
        } else if (args.is("--gen")) a.gen = int(args.integer());
        else if (args.is("--threads")) a.threads = int(args.integer());
        else if (args.is("--ctx")) a.ctx = int(args.integer());
        else if (args.is("--kernels")) a.kernels = args.value();
        else if (args.is("--dump-logits")) a.dump_logits = args.value();
        else if (args.is("--report")) a.report = args.value();
        else if (args.is("--preset")) a.memory.preset = args.value();
        else if (args.is("--trunk-gb")) a.memory.trunk_gb = args.number();
        else if (args.is("--cache-gb")) a.memory.cache_gb = args.number();
        else if (args.is("--trunk")) a.memory.trunk_dir = args.value();
        else if (args.is("--prefill-mb")) a.memory.prefill_mb = args.number();
        else if (args.is("--pass-tokens")) a.memory.pass_tokens = int(args.number());
        else if (args.is("--no-lookahead")) a.memory.lookahead = false;
        else if (args.is("--no-vision")) a.vision = false;
        else if (args.is("--image")) a.images.push_back(args.value());
        else if (args.is("--no-thinking")) a.thinking = false, a.thinking_flag = true;
        else if (args.is("--thinking-effort")) a.thinking_effort = args.value(), a.thinking_flag = true;
        else args.positional({&a.model_dir});
    }
    if (a.model_dir.empty()) throw Error(ErrorKind::Usage, "missing MODEL_DIR");
    if (a.have_ids == a.have_prompt) throw Error(ErrorKind::Usage, "give exactly one of --ids, --prompt, --prompt-file");
    if (!a.images.empty() && !a.have_prompt)
        throw Error(ErrorKind::Usage, "--image needs --prompt or --prompt-file (the text of the user turn)");
    if (!a.images.empty() && !a.vision) throw Error(ErrorKind::Usage, "--image cannot be combined with --no-vision");
    if (a.thinking_flag && a.images.empty())
        throw Error(ErrorKind::Usage, "--no-thinking and --thinking-effort apply to a chat turn (--image); "
                                      "--ids and --prompt alone are evaluated as given");
    if (std::find(std::begin(xtml::kThinkingEfforts), std::end(xtml::kThinkingEfforts), a.thinking_effort) ==
        std::end(xtml::kThinkingEfforts))
        throw Error(ErrorKind::Usage, "--thinking-effort must be low, high or max, got '" + a.thinking_effort + "'");
    return a;
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

// What a run produced, for the summary and the report.
struct Outcome {
    std::vector<int32_t> prompt, generated;
    std::vector<Step> steps;  // step 0 is the prompt
    std::string text;
    bool have_text = false;
    Status status;
    EngineStats total;
    ForwardStageSeconds stages{};  // the forward pass's wall time by stage (k3/forward_stages.h)
    EngineStats prompt_read;       // what the prompt's passes did (the counters' growth over step 0)

    double prefill_seconds() const { return steps.empty() ? 0.0 : steps[0].seconds; }
    double seconds_per_token() const {
        double decode_s = 0;
        for (size_t i = 1; i < steps.size(); ++i) decode_s += steps[i].seconds;
        return steps.size() > 1 ? decode_s / double(steps.size() - 1) : 0;
    }
    double wall_seconds() const {
        double wall = 0;
        for (const Step& s : steps) wall += s.seconds;
        return wall;
    }
    double io_share() const { return wall_seconds() > 0 ? total.io_seconds / wall_seconds() : 0; }
    double read_mb_per_s() const {
        const double bytes_read = double(total.trunk_bytes_read + total.expert_bytes_read);
        return wall_seconds() > 0 ? bytes_read / 1e6 / wall_seconds() : 0;
    }
};

void print_summary(const ModelInfo& info, const Outcome& o) {
    const EngineStats& total = o.total;
    std::printf("prompt ids:");
    for (int32_t id : o.prompt) std::printf(" %d", id);
    std::printf("\ngenerated ids:");
    for (int32_t id : o.generated) std::printf(" %d", id);
    std::printf("\n");
    if (o.have_text) std::printf("text: %s\n", o.text.c_str());
    std::printf("prompt: %zu tokens in %.4f s; decode: %.4f s/token over %zu steps; peak RSS %.3f GB; kernels %s\n",
                o.prompt.size(), o.prefill_seconds(), o.seconds_per_token(), o.steps.size() > 1 ? o.steps.size() - 1 : 0,
                double(peak_rss_bytes()) / 1e9, info.kernels.c_str());
    // The prompt's passes (docs/performance.md, "Prefill passes"): each reads the weights once.
    const EngineStats& p = o.prompt_read;
    if (p.passes > 0)
        std::printf("prompt passes: %llu of up to %d tokens, each reading %.3f GB (trunk %.3f, experts %.3f); %llu "
                    "expert read waits, %.3f GB lent (the expert cache's slots, the lm_head read again %llu times, "
                    "%llu pinned layers unpinned)\n",
                    (unsigned long long)p.passes, total.pass_tokens_max,
                    double(p.trunk_bytes_read + p.expert_bytes_read) / 1e9 / double(p.passes),
                    double(p.trunk_bytes_read) / 1e9 / double(p.passes), double(p.expert_bytes_read) / 1e9 / double(p.passes),
                    (unsigned long long)p.expert_read_waits, double(p.pass_lent_bytes) / 1e9,
                    (unsigned long long)p.lm_head_reads, (unsigned long long)p.pass_unpinned_layers);

    // Where the time and the bytes went (whole run).
    const double retention = total.expert_requests ? double(total.expert_hits) / double(total.expert_requests) : 0;
    std::printf("reads: trunk %.3f GB, experts %.3f GB in %.3f s of wall time: %.0f MB/s; waiting on reads %.3f s "
                "(I/O share %.1f%%)\n",
                double(total.trunk_bytes_read) / 1e9, double(total.expert_bytes_read) / 1e9, o.wall_seconds(),
                o.read_mb_per_s(), total.io_seconds, 100 * o.io_share());
    std::printf("experts: %llu requests, %llu served without a read (true retention %.1f%%), %llu evictions, "
                "%llu failed; trunk: %d layers pinned, ring of %.3f GB\n",
                (unsigned long long)total.expert_requests, (unsigned long long)total.expert_hits, 100 * retention,
                (unsigned long long)total.expert_evictions, (unsigned long long)total.expert_read_failures,
                total.pinned_layers, double(total.ring_bytes) / 1e9);
    std::printf("forward by stage:");
    for (int i = 0; i < kForwardStages; ++i)
        if (o.stages[size_t(i)] >= 5e-4) std::printf(" %s %.3f s", forward_stage_name(ForwardStage(i)), o.stages[size_t(i)]);
    std::printf("\n");
    if (total.lookahead_predicted > 0)
        std::printf("lookahead: %.1f%% of %llu predicted experts chosen; %llu read ahead, %llu of them asked for; waited "
                    "%.3f s for experts, %.3f s for the trunk\n",
                    100.0 * double(total.lookahead_confirmed) / double(total.lookahead_predicted),
                    (unsigned long long)total.lookahead_predicted, (unsigned long long)total.expert_prefetch_reads,
                    (unsigned long long)total.expert_prefetch_hits, total.expert_wait_seconds, total.trunk_wait_seconds);
}

void write_report(const std::string& path, const ModelInfo& info, const Outcome& o, int code, double load_seconds) {
    nlohmann::json r;
    r["load_seconds"] = load_seconds;  // Engine::load: open, read the weights, bind the model
    r["model"] = info.name;
    r["fingerprint"] = info.fingerprint;
    r["kernels"] = info.kernels;
    r["memory_plan"] = info.memory_plan;
    r["prompt_ids"] = o.prompt;
    r["generated_ids"] = o.generated;
    if (o.have_text) r["text"] = o.text;
    r["steps"] = nlohmann::json::array();
    for (const Step& s : o.steps)
        r["steps"].push_back({{"token", s.token}, {"seconds", s.seconds}, {"trunk_bytes", s.trunk_bytes},
                              {"expert_bytes", s.expert_bytes}});
    r["prefill_seconds"] = o.prefill_seconds();
    r["prefill_passes"] = o.prompt_read.passes;
    r["prefill_trunk_bytes"] = o.prompt_read.trunk_bytes_read;
    r["prefill_expert_bytes"] = o.prompt_read.expert_bytes_read;
    r["prefill_expert_read_waits"] = o.prompt_read.expert_read_waits;
    r["seconds_per_token"] = o.seconds_per_token();
    r["peak_rss_bytes"] = peak_rss_bytes();
    // The engine's counters, named as /metrics names them (k3/stats.h).
    visit_stats(o.total, [&](const StatField& f) {
        if (f.whole) r[f.key] = uint64_t(f.value);
        else r[f.key] = f.value;
    });
    // Where the forward pass's time went (k3/forward_stages.h); the rest of the wall time is the
    // sessions' and the sampler's.
    for (int i = 0; i < kForwardStages; ++i)
        r["forward_stage_seconds"][forward_stage_name(ForwardStage(i))] = o.stages[size_t(i)];
    r["wall_seconds"] = o.wall_seconds();
    r["io_share"] = o.io_share();
    r["read_mb_per_s"] = o.read_mb_per_s();
    r["kv_bytes_per_position"] = info.kv_bytes_per_position;
    r["status"] = o.status.ok() ? "ok" : o.status.message;
    r["exit_code"] = code;
    std::ofstream out(path);
    // Generated text may end inside a UTF-8 sequence (or be invalid bytes from a random model):
    // the report replaces such bytes with U+FFFD rather than failing.
    out << r.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
    if (!out) throw Error(ErrorKind::Io, "cannot write --report " + path);
}

// Session::sync's loop (begin_prompt, then a step per chunk), with a progress line on stderr
// when it is a terminal.
Status evaluate_prompt(Engine& engine, Session& session, std::span<const int32_t> prompt, const CancelFlag& cancel) {
    int reused = 0;
    if (Status s = session.begin_prompt(prompt, &reused); !s.ok()) return s;
    std::optional<PrefillLine> line;
    if (isatty(STDERR_FILENO) && session.prompt_pending() > 0)
        line.emplace(engine, stderr, int(prompt.size()), reused);
    while (session.prompt_pending() > 0) {
        const Engine::StepItem item{&session, session.next_prompt_chunk(size_t(engine.max_step_tokens())), false, &cancel};
        if (line) line->chunk_started(int(item.tokens.size()));
        if (Status s = engine.step(std::span(&item, 1)); !s.ok()) return s;
        session.prompt_chunk_done();
        if (line) line->chunk_done(int(session.tokens().size()));
    }
    return Status::Ok();
}

// --image: one user turn of the images (in order, before the text) and the prompt text, with
// the generation prompt; each image's pad becomes its rows. Thinking follows the API's rule for
// a request that says nothing (on, effort max: xtml-tools.md "Request fields to encoder
// inputs"), not ChatOptions' own default (off), unless --no-thinking says otherwise.
ExpandedPrompt image_chat_prompt(const Args& args, const Tokenizer& tok, const ModelInfo& info) {
    if (!info.vision)
        throw Error(ErrorKind::Usage, "--image: this model has no vision tower (a text-only checkpoint)");
    std::vector<std::shared_ptr<const PreparedImage>> images;
    ChatMessage user;
    user.role = "user";
    user.content = args.prompt;
    for (const std::string& path : args.images) {
        std::ifstream in(path, std::ios::binary);
        if (!in) throw Error(ErrorKind::Usage, "cannot read --image " + path);
        const std::string bytes(std::istreambuf_iterator<char>(in), {});
        try {
            images.push_back(std::make_shared<const PreparedImage>(
                prepare_image(std::span(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()))));
        } catch (const Error& e) {
            throw Error(ErrorKind::Usage, "--image " + path + ": " + e.what());
        }
        const ImageGeometry& g = images.back()->geometry;
        user.images.push_back({0, g.width, g.height});
        std::printf("image %s: %dx%d, %lld rows\n", path.c_str(), g.width, g.height, (long long)g.rows());
    }
    const std::vector<ChatMessage> messages = {user};
    ChatOptions chat;
    chat.thinking = args.thinking;
    chat.thinking_effort = args.thinking_effort;
    const std::vector<int32_t> rendered = render_chat(tok, messages, chat);
    return expand_image_pads(rendered, *tok.special_id(xtml::kMediaPad), images, info.n_vocab);
}

int run(const Args& args) {
    EngineOptions opt;
    opt.model_dir = args.model_dir;
    opt.threads = args.threads;
    opt.kernels = args.kernels;
    opt.memory = args.memory;
    opt.vision = args.vision;
    const auto load_start = std::chrono::steady_clock::now();
    auto engine = Engine::load(opt, [](const std::string& s) { std::fprintf(stderr, "k3serve: %s\n", s.c_str()); });
    const double load_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - load_start).count();
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
    std::vector<PromptImage> images;
    if (args.have_prompt) {
        if (!tok) throw Error(ErrorKind::Usage, "--prompt needs a tokenizer (tiktoken.model) in " + args.model_dir);
        if (!args.images.empty()) {
            ExpandedPrompt chat = image_chat_prompt(args, *tok, info);
            prompt = std::move(chat.ids);
            images = std::move(chat.images);
        } else {
            prompt = tok->encode(args.prompt, /*allow_special=*/false);
        }
        if (prompt.empty()) throw Error(ErrorKind::Usage, "the prompt encodes to no tokens");
    }
    const int n_ctx = args.ctx > 0 ? args.ctx : int(prompt.size()) + std::max(args.gen, 1);
    auto session = engine->new_session(n_ctx);
    session->set_prompt_images(std::move(images));
    const CancelFlag cancel{false};

    std::vector<Step> steps;
    std::vector<int32_t> generated;
    Status status;
    // The daemon's next-token step with its defaults: greedy, nothing adjusted, no grammar and
    // no end token, so a run generates exactly --gen tokens (what the goldens script against).
    NextToken chooser{NextTokenRules{}};
    auto bytes_now = [&] { return engine->stats(); };
    auto clock = [] { return std::chrono::steady_clock::now(); };
    auto record = [&](std::chrono::steady_clock::time_point t0, const EngineStats& s0) {
        const EngineStats s1 = bytes_now();
        const int32_t next = chooser.choose(session->logits(), args.gen - int(generated.size())).id;
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
        status = evaluate_prompt(*engine, *session, prompt, cancel);
    }
    EngineStats prompt_read = bytes_now();
    prompt_read.passes -= s0.passes;
    prompt_read.trunk_bytes_read -= s0.trunk_bytes_read;
    prompt_read.expert_bytes_read -= s0.expert_bytes_read;
    prompt_read.expert_read_waits -= s0.expert_read_waits;
    prompt_read.pass_lent_bytes -= s0.pass_lent_bytes;
    prompt_read.pass_unpinned_layers -= s0.pass_unpinned_layers;
    prompt_read.lm_head_reads -= s0.lm_head_reads;
    if (status.ok() && args.gen > 0) record(t0, s0);
    // decode steps
    for (int i = 1; status.ok() && i < args.gen; ++i) {
        t0 = clock();
        s0 = bytes_now();
        status = session->append(generated.back(), cancel);
        if (status.ok()) record(t0, s0);
    }

    Outcome o{std::move(prompt), std::move(generated), std::move(steps), {}, bool(tok), status, engine->stats(),
              forward_stage_seconds(*engine), prompt_read};
    if (tok) {
        try {
            o.text = tok->decode(o.generated);
        } catch (const Error&) {
            o.text.clear();
        }
    }
    print_summary(info, o);

    int code = 0;
    if (!status.ok()) {
        std::fprintf(stderr, "k3serve run: step %zu failed: %s\n", o.steps.size(), status.message.c_str());
        code = 1;
    }
    // A step that failed stopped the run (exit 1); 4 is for a run that completed although an
    // expert read failed along the way.
    if (status.ok() && o.total.expert_read_failures > 0) {
        std::fprintf(stderr, "k3serve run: %llu routed expert read(s) failed; the output cannot be trusted\n",
                     (unsigned long long)o.total.expert_read_failures);
        code = 4;
    }
    if (!args.report.empty()) write_report(args.report, info, o, code, load_seconds);
    return code;
}

}  // namespace

int run_main(int argc, char** argv) {
    return run_subcommand({"run", usage()}, argc, argv, [](ArgList& args) { return run(parse_args(args)); });
}

}  // namespace k3::cli

// `k3serve plan [MODEL_DIR | CONFIG.json] [--memory-gb N[,N...]] ...`: what a memory budget buys
// on a model before anything is loaded or even downloaded: the memory plan (the engine's own
// make_memory_plan), the bytes read from disk per decoded token and per prefill chunk, and the
// s/token and prefill tokens/s to expect from this machine's bandwidths (measured on the
// model's files, or given as flags), from the projection `doctor` uses (projection.h). Without
// a model, the real Kimi K3 (built-in config). docs/performance.md, "Planning a budget".
#include <algorithm>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "cli/machine_speed.h"
#include "cli/projection.h"
#include "cli/rank_projection.h"
#include "cli/subcommand.h"
#include "io/disk_bandwidth.h"
#include "model/state.h"
#include "weights/chunk_size.h"
#include "k3/cli.h"
#include "k3/error.h"
#include "k3/forward_stages.h"
#include "k3/options.h"
#include "kimi_k3_config.h"
#include "store/memory_plan.h"

namespace k3::cli {

namespace {

const char* const kUsage =
    "usage: k3serve plan [MODEL_DIR | CONFIG.json] [options]\n"
    "  Prints the memory plan for each budget, the bytes read per decoded token and per prefill\n"
    "  pass, and the s/token and prefill tokens/s to expect on this machine. Without a model,\n"
    "  the real Kimi K3 (built-in config).\n"
    "  --memory-gb N[,N...]  memory for the engine: the plan --preset auto makes with N GB\n"
    "                        available (default: this machine's MemAvailable)\n"
    "  --preset NAME         a named preset instead (laptop, desktop, workstation, server, max)\n"
    "  --resident            every weight in memory, as `run` and `serve` without a budget\n"
    "  --trunk-gb X --cache-gb Y  explicit budgets instead\n"
    "  --prefill-mb M        a prefill pass's own memory (default: the preset's, else 256 MB), to\n"
    "                        which a budget lends the expert cache's slots beyond the pipeline's,\n"
    "                        the lm_head and pinned trunk layers\n"
    "  --pass-tokens N       at most N tokens a prefill pass (default: as many as memory allows)\n"
    "  --compress-ratio R    streamed trunk bytes x R (a `pack-trunk --compress` pack: about 0.75)\n"
    "  --disk-gbps D         sequential read bandwidth (default: measured on MODEL_DIR's files,\n"
    "                        else on a scratch file in the current directory)\n"
    "  --expert-gbps D       random expert-sized reads at depth 16 (default: measured, else D)\n"
    "  --mem-gbps M          memory read bandwidth (default: measured, all cores)\n"
    "  --gflops G            bf16 matmul throughput for prefill (default: measured, all cores)\n"
    "  --attention-gflops G  blocked attention throughput at the model's widths, at every context\n"
    "                        (default: measured over 1k, 8k and 32k cached keys; a pass takes the\n"
    "                        figure nearest its mean keys)\n"
    "  --prompt-tokens N[,N...]  also the time to first token of prompts of N tokens (from an\n"
    "                        empty cache), with the attention's share\n"
    "  --ranks N             also expert parallelism over N machines like this one (each its own disk,\n"
    "                        memory and cores at the figures above; docs/operations.md 'Several\n"
    "                        machines'): each rank's plan, the exchange, s/token and time to first token\n"
    "  --net-gbit G          the network between them, Gbit/s each way (default 10)\n"
    "  --net-latency-us U    a layer's round trip between two of them, microseconds (default 50)\n"
    "  --rank-memory-gb G0,G1,...  each rank's machine's memory instead (N values, rank 0 first)\n"
    "  --rank-disk-gbps D0,D1,...  each rank's disk instead, GB/s (N values; expert reads at the same)\n"
    "  --seconds S           time for each read-speed measurement, and half the time for the compute\n"
    "                        rates at the model's widths (default 1.5)\n"
    "Exit status: 0 every budget has a plan; 1 some budget has none (printed); 2 usage error.\n";

// Every speed "not given" (-1), so that what no flag gives is measured.
Bandwidths unmeasured() {
    Bandwidths b;
    b.disk_gbps = b.expert_gbps = b.mem_gbps = b.gflops = b.attention_gflops = -1;
    return b;
}

struct PlanArgs {
    std::string target;
    std::vector<double> memory_gb;
    MemoryOptions memory;
    Bandwidths given = unmeasured();
    std::vector<double> prompt_tokens;
    double seconds = 1.5;
    bool resident = false;
    int ranks = 1;
    Network net;
    std::vector<double> rank_memory_gb, rank_disk_gbps;  // [rank], or empty: every machine alike
};

std::vector<double> number_list(const std::string& flag, const std::string& list) {
    std::vector<double> out;
    for (size_t at = 0; at <= list.size();) {
        size_t comma = std::min(list.find(',', at), list.size());
        const std::string item = list.substr(at, comma - at);
        char* end = nullptr;
        const double x = std::strtod(item.c_str(), &end);
        if (item.empty() || *end || !(x > 0) || x > 1e6)
            throw Error(ErrorKind::Usage, flag + " expects positive numbers separated by commas, got '" + list + "'");
        out.push_back(x);
        at = comma + 1;
    }
    return out;
}

double gb(double bytes) { return bytes / 1e9; }

void print_budget(const ModelSizes& m, const io::MemoryPlan& plan, const Bandwidths& b) {
    const Projection p = project(m, plan, b, plan.chunk_tokens);
    std::printf("  %s\n", plan.describe().c_str());
    std::printf("  decode: reads %.3f GB per token (trunk %.3f, experts %.3f at %.0f%% cache hits), sweeps %.3f GB of "
                "memory\n",
                gb(double(p.disk_bytes_per_token)), gb(double(p.trunk_disk_bytes)), gb(double(p.expert_disk_bytes)),
                100 * p.expert_hit, gb(double(p.memory_bytes_per_token)));
    std::printf("          expected %.3f s/token (trunk reads %.3f s, memory %.3f s, expert reads %.3f s",
                p.seconds_per_token, p.trunk_seconds, p.memory_seconds, p.expert_seconds);
    if (p.waiting_layers > 0)
        std::printf("; %d layer reads not overlapped with compute: +%.3f s", p.waiting_layers, p.wait_seconds);
    std::printf(")\n");
    std::printf("  prefill: a prompt token costs %.3f MB in a pass (its MLA rows %.3f MB more, the context's)\n",
                double(pass_cost(m.config).per_token) / 1e6, double(kv_bytes_per_position(m.config)) / 1e6);
    std::printf("  prefill: a %d-token pass reads %.3f GB (trunk %.3f, experts %.3f) in %.3f s while it computes "
                "%.3f s, %.3f s not overlapped: bounded by %s, expected %.1f tokens/s\n",
                p.prefill_chunk, gb(double(p.trunk_disk_bytes + p.chunk_expert_disk_bytes)), gb(double(p.trunk_disk_bytes)),
                gb(double(p.chunk_expert_disk_bytes)), p.chunk_read_seconds, p.chunk_compute_seconds,
                p.chunk_exposed_seconds, p.chunk_bound.c_str(), p.prefill_tokens_per_s);
    if (p.pass_lent_bytes > 0)
        std::printf("  prefill: such a pass borrows %.3f GB; it reads %d unpinned trunk layer%s (%.3f GB, waited for, in the "
                    "time not overlapped) and %s\n",
                    gb(double(p.pass_lent_bytes)), p.pass_unpinned_layers, p.pass_unpinned_layers == 1 ? "" : "s",
                    gb(double(p.pass_unpinned_bytes)),
                    p.pass_lm_head_bytes > 0 ? "the lm_head again before its output product"
                                             : "keeps the lm_head");
}

void print_prompt(const PromptEstimate& e) {
    std::printf("  time to first token, %lld-token prompt: %.2f s (%d pass%s of up to %d tokens, each reading %.3f GB; "
                "reads %.2f s, compute %.2f s of which attention %.2f s; %d pass%s bounded by reads)\n",
                (long long)e.tokens, e.seconds, e.chunks, e.chunks == 1 ? "" : "es", e.pass_tokens,
                gb(double(e.pass_read_bytes)), e.read_seconds, e.compute_seconds, e.attention_seconds, e.read_bound_chunks,
                e.read_bound_chunks == 1 ? "" : "es");
    if (e.unpinned_layer_reads > 0 || e.lm_head_read_seconds > 0)
        std::printf("    borrowed memory: %d unpinned trunk layer reads over the passes, the lm_head read again in %.2f s\n",
                    e.unpinned_layer_reads, e.lm_head_read_seconds);
    // by stage, named as the run report's forward_stage_seconds names them
    std::printf("    compute by stage:");
    for (int i = 0; i < kForwardStages; ++i)
        if (e.stage_seconds[size_t(i)] >= 5e-4)
            std::printf(" %s %.3f s", forward_stage_name(ForwardStage(i)), e.stage_seconds[size_t(i)]);
    std::printf("\n");
}

void print_ranks(const ModelSizes& m, const RanksProjection& r, const Network& net, bool each_own,
                 const std::vector<double>& prompt_tokens) {
    std::printf("  %d ranks (%s; network %g Gbit/s, %g us a layer's round trip):\n", r.ranks,
                each_own ? "each machine's memory and disk as given, the rest at the figures above"
                         : "each machine at the figures above",
                net.gbit, net.latency_us);
    for (int k = 0; k < r.ranks; ++k) {
        const Projection& p = r.projections[size_t(k)];
        std::printf("    rank %d: %.1f%% of each layer's experts%s; machine %.0f GB, disk %.2f GB/s; %s\n", k,
                    100 * r.parts[size_t(k)].experts, k == 0 ? " and the trunk" : "",
                    gb(double(r.plans[size_t(k)].mem_available)), r.machines[size_t(k)].disk_gbps,
                    r.plans[size_t(k)].describe().c_str());
        std::printf("      decode: reads %.3f GB per token (trunk %.3f, experts %.3f at %.0f%% cache hits), sweeps %.3f GB; "
                    "its experts %.3f s a token\n",
                    gb(double(p.disk_bytes_per_token)), gb(double(p.trunk_disk_bytes)), gb(double(p.expert_disk_bytes)),
                    100 * p.expert_hit, gb(double(p.memory_bytes_per_token)), p.expert_part_seconds);
    }
    std::printf("    exchange: %.1f kB a MoE layer, %.2f MB a token: %.4f s a token with the round trips\n",
                double(r.exchange_bytes_per_layer) / 1e3, double(r.exchange_bytes_per_layer) * m.moe_layers / 1e6,
                r.exchange_seconds_per_token);
    std::printf("    expected %.3f s/token\n", r.seconds_per_token);
    std::printf("    prefill: a %d-token pass exchanges %.3f GB (%.3f s), expected %.3f s a pass, %.1f tokens/s\n",
                r.pass_tokens, gb(double(r.pass_exchange_bytes)), r.pass_exchange_seconds, r.pass_seconds,
                r.prefill_tokens_per_s);
    for (double n : prompt_tokens) {
        const PromptEstimate e =
            estimate_prompt(m, r.plans[0], r.machines[0], int64_t(n), r.parts[0], [&](int64_t tokens, const Projection& rank0) {
                return wait_for_others(m, r, net, tokens, rank0);
            });
        std::printf("    time to first token, %lld-token prompt: %.2f s (%d pass%s)\n", (long long)e.tokens, e.seconds,
                    e.chunks, e.chunks == 1 ? "" : "es");
    }
}

void print_model_rates(const ModelRates& r, int chunk, const ModelConfig& c) {
    std::printf("  at the model's widths (measured, one thread): bf16 GFLOP/s by columns");
    for (const auto& [cols, g] : r.bf16_gflops) std::printf(" %lld: %.0f", (long long)cols, g);
    std::printf("; MXFP4 experts by tokens an expert");
    for (const auto& [n, g] : r.expert_gflops) std::printf(" %lld: %.0f", (long long)n, g);
    std::printf(" (a %d-token pass gives %lld)\n", chunk, (long long)tokens_per_expert(c, chunk));
    const TokenWork& w = r.work;
    std::printf("  per-token work (measured): mix %.1f ns a source, norm %.1f ns a row, KDA %.2f us a head, routing "
                "%.2f us, MLA %.2f us a head, combine %.2f us, SiTU %.2f ns, add %.2f ns (one thread); join %.1f us, "
                "parallel regions %.2fx one thread\n",
                w.mix_source_seconds * 1e9, w.norm_seconds * 1e9, w.kda_head_seconds * 1e6, w.route_seconds * 1e6,
                w.mla_head_seconds * 1e6, w.combine_seconds * 1e6, w.situ_seconds * 1e9, w.add_seconds * 1e9,
                w.join_seconds * 1e6, w.parallel_speedup);
}

}  // namespace

int plan_main(int argc, char** argv) {
    return run_subcommand({"plan", kUsage}, argc, argv, [](ArgList& args) {
        PlanArgs a;
        while (args.next()) {
            if (args.is("--memory-gb")) a.memory_gb = number_list("--memory-gb", args.value());
            else if (args.is("--preset")) a.memory.preset = args.value();
            else if (args.is("--resident")) a.resident = true;
            else if (args.is("--trunk-gb")) a.memory.trunk_gb = args.number();
            else if (args.is("--cache-gb")) a.memory.cache_gb = args.number();
            else if (args.is("--prefill-mb")) a.memory.prefill_mb = args.number();
            else if (args.is("--pass-tokens")) a.memory.pass_tokens = int(args.number());
            else if (args.is("--compress-ratio")) a.given.compress_ratio = args.number();
            else if (args.is("--disk-gbps")) a.given.disk_gbps = args.number();
            else if (args.is("--expert-gbps")) a.given.expert_gbps = args.number();
            else if (args.is("--mem-gbps")) a.given.mem_gbps = args.number();
            else if (args.is("--gflops")) a.given.gflops = args.number();
            else if (args.is("--attention-gflops")) a.given.attention_gflops = args.number();
            else if (args.is("--prompt-tokens")) a.prompt_tokens = number_list("--prompt-tokens", args.value());
            else if (args.is("--seconds")) a.seconds = args.number();
            else if (args.is("--ranks")) a.ranks = int(args.integer());
            else if (args.is("--net-gbit")) a.net.gbit = args.number();
            else if (args.is("--net-latency-us")) a.net.latency_us = args.number();
            else if (args.is("--rank-memory-gb")) a.rank_memory_gb = number_list("--rank-memory-gb", args.value());
            else if (args.is("--rank-disk-gbps")) a.rank_disk_gbps = number_list("--rank-disk-gbps", args.value());
            else args.positional({&a.target});
        }
        if (!(a.given.compress_ratio > 0 && a.given.compress_ratio <= 1))
            throw Error(ErrorKind::Usage, "--compress-ratio must be in (0, 1]");
        if (!(a.seconds > 0 && a.seconds <= 60)) throw Error(ErrorKind::Usage, "--seconds must be in (0, 60]");
        if (a.ranks < 1 || a.ranks > 1024) throw Error(ErrorKind::Usage, "--ranks must be in 1..1024");
        if (!(a.net.gbit > 0)) throw Error(ErrorKind::Usage, "--net-gbit must be above 0");
        if (!(a.net.latency_us >= 0)) throw Error(ErrorKind::Usage, "--net-latency-us must be 0 or more");
        for (const auto& [flag, list] : {std::pair{"--rank-memory-gb", &a.rank_memory_gb}, {"--rank-disk-gbps", &a.rank_disk_gbps}}) {
            if (list->empty()) continue;
            if (int(list->size()) != a.ranks || a.ranks < 2)
                throw Error(ErrorKind::Usage, std::string(flag) + " gives one value per rank: " + std::to_string(a.ranks) +
                                                  " with --ranks " + std::to_string(a.ranks) + " (2 or more)");
            for (double v : *list)
                if (!(v > 0)) throw Error(ErrorKind::Usage, std::string(flag) + " values must be above 0");
        }
        for (double n : a.prompt_tokens)
            if (n != double(int64_t(n))) throw Error(ErrorKind::Usage, "--prompt-tokens expects whole numbers of tokens");
        if (!a.memory_gb.empty() && io::wants_budget(a.memory))
            throw Error(ErrorKind::Usage, "--memory-gb plans as --preset auto; give it or a preset/budget, not both");
        if (a.resident && (!a.memory_gb.empty() || io::wants_budget(a.memory)))
            throw Error(ErrorKind::Usage, "--resident plans without a budget; give it or --memory-gb/a preset/budget, not both");

        const bool is_dir = !a.target.empty() && std::filesystem::is_directory(a.target);
        const ModelSizes m = a.target.empty() ? sizes_of(parse_config(kKimiK3Config, "built-in Kimi K3 config"),
                                                         "Kimi K3 (built-in config)")
                             : is_dir         ? sizes_of(load_config(std::filesystem::path(a.target) / "config.json"), a.target)
                                              : sizes_of(load_config(a.target), a.target);
        const io::ModelFootprint f = footprint_of(m);

        // Bandwidths: given, or measured here.
        Bandwidths b = a.given;
        std::string disk_src = "given";
        if (b.disk_gbps <= 0) {
            // Without the model's files, a scratch file in the current directory (as doctor).
            const std::filesystem::path dir = is_dir ? std::filesystem::path(a.target) : std::filesystem::current_path();
            const Disk d = check_disk(dir, is_dir ? io::bench_files(dir) : std::vector<std::filesystem::path>{}, m.one_expert,
                                      a.seconds, -1);
            b.disk_gbps = std::max(d.seq_gbps, 1e-3);
            if (b.expert_gbps <= 0) b.expert_gbps = std::max(d.expert_gbps, 1e-3);
            disk_src = d.note;
        }
        if (b.expert_gbps <= 0) b.expert_gbps = b.disk_gbps;
        const std::string mem_src = b.mem_gbps > 0 ? "given" : "measured";
        if (b.mem_gbps <= 0) b.mem_gbps = measure_memory_gbps(a.seconds / 2);
        const std::string flops_src = b.gflops > 0 ? "given" : "measured";
        if (b.gflops <= 0) {
            b.gflops = measure_gflops(physical_cores(), 0.3);
            // and at the model's own widths, which the projection uses where it has them
            b.model = measure_model_rates(m.config, physical_cores(), 2 * a.seconds);
        }
        const auto& cfg = m.config;
        const std::string attention_src = b.attention_gflops > 0 ? "given" : "measured";
        if (b.attention_gflops <= 0 && !a.prompt_tokens.empty() && !b.model.measured())
            for (const int64_t keys : kAttentionKeys)
                b.attention_gflops_by_keys.push_back(
                    {keys, measure_attention_gflops(physical_cores(), cfg.kv_lora_rank + cfg.qk_rope_head_dim,
                                                    cfg.kv_lora_rank, 0.1, keys)});

        const auto& c = m.config;
        std::printf("model %s: %s\n", m.name.c_str(), describe(c).c_str());
        std::printf("  trunk %.2f GB in %d layers; %d MoE layers x %d experts of %.2f MB (pool %.1f GB), top-%d; "
                    "lm_head/norms %.2f GB resident, embedding %.2f GB read by row\n",
                    gb(double(m.trunk())), c.num_hidden_layers, m.moe_layers, c.num_experts, double(m.one_expert) / 1e6,
                    gb(double(m.pool)), c.num_experts_per_token, gb(double(m.resident - m.embed)), gb(double(m.embed)));
        std::printf("  machine: disk %.2f GB/s sequential, %.2f GB/s expert reads (%s); memory %.1f GB/s (%s); "
                    "%.0f GFLOP/s bf16 (%s)\n",
                    b.disk_gbps, b.expert_gbps, disk_src.c_str(), b.mem_gbps, mem_src.c_str(), b.gflops, flops_src.c_str());
        if (b.model.measured()) print_model_rates(b.model, f.default_chunk_tokens, cfg);
        if (b.compress_ratio < 1) std::printf("  streamed trunk compressed to %.3f of its bytes\n", b.compress_ratio);
        if (!a.prompt_tokens.empty()) {
            const ModelRates rates = rates_of(b);
            std::printf("  attention at %d-wide rows (%s): ", cfg.kv_lora_rank + cfg.qk_rope_head_dim,
                        b.attention_gflops > 0 || !b.model.measured() ? attention_src.c_str() : "measured, one thread");
            if (rates.attention_gflops_by_keys.empty()) std::printf("%.0f GFLOP/s\n", rates.attention_gflops);
            for (size_t i = 0; i < rates.attention_gflops_by_keys.size(); ++i)
                std::printf("%s%.0f GFLOP/s over %lldk keys", i ? ", " : "", rates.attention_gflops_by_keys[i].second,
                            (long long)(rates.attention_gflops_by_keys[i].first / 1024));
            if (!rates.attention_gflops_by_keys.empty()) std::printf(" (a pass takes the figure nearest its mean keys)\n");
        }

        std::vector<std::pair<std::string, int64_t>> budgets;  // label, MemAvailable to plan with
        MemoryOptions o = a.memory;
        if (!a.resident && (!a.memory_gb.empty() || !io::wants_budget(o))) o.preset = "auto";
        for (double g : a.memory_gb) {
            char label[32];
            std::snprintf(label, sizeof label, "%g GB", g);
            budgets.push_back({label, int64_t(g * 1e9)});
        }
        if (budgets.empty())
            budgets.push_back({a.resident ? "resident" : o.preset.empty() ? "explicit budgets" : "preset " + o.preset,
                               io::read_mem_available()});
        int status = 0;
        for (const auto& [label, avail] : budgets) {
            std::printf("\n%s:\n", label.c_str());
            try {
                const io::MemoryPlan plan = io::make_memory_plan(f, o, avail);
                print_budget(m, plan, b);
                for (double n : a.prompt_tokens) print_prompt(estimate_prompt(m, plan, b, int64_t(n)));
            } catch (const Error& e) {
                std::printf("  no plan: %s\n", e.what());
                status = 1;
            }
            // (a machine too small for the model alone may still hold a rank's share)
            if (a.ranks < 2) continue;
            try {
                std::vector<int64_t> available(size_t(a.ranks), avail);
                std::vector<Bandwidths> machines(size_t(a.ranks), b);
                for (size_t k = 0; k < a.rank_memory_gb.size(); ++k) available[k] = int64_t(a.rank_memory_gb[k] * 1e9);
                for (size_t k = 0; k < a.rank_disk_gbps.size(); ++k)
                    machines[k].disk_gbps = machines[k].expert_gbps = a.rank_disk_gbps[k];
                const bool each_own = !a.rank_memory_gb.empty() || !a.rank_disk_gbps.empty();
                print_ranks(m, project_ranks(m, rank_plans(m, o, available), machines, a.net), a.net, each_own,
                            a.prompt_tokens);
            } catch (const Error& e) {
                std::printf("  %d ranks: no plan: %s\n", a.ranks, e.what());
                status = 1;
            }
        }
        return status;
    });
}

}  // namespace k3::cli

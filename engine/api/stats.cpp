// visit_stats (k3/stats.h): the counters, their names in the run report and in /metrics, and
// the figures derived from them.
#include "k3/stats.h"

#include <algorithm>

#include "k3/engine.h"
#include "k3/forward_stages.h"

namespace k3 {

const char* forward_stage_name(ForwardStage s) {
    static constexpr const char* kNames[kForwardStages] = {
        "embed",         "trunk_wait",  "residual_mix", "norms",        "kda_products", "kda_heads", "mla_products",
        "mla_attention", "dense_mlp",   "moe_products", "routing",      "expert_wait",  "experts",   "output"};
    return kNames[int(s)];
}

void visit_stats(const EngineStats& e, const std::function<void(const StatField&)>& visit) {
    const auto count = [&](const char* key, const char* metric, const char* type, const char* help, double v) {
        visit(StatField{key, metric, type, help, v, true});
    };
    const auto figure = [&](const char* key, const char* metric, const char* type, const char* help, double v) {
        visit(StatField{key, metric, type, help, v, false});
    };
    const uint64_t misses = e.expert_requests - std::min(e.expert_requests, e.expert_hits);
    const double busy = e.io_seconds + e.compute_seconds;
    count("tokens_evaluated", "k3serve:tokens_evaluated_total", "counter", "Positions the engine evaluated.",
          double(e.tokens_evaluated));
    count("expert_requests", "k3serve:expert_cache_requests_total", "counter", "Routed-expert lookups.",
          double(e.expert_requests));
    count("expert_hits", "k3serve:expert_cache_hits_total", "counter", "Routed experts served from the cache.",
          double(e.expert_hits));
    count("expert_misses", "k3serve:expert_cache_misses_total", "counter", "Routed experts read from disk.",
          double(misses));
    count("expert_evictions", "k3serve:expert_cache_evictions_total", "counter", "Experts evicted from the cache.",
          double(e.expert_evictions));
    figure("expert_true_retention", "k3serve:expert_cache_hit_ratio", "gauge",
           "Share of expert lookups served from the cache (retention), 0..1.",
           e.expert_requests ? double(e.expert_hits) / double(e.expert_requests) : 0.0);
    count("expert_read_failures", "k3serve:expert_read_failures_total", "counter",
          "Expert reads that failed or came back short.", double(e.expert_read_failures));
    count("trunk_bytes_read", "k3serve:trunk_bytes_read_total", "counter", "Bytes of dense trunk streamed from disk.",
          double(e.trunk_bytes_read));
    count("expert_bytes_read", "k3serve:expert_bytes_read_total", "counter", "Bytes of routed experts read from disk.",
          double(e.expert_bytes_read));
    figure("io_seconds", "k3serve:io_seconds_total", "counter", "Time the engine waited for reads.", e.io_seconds);
    figure("compute_seconds", "k3serve:compute_seconds_total", "counter", "Time the engine computed.",
           e.compute_seconds);
    figure("engine_io_share", "k3serve:io_share", "gauge", "Share of engine time spent waiting for I/O, 0..1.",
           busy > 0 ? e.io_seconds / busy : 0.0);
    count("pinned_layers", "k3serve:pinned_layers", "gauge", "Trunk layers pinned in RAM.", e.pinned_layers);
    count("ring_bytes", "k3serve:ring_bytes", "gauge", "Bytes of the trunk read ring (streamed layers).", double(e.ring_bytes));
    count("expert_prefetch_reads", "k3serve:expert_prefetch_reads_total", "counter",
          "Experts read ahead by the next-layer lookahead.", double(e.expert_prefetch_reads));
    count("expert_prefetch_hits", "k3serve:expert_prefetch_hits_total", "counter",
          "Expert lookups that found a lookahead read (done or in flight).", double(e.expert_prefetch_hits));
    count("lookahead_predicted", "k3serve:lookahead_predicted_total", "counter",
          "Experts the next-layer lookahead predicted.", double(e.lookahead_predicted));
    count("lookahead_confirmed", "k3serve:lookahead_confirmed_total", "counter",
          "Predicted experts the layer then chose.", double(e.lookahead_confirmed));
    figure("expert_wait_seconds", "k3serve:expert_wait_seconds_total", "counter", "Time the engine waited for experts.",
           e.expert_wait_seconds);
    figure("trunk_wait_seconds", "k3serve:trunk_wait_seconds_total", "counter", "Time the engine waited for trunk layers.",
           e.trunk_wait_seconds);
    count("passes", "k3serve:forward_passes_total", "counter",
          "Forward passes over the weights (a prompt's prefill passes and decode steps).", double(e.passes));
    count("pass_tokens_max", "k3serve:prefill_pass_tokens", "gauge",
          "The most tokens a prefill pass takes (the memory plan's).", double(e.pass_tokens_max));
    count("trunk_layer_reads", "k3serve:trunk_layer_reads_total", "counter",
          "Trunk layer runs read from disk (a streamed layer once a pass).", double(e.trunk_layer_reads));
    count("expert_read_waits", "k3serve:expert_read_waits_total", "counter",
          "Expert acquisitions that issued their own reads and waited for them (nothing read ahead had them).",
          double(e.expert_read_waits));
    count("pass_lent_bytes", "k3serve:pass_lent_bytes_total", "counter",
          "Bytes lent to prefill passes: expert cache slots, the lm_head, pinned trunk layers (each pass's, summed).",
          double(e.pass_lent_bytes));
    count("pass_unpinned_layers", "k3serve:pass_unpinned_layers_total", "counter",
          "Pinned trunk layers lent to prefill passes, each read once during the pass (each pass's, summed).",
          double(e.pass_unpinned_layers));
    count("lm_head_reads", "k3serve:lm_head_reads_total", "counter",
          "Reads of the lm_head after a prefill pass borrowed it.", double(e.lm_head_reads));
    count("expert_exchanges", "k3serve:expert_exchanges_total", "counter",
          "Layer exchanges of rows with the other ranks (expert parallelism).", double(e.expert_exchanges));
    count("expert_exchange_bytes", "k3serve:expert_exchange_bytes_total", "counter",
          "Bytes sent to the other ranks (latent inputs, row tokens) and of their outputs received.", double(e.expert_exchange_bytes));
    figure("expert_exchange_seconds", "k3serve:expert_exchange_seconds_total", "counter",
           "Time from sending a layer's rows to the other ranks to the last output back.", e.expert_exchange_seconds);
    figure("expert_exchange_wait_seconds", "k3serve:expert_exchange_wait_seconds_total", "counter",
           "Time waited for the other ranks' outputs after this rank's own experts.", e.expert_exchange_wait_seconds);
    count("prompt_cache_lookups", "k3serve:prompt_cache_lookups_total", "counter",
          "Prompts looked up in the prompt cache.", double(e.prompt_cache_lookups));
    count("prompt_cache_hits", "k3serve:prompt_cache_hits_total", "counter",
          "Prompts resumed from the shared prompt cache.", double(e.prompt_cache_hits));
    count("prompt_cache_tokens_saved", "k3serve:prompt_cache_tokens_saved_total", "counter",
          "Prompt tokens resumed from the prompt cache instead of recomputed.", double(e.prompt_cache_tokens_saved));
    count("prompt_cache_evictions", "k3serve:prompt_cache_evictions_total", "counter",
          "Prompt cache states evicted for the budget.", double(e.prompt_cache_evictions));
    count("prompt_cache_bytes", "k3serve:prompt_cache_bytes", "gauge", "Bytes the prompt cache holds.",
          double(e.prompt_cache_bytes));
    count("prompt_cache_budget", "k3serve:prompt_cache_budget_bytes", "gauge",
          "The prompt cache's budget (--prompt-cache-gb).", double(e.prompt_cache_budget));
    if (!e.prompt_cache_disk) return;
    count("prompt_cache_disk_hits", "k3serve:prompt_cache_disk_hits_total", "counter",
          "Prompt states loaded back from the prompt cache's disk tier.", double(e.prompt_cache_disk_hits));
    count("prompt_cache_disk_writes", "k3serve:prompt_cache_disk_writes_total", "counter",
          "Prompt states written to the disk tier.", double(e.prompt_cache_disk_writes));
    count("prompt_cache_disk_refused", "k3serve:prompt_cache_disk_refused_total", "counter",
          "Disk-tier files refused (checksum, model fingerprint, shape or tokens) and removed.",
          double(e.prompt_cache_disk_refused));
    count("prompt_cache_disk_write_failures", "k3serve:prompt_cache_disk_write_failures_total", "counter",
          "Disk-tier writes that failed.", double(e.prompt_cache_disk_write_failures));
    count("prompt_cache_disk_evictions", "k3serve:prompt_cache_disk_evictions_total", "counter",
          "Disk-tier files removed for the budget.", double(e.prompt_cache_disk_evictions));
    count("prompt_cache_disk_bytes", "k3serve:prompt_cache_disk_bytes", "gauge", "Bytes of the disk tier's files.",
          double(e.prompt_cache_disk_bytes));
    count("prompt_cache_disk_budget", "k3serve:prompt_cache_disk_budget_bytes", "gauge",
          "The disk tier's budget (--prompt-cache-dir-gb).", double(e.prompt_cache_disk_budget));
    count("prompt_cache_disk_files", "k3serve:prompt_cache_disk_files", "gauge", "Files in the disk tier.",
          double(e.prompt_cache_disk_files));
}

}  // namespace k3

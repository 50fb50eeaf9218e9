#include "ops/slots_json.h"

namespace k3::server {

nlohmann::json slots_json(const SlotBoardView& v, uint64_t partition) {
    using nlohmann::json;
    json slots = json::array();
    for (const SlotView& s : v.slots) {
        json j = {{"id", s.slot}, {"state", s.phase}};
        if (s.job_id != 0) {
            j["job_id"] = s.job_id;
            j["prompt_tokens"] = s.prompt_tokens;
            j["cached_tokens"] = s.cached_tokens;
            j["prompt_evaluated"] = s.prompt_evaluated;
            j["generated_tokens"] = s.generated_tokens;
            j["max_tokens"] = s.max_tokens;
            j["seconds"] = s.seconds;
        }
        slots.push_back(std::move(j));
    }
    json entries = json::array();
    for (const PromptCacheEntry& e : v.prompt_cache)
        if (e.partition == partition)
            entries.push_back({{"tokens", e.tokens}, {"has_logits", e.has_logits}, {"bytes", e.bytes}});
    const EngineStats& e = v.engine;
    json disk = nullptr;  // no disk tier
    if (e.prompt_cache_disk)
        disk = {{"budget_bytes", e.prompt_cache_disk_budget},
                {"bytes", e.prompt_cache_disk_bytes},
                {"files", e.prompt_cache_disk_files},
                {"hits", e.prompt_cache_disk_hits},
                {"writes", e.prompt_cache_disk_writes},
                {"refused", e.prompt_cache_disk_refused},
                {"write_failures", e.prompt_cache_disk_write_failures},
                {"evictions", e.prompt_cache_disk_evictions}};
    return json{{"slots", slots},
                {"queued", v.queued},
                {"steps", v.steps},
                {"batched_decode_tokens", v.batched_tokens},
                {"steps_between_layers", v.steps_between_layers},
                {"speculative", {{"drafted", v.drafted}, {"accepted", v.accepted}}},
                {"prompt_cache",
                 {{"budget_bytes", e.prompt_cache_budget},
                  {"bytes", e.prompt_cache_bytes},
                  {"snapshots", e.prompt_cache_snapshots},
                  {"lookups", e.prompt_cache_lookups},
                  {"hits", e.prompt_cache_hits},
                  {"tokens_saved", e.prompt_cache_tokens_saved},
                  {"evictions", e.prompt_cache_evictions},
                  {"entries", entries},
                  {"disk", disk}}}};
}

}  // namespace k3::server

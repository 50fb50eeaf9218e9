// Engine::load (engine.h): open and validate the checkpoint, choose the kernels and the thread
// count, open the weight store for the memory plan, bind the model.
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>

#include "api/engine_impl.h"
#include "k3/forward_stages.h"
#include "k3/kernel_set_names.h"
#include "kernels/kernel_sets.h"
#include "io/file.h"
#include "store/memory_plan.h"
#include "store/shard_readahead.h"
#include "model/state.h"
#include "k3/error.h"
#include "k3/fnv1a.h"
#include "parallel/expert_parallel.h"

namespace k3 {

namespace {

// What every prompt state of this model looks like (the disk tier refuses files of another).
PromptStateShape prompt_state_shape(const ModelConfig& c) {
    const SequenceState one(c, 1);
    PromptStateShape shape;
    for (int il = 0; il < c.num_hidden_layers; ++il) shape.n_mla += c.is_mla(il) ? 1 : 0;
    shape.row_floats = c.mla_kv_latent_dim();
    shape.kda_floats = int64_t(one.kda.size());
    shape.n_vocab = c.vocab_size;
    return shape;
}

}  // namespace

// The one place a kernel-set request is decided. The request is EngineOptions::kernels (--kernels),
// or when that is empty the K3_KERNELS environment variable (tests, benchmarks); both follow one
// rule: "" is the best set for this CPU and build, a name no row of kernel_sets() has or a set this
// CPU or build lacks is refused.
const Kernels& choose_kernels(std::string name) {
    if (name.empty())
        if (const char* env = std::getenv("K3_KERNELS")) name = env;
    if (name.empty()) return select_kernels();
    const KernelSet* set = find_kernel_set(name);
    if (set == nullptr)
        throw Error(ErrorKind::Usage, "unknown kernel set '" + name + "' (expected " + kernel_set_list() + ")");
    if (const Kernels* k = set->usable()) return *k;
    throw Error(ErrorKind::Usage, "kernel set '" + name + "' is not supported by this CPU or build (it needs " +
                                      set->needs + ")");
}

std::string checkpoint_fingerprint(const Checkpoint& ckpt) {
    Fnv1a f;
    std::ifstream cfg(ckpt.dir / "config.json", std::ios::binary);
    f.add(std::string(std::istreambuf_iterator<char>(cfg), {}));
    for (const ShardInfo& s : ckpt.directory.shards()) {
        f.add(s.path.filename().string());
        f.add(&s.file_size, sizeof s.file_size);
        std::string header(size_t(s.data_start), '\0');
        io::File::open(s.path, /*try_direct=*/false).read_exact(header.data(), s.data_start, 0, "safetensors header");
        f.add(header);
    }
    char hex[17];
    std::snprintf(hex, sizeof hex, "%016" PRIx64, f.value());
    return hex;
}

EngineImpl::EngineImpl(const EngineOptions& options, const std::function<void(const std::string&)>& progress) {
    auto say = [&](const std::string& s) {
        if (progress) progress(s);
    };
    say("opening checkpoint " + options.model_dir);
    // Everything resident and read before serving: the shards' bytes start coming in now.
    std::unique_ptr<ShardReadahead> readahead;
    if (!io::wants_budget(options.memory) && !options.memory.background_load)
        readahead = std::make_unique<ShardReadahead>(options.model_dir);
    ckpt_ = open_checkpoint(options.model_dir);
    // Without the vision side the checkpoint is opened as the text model it also is: the memory
    // plan, the fingerprint's config and image requests all see no tower (docs/model.md).
    if (!options.vision)
        ckpt_.config.vision = VisionConfig{};
    else
        check_vision_tensors(ckpt_);
    const Kernels& k = choose_kernels(options.kernels);
    n_threads_ = options.threads > 0 ? options.threads : physical_cores();
    say(std::string("kernels: ") + k.name + ", threads: " + std::to_string(n_threads_));
    const std::string fingerprint = checkpoint_fingerprint(ckpt_);
    MemoryOptions store_memory = options.memory;
    // Started by mpirun with several ranks: this process is rank 0 of expert parallelism and
    // holds only its share of the routed experts; the other ranks (k3serve rank) the rest.
    const ExpertShare world = parallel::launched_world();
    if (world.ranks > 1) {
        if (world.rank != 0)
            throw Error(ErrorKind::Usage, "under mpirun only rank 0 runs k3serve serve or run; ranks 1 and above run "
                                          "k3serve rank (docs/operations.md \"Several machines\")");
        say("expert parallelism: rank 0 of " + std::to_string(world.ranks) + ", waiting for the other ranks' hello");
        leader_ = parallel::connect_leader(world, fingerprint, ckpt_.config.num_experts);
        store_memory.expert_rank = 0;
        store_memory.expert_ranks = world.ranks;
    }
    io::MemoryPlan plan;
    say("loading weights");
    // Everything resident: the store returns once the trunk is in and goes on reading the
    // experts while the model is bound below; without background loading the load waits for
    // them at the end (the binding's work overlaps the reads either way).
    store_memory.background_load = true;
    store_ = open_weight_store(ckpt_, store_memory, &plan);
    info_.memory_plan_bytes = plan.need_bytes;
    model_ = std::make_unique<Model>(ckpt_, k, n_threads_, *store_, plan.chunk_tokens);
    model_->test_hold_pass = options.hold_pass;
    if (leader_) {
        model_->experts_end = ExpertShare{0, world.ranks}.end(ckpt_.config.num_experts);
        say("expert parallelism: waiting for the other ranks to load their experts");
        leader_->start_serving(model_->act.max_tokens);
        model_->remote = leader_.get();
    }
    if (ckpt_.config.vision.present) {
        say("loading the vision tower");
        vision_ = std::make_unique<VisionWeights>(load_vision_weights(ckpt_));
        vision_settings_.norm_eps = float(options.vision_norm_eps);
        info_.vision = true;
    }
    info_.fingerprint = fingerprint;
    if (vision_) {
        // An image's rows depend on the tower's epsilon setting as well as on the weights: a
        // state after an image is reused only under the same one (the disk tier outlives it).
        Fnv1a f;
        f.add(info_.fingerprint).add(&vision_settings_.norm_eps, sizeof vision_settings_.norm_eps);
        char hex[17];
        std::snprintf(hex, sizeof hex, "%016" PRIx64, f.value());
        info_.fingerprint = hex;
    }
    prompt_cache_ = std::make_unique<PromptCache>(io::prompt_cache_budget(options.memory), ckpt_.config);
    if (!options.memory.prompt_cache_dir.empty()) {
        say("prompt cache disk tier: " + options.memory.prompt_cache_dir);
        prompt_cache_->set_disk_tier(std::make_unique<PromptCacheDisk>(
            options.memory.prompt_cache_dir, io::prompt_cache_disk_budget(options.memory), info_.fingerprint,
            prompt_state_shape(ckpt_.config)));
    }

    const ModelConfig& c = ckpt_.config;
    info_.name = std::filesystem::path(options.model_dir).lexically_normal().filename().string();
    if (info_.name.empty()) info_.name = std::filesystem::path(options.model_dir).parent_path().filename().string();
    info_.shape = describe(c);
    info_.kernels = k.name;
    info_.memory_plan = plan.describe();
    if (leader_)
        info_.memory_plan += "; expert parallelism: rank 0 of " + std::to_string(world.ranks) + ", experts 0.." +
                             std::to_string(model_->experts_end - 1) + " of each layer here";
    info_.n_vocab = c.vocab_size;
    info_.n_layers = c.num_hidden_layers;
    info_.n_ctx_max = c.max_position_embeddings > 0 ? c.max_position_embeddings : 131072;
    info_.bos_token_id = c.bos_token_id;
    info_.eos_token_id = c.eos_token_id;
    info_.kv_bytes_per_position = kv_bytes_per_position(c);
    info_.n_embd = c.hidden_size;
    if (!options.memory.background_load) {
        if (Status st = store_->finish_load(); !st.ok()) throw Error(ErrorKind::Io, "loading the weights: " + st.message);
    }
    say("ready: " + info_.shape);
}

EngineStats EngineImpl::stats() const {
    const WeightStoreStats s = store_->stats();
    EngineStats e;
    e.tokens_evaluated = tokens_evaluated_;
    e.trunk_bytes_read = s.trunk_bytes_read;
    e.expert_bytes_read = s.expert_bytes_read;
    e.expert_requests = s.expert_requests;
    e.expert_hits = s.expert_hits;
    e.expert_evictions = s.expert_evictions;
    e.expert_read_failures = s.expert_read_failures;
    e.io_seconds = s.io_wait_seconds;
    e.compute_seconds = forward_seconds_ > s.io_wait_seconds ? forward_seconds_ - s.io_wait_seconds : 0;
    e.pinned_layers = s.pinned_layers;
    e.ring_bytes = s.ring_bytes;
    e.expert_prefetch_reads = s.expert_prefetch_reads;
    e.expert_prefetch_hits = s.expert_prefetch_hits;
    e.lookahead_predicted = model_->lookahead_predicted;
    e.lookahead_confirmed = model_->lookahead_confirmed;
    e.expert_wait_seconds = s.expert_wait_seconds;
    e.trunk_wait_seconds = s.trunk_wait_seconds;
    e.passes = passes_;
    e.pass_tokens_max = model_->act.max_tokens;
    e.trunk_layer_reads = s.trunk_layer_reads;
    e.expert_read_waits = s.expert_demand_reads;
    e.pass_lent_bytes = s.pass_lent_bytes;
    e.pass_unpinned_layers = s.pass_unpinned_layers;
    e.lm_head_reads = model_->lm_head_reads;
    e.resident_pinned_layers = s.resident_pinned_layers;
    if (leader_) {
        const parallel::ExpertLeader::Traffic t = leader_->traffic();
        e.expert_exchanges = t.exchanges;
        e.expert_exchange_bytes = t.bytes;
        e.expert_exchange_seconds = t.seconds;
        e.expert_exchange_wait_seconds = t.wait_seconds;
    }
    const PromptCacheStats p = prompt_cache_->stats();
    e.prompt_cache_lookups = p.lookups;
    e.prompt_cache_hits = p.hits;
    e.prompt_cache_tokens_saved = p.tokens_saved;
    e.prompt_cache_evictions = p.evictions;
    e.prompt_cache_bytes = p.bytes;
    e.prompt_cache_budget = p.budget;
    e.prompt_cache_snapshots = p.snapshots;
    e.prompt_cache_disk = p.has_disk;
    e.prompt_cache_disk_hits = p.disk.hits;
    e.prompt_cache_disk_writes = p.disk.writes;
    e.prompt_cache_disk_refused = p.disk.refused;
    e.prompt_cache_disk_write_failures = p.disk.write_failures;
    e.prompt_cache_disk_evictions = p.disk.evictions;
    e.prompt_cache_disk_bytes = p.disk.bytes;
    e.prompt_cache_disk_budget = p.disk.budget;
    e.prompt_cache_disk_files = p.disk.files;
    return e;
}

ForwardStageSeconds EngineImpl::stage_seconds() const {
    ForwardStageSeconds out{};
    for (int i = 0; i < kForwardStages; ++i) out[size_t(i)] = model_->stage_seconds[size_t(i)].load(std::memory_order_relaxed);
    return out;
}

ForwardStageSeconds forward_stage_seconds(const Engine& engine) {
    const auto* impl = dynamic_cast<const EngineImpl*>(&engine);
    return impl ? impl->stage_seconds() : ForwardStageSeconds{};
}

Status EngineImpl::evaluate_batch(std::span<const ForwardItem> items, const CancelFlag* cancel,
                                  const BetweenLayers* between_layers) {
    const auto t0 = std::chrono::steady_clock::now();
    const bool side = model_->in_pass;
    const double side0 = side_seconds_;
    Status s = forward_batch(*model_, items, cancel, between_layers);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    // a step between a pass's layers is inside the pass's time: counted once
    if (side) side_seconds_ += seconds;
    forward_seconds_ += side ? seconds : seconds - (side_seconds_ - side0);
    if (!s.ok()) return s;
    ++passes_;
    for (const ForwardItem& it : items) tokens_evaluated_ += it.tokens.size();
    return s;
}

WeightsLoad EngineImpl::weights_load() const {
    WeightsLoad w = store_->weights_load();
    if (leader_) {
        if (std::string why = leader_->failure(); !why.empty()) {
            w.first_failure = why;  // the cause of everything that fails after it
            w.failures += 1;
        }
    }
    return w;
}

Status EngineImpl::step(std::span<const StepItem> items) { return step_sessions(*this, items); }

Status EngineImpl::step_between_layers(std::span<const StepItem> items, const BetweenLayers& between_layers) {
    return step_sessions(*this, items, &between_layers);
}

std::vector<PromptCacheEntry> EngineImpl::prompt_cache_entries() const {
    std::vector<PromptCacheEntry> out;
    for (const PromptCache::EntrySummary& e : prompt_cache_->entries())
        out.push_back({e.partition, int(e.tokens), e.has_logits, e.bytes});
    return out;
}

std::unique_ptr<Session> EngineImpl::new_session(int n_ctx) {
    if (n_ctx <= 0 || n_ctx > info_.n_ctx_max)
        throw Error(ErrorKind::Usage, "session context " + std::to_string(n_ctx) + " is outside 1.." +
                                          std::to_string(info_.n_ctx_max));
    return make_session(*this, n_ctx);
}

std::vector<float> EngineImpl::encode_image(const PreparedImage& image) {
    if (!vision_)
        throw Error(ErrorKind::Usage,
                    "this model has no vision tower loaded (a text-only checkpoint, or --no-vision): images are not accepted");
    const auto t0 = std::chrono::steady_clock::now();
    std::vector<float> rows = encode_image_rows(*vision_, model_->compute, model_->act.product_tokens, image.geometry,
                                                image.patches, vision_settings_);
    forward_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return rows;
}

std::vector<float> Engine::encode_image(const PreparedImage&) {
    throw Error(ErrorKind::Usage, "this engine has no vision tower: images are not accepted");
}

std::unique_ptr<Engine> Engine::load(const EngineOptions& options,
                                     const std::function<void(const std::string&)>& progress) {
    return std::make_unique<EngineImpl>(options, progress);
}

}  // namespace k3

// open_checkpoint(): config.json + shard headers, checked against the one tensor list
// (model_tensors.h) and the layout the streaming engine relies on. Every problem is collected
// and reported in one message (capped), each naming the file and tensor, expected vs actual.
// The vision tensors are checked apart (check_vision_tensors), so `--no-vision` can skip them.
#include "weights/checkpoint.h"

#include <algorithm>

#include "k3/error.h"

namespace k3 {

namespace {

constexpr size_t kMaxListedProblems = 40;

// Counts every problem, keeps the text of the first few only (a config with millions of
// missing tensors must not hold millions of messages).
class Problems {
public:
    void add(std::string p) {
        if (list_.size() < kMaxListedProblems) list_.push_back(std::move(p));
        ++count_;
    }
    bool empty() const { return count_ == 0; }
    size_t size() const { return count_; }
    [[noreturn]] void raise(const std::filesystem::path& dir, size_t missing) const {
        std::string msg = dir.string() + ": checkpoint refused (" + std::to_string(count_) +
                          (count_ == 1 ? " problem" : " problems");
        if (missing) msg += ", " + std::to_string(missing) + " required tensors missing";
        msg += "):";
        for (const auto& p : list_) msg += "\n  " + p;
        if (count_ > list_.size()) msg += "\n  ... and " + std::to_string(count_ - list_.size()) + " more";
        throw Error(ErrorKind::Checkpoint, msg);
    }

private:
    std::vector<std::string> list_;
    size_t count_ = 0;
};

// How many tensors, and how many bytes of them, the config implies: arithmetic over one
// layer's trunk and one expert at a time, so nothing is sized by the config before the files
// are known to be big enough for it.
std::pair<uint64_t, uint64_t> implied_size(const ModelConfig& c) {
    const uint64_t E = uint64_t(c.hidden_size), V = uint64_t(c.vocab_size);
    uint64_t tensors = 5, bytes = 2 * (V * E * 2) + 2 * (E * 2) + E * 2;  // embed, lm_head, norms, proj
    for (int il = 0; il < c.num_hidden_layers; ++il) {
        for (const TensorSpec& spec : layer_trunk_tensors(c, il)) {
            ++tensors;
            bytes += uint64_t(spec.nbytes());
        }
        if (c.is_dense(il)) continue;
        tensors += uint64_t(kExpertParts) * uint64_t(c.num_experts);
        bytes += uint64_t(expert_bytes(c)) * uint64_t(c.num_experts);
    }
    return {tensors, bytes};
}

// The byte run covering `tensors` when they all sit in one shard back to back (in any order);
// otherwise records why not and returns a run with shard -1.
ByteRun contiguous_run(const TensorDirectory& dir, const std::vector<const TensorInfo*>& tensors,
                       const std::string& what, Problems& problems) {
    ByteRun run;
    if (tensors.empty()) return run;
    std::vector<const TensorInfo*> sorted = tensors;
    std::sort(sorted.begin(), sorted.end(),
              [](const TensorInfo* a, const TensorInfo* b) { return a->offset < b->offset; });
    const int shard = sorted.front()->shard;
    auto file = [&](int s) { return dir.shards()[size_t(s)].path.filename().string(); };
    for (const TensorInfo* t : sorted)
        if (t->shard != shard) {
            problems.add(what + " is split across shards: " + sorted.front()->name + " is in " + file(shard) +
                         " but " + t->name + " is in " + file(t->shard));
            return run;
        }
    for (size_t i = 1; i < sorted.size(); ++i) {
        const TensorInfo& a = *sorted[i - 1];
        const TensorInfo& b = *sorted[i];
        if (b.offset != a.offset + a.nbytes) {
            problems.add(what + " is not contiguous in " + file(shard) + ": " + a.name + " ends at byte " +
                         std::to_string(a.offset + a.nbytes) + " but the next, " + b.name + ", starts at byte " +
                         std::to_string(b.offset));
            return run;
        }
    }
    run.shard = shard;
    run.offset = sorted.front()->offset;
    run.nbytes = sorted.back()->offset + sorted.back()->nbytes - run.offset;
    return run;
}

// An expert's packed and scale tensors describe the same matrix: same rows, and the packed
// bytes (2 inputs each) cover exactly the inputs the scales (32 each) cover.
void check_mxfp4_pair(const TensorInfo& packed, const TensorInfo& scale, Problems& problems) {
    if (packed.shape.size() != 2 || scale.shape.size() != 2) return;  // reported as a shape mismatch
    if (packed.shape[0] != scale.shape[0] || packed.shape[1] * 2 != scale.shape[1] * kMxfp4Group)
        problems.add("MXFP4 pair " + packed.name + " " + shape_string(packed.shape) + " and " + scale.name + " " +
                     shape_string(scale.shape) + " disagree: packed holds " + std::to_string(packed.shape[1] * 2) +
                     " inputs per row, scales cover " + std::to_string(scale.shape[1] * kMxfp4Group));
}

}  // namespace

Checkpoint open_checkpoint(const std::filesystem::path& dir) {
    Checkpoint ck;
    ck.dir = dir;
    ck.config = load_config(dir / "config.json");
    ck.directory = TensorDirectory::open(dir);
    const ModelConfig& cfg = ck.config;
    const TensorDirectory& td = ck.directory;
    auto file = [&](const TensorInfo& t) { return td.shards()[size_t(t.shard)].path.filename().string(); };

    // 0. The config's size against the files', judged together before any tensor is listed: a
    // config inside every single cap (num_experts 65,536) would otherwise list 24 million
    // tensor names (2.2 GB) to report them missing. A config that asks for more than twice
    // what the files hold does not describe them; anything closer (a few tensors missing or
    // of the wrong shape) is listed tensor by tensor below, which then costs at most twice
    // the files' own directory.
    {
        const auto [want_tensors, want_bytes] = implied_size(cfg);
        uint64_t have_bytes = 0;
        for (const ShardInfo& s : td.shards()) have_bytes += uint64_t(std::max<int64_t>(0, s.file_size - s.data_start));
        const uint64_t have_tensors = td.tensors().size();
        if (want_tensors > 2 * have_tensors + 64 || want_bytes / 2 > have_bytes)
            throw Error(ErrorKind::Checkpoint,
                        dir.string() + ": checkpoint refused: config.json implies " + std::to_string(want_tensors) +
                            " tensors of " + std::to_string(want_bytes) + " bytes (" +
                            std::to_string(cfg.num_hidden_layers) + " layers, " + std::to_string(cfg.num_experts) +
                            " experts each), but the " + std::to_string(td.shards().size()) + " shards hold " +
                            std::to_string(have_tensors) + " tensors in " + std::to_string(have_bytes) +
                            " bytes: the config does not describe these files");
    }

    // 1. Every tensor the config implies, with its dtype and shape.
    Problems problems;
    size_t missing = 0;
    const TensorInfo* last_packed = nullptr;  // expert_tensors() lists each packed tensor before its scales
    for (const TensorSpec& spec : model_tensors(cfg)) {
        const TensorInfo* t = td.find(spec.name);
        if (spec.role == TensorRole::ExpertPacked) last_packed = t;
        if (spec.role == TensorRole::ExpertScale && t && last_packed) check_mxfp4_pair(*last_packed, *t, problems);
        if (!t) {
            ++missing;
            problems.add("missing tensor " + spec.name + " (expected " + dtype_name(spec.dtype) + " " +
                         shape_string(spec.shape) + ")");
            continue;
        }
        if (t->dtype != spec.dtype || t->shape != spec.shape)
            problems.add(file(*t) + ": tensor " + spec.name + " is " + dtype_name(t->dtype) + " " +
                         shape_string(t->shape) + ", expected " + dtype_name(spec.dtype) + " " + shape_string(spec.shape));
    }
    // Layout checks only make sense once every tensor is there with its size.
    if (!problems.empty()) problems.raise(dir, missing);

    // 2. One contiguous run per layer (its trunk tensors), one per routed expert (six tensors).
    const int n_layers = cfg.num_hidden_layers, n_experts = cfg.num_experts;
    ck.layer_runs.resize(size_t(n_layers));
    ck.expert_runs.resize(size_t(n_layers) * size_t(n_experts));
    for (int il = 0; il < n_layers; ++il) {
        std::vector<const TensorInfo*> trunk;
        for (const TensorSpec& spec : layer_trunk_tensors(cfg, il)) trunk.push_back(td.find(spec.name));
        ck.layer_runs[size_t(il)] = contiguous_run(td, trunk, "layer " + std::to_string(il) + " trunk", problems);
        if (cfg.is_dense(il)) continue;
        for (int ie = 0; ie < n_experts; ++ie) {
            std::vector<const TensorInfo*> parts;
            for (const TensorSpec& spec : expert_tensors(cfg, il, ie)) parts.push_back(td.find(spec.name));
            ByteRun run = contiguous_run(
                td, parts, "layer " + std::to_string(il) + " expert " + std::to_string(ie) + " (six MXFP4 tensors)",
                problems);
            ExpertRun& er = ck.expert_runs[size_t(il) * size_t(n_experts) + size_t(ie)];
            static_cast<ByteRun&>(er) = run;
            if (run.shard < 0) continue;
            for (int k = 0; k < kExpertParts; ++k) er.part_offset[size_t(k)] = parts[size_t(k)]->offset - run.offset;
        }
        if (problems.size() > 4 * kMaxListedProblems) break;  // enough to act on
    }
    if (!problems.empty()) problems.raise(dir, 0);
    return ck;
}

void check_vision_tensors(const Checkpoint& ck) {
    Problems problems;
    size_t missing = 0;
    const TensorDirectory& td = ck.directory;
    for (const TensorSpec& spec : vision_tensors(ck.config)) {
        const TensorInfo* t = td.find(spec.name);
        if (!t) {
            ++missing;
            problems.add("missing vision tensor " + spec.name + " (expected " + dtype_name(spec.dtype) + " " +
                         shape_string(spec.shape) + ")");
        } else if (t->dtype != spec.dtype || t->shape != spec.shape) {
            problems.add(td.shards()[size_t(t->shard)].path.filename().string() + ": vision tensor " + spec.name +
                         " is " + dtype_name(t->dtype) + " " + shape_string(t->shape) + ", expected " +
                         dtype_name(spec.dtype) + " " + shape_string(spec.shape));
        }
    }
    if (!problems.empty()) {
        problems.add("(--no-vision serves the text model without reading the vision tensors)");
        problems.raise(ck.dir, missing);
    }
}

int64_t Checkpoint::offset_in_layer(const std::string& name, int il) const {
    if (il < 0 || size_t(il) >= layer_runs.size())
        throw Error(ErrorKind::Checkpoint, "offset_in_layer: layer " + std::to_string(il) + " out of range");
    const TensorInfo* t = directory.find(name);
    const ByteRun& run = layer_runs[size_t(il)];
    if (!t) throw Error(ErrorKind::Checkpoint, dir.string() + ": no tensor " + name);
    if (t->shard != run.shard || t->offset < run.offset || t->offset + t->nbytes > run.offset + run.nbytes)
        throw Error(ErrorKind::Checkpoint, dir.string() + ": tensor " + name + " is not inside layer " +
                                               std::to_string(il) + "'s trunk run");
    return t->offset - run.offset;
}

}  // namespace k3

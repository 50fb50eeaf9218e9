// make_resident_store: every layer run and every routed expert read into memory once at load,
// so acquire_* only hands out pointers. Each layer's experts share one page-aligned arena,
// expert ie at ie * expert_bytes, read in shard-offset order.
#include <algorithm>
#include <memory>
#include <vector>

#include "io/file.h"
#include "util/aligned_bytes.h"
#include "k3/error.h"
#include "store/weight_store.h"

namespace k3 {

namespace {

class ResidentStore final : public WeightStore {
public:
    explicit ResidentStore(const Checkpoint& ckpt) : n_experts_(ckpt.config.num_experts) {
        const ModelConfig& c = ckpt.config;
        std::vector<io::File> files;
        for (const auto& shard : ckpt.directory.shards()) files.push_back(io::File::open(shard.path, /*try_direct=*/false));
        expert_stride_ = size_t(expert_bytes(c));
        for (int il = 0; il < c.num_hidden_layers; ++il) {
            const ByteRun& r = ckpt.layer_runs[size_t(il)];
            layers_.emplace_back(size_t(r.nbytes));
            files[size_t(r.shard)].read_exact(layers_.back().data(), r.nbytes, r.offset,
                                              "layer " + std::to_string(il) + "'s trunk run");
            if (c.is_dense(il)) {
                experts_.emplace_back();
                continue;
            }
            experts_.emplace_back(expert_stride_ * size_t(n_experts_));
            for (int ie = 0; ie < n_experts_; ++ie) {
                const ExpertRun& e = ckpt.expert(il, ie);
                if (size_t(e.nbytes) != expert_stride_)
                    throw Error(ErrorKind::Checkpoint, "expert " + std::to_string(ie) + " of layer " +
                                                           std::to_string(il) + " has a run of " +
                                                           std::to_string(e.nbytes) + " bytes, expected " +
                                                           std::to_string(expert_stride_));
                files[size_t(e.shard)].read_exact(experts_.back().data() + size_t(ie) * expert_stride_, e.nbytes,
                                                  e.offset,
                                                  "expert " + std::to_string(ie) + " of layer " + std::to_string(il));
            }
        }
    }

    Status acquire_layer(int il, const uint8_t** run) override {
        *run = layers_[size_t(il)].data();
        return Status::Ok();
    }
    void release_layer(int) override {}

    Status acquire_experts(int il, std::span<const int32_t> experts, const uint8_t** out) override {
        const uint8_t* base = experts_[size_t(il)].data();
        for (size_t j = 0; j < experts.size(); ++j) out[j] = base + size_t(experts[j]) * expert_stride_;
        stats_.expert_requests += experts.size();
        stats_.expert_hits += experts.size();
        return Status::Ok();
    }
    void release_experts(int) override {}
    int max_experts_per_acquire() const override { return n_experts_; }
    WeightStoreStats stats() const override { return stats_; }

private:
    int n_experts_;
    size_t expert_stride_ = 0;
    std::vector<AlignedBytes> layers_;   // [n_layer] trunk runs as on disk
    std::vector<AlignedBytes> experts_;  // [n_layer] [n_expert * expert_bytes] (empty for dense layers)
    WeightStoreStats stats_;
};

}  // namespace

std::unique_ptr<WeightStore> make_resident_store(const Checkpoint& ckpt) {
    return std::make_unique<ResidentStore>(ckpt);
}

}  // namespace k3

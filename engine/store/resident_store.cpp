// make_resident_store: every layer run and every routed expert read into memory once at load,
// so acquire_* only hands out pointers.
//
// The load runs at the disk's sequential speed: the checkpoint is cut into a few large spans
// (each layer's trunk run, and each stretch of that layer's experts that lie back to back in one
// shard), every span is read with O_DIRECT into its own aligned buffer, and the read pool keeps
// several 8 MiB pieces in flight (io/read_pool.h). The earlier loader issued one buffered pread
// per expert: every byte was copied twice (disk -> page cache -> heap) and the copy plus the
// page-cache bookkeeping made the load kernel-bound at about a quarter of the disk's speed.
#include <algorithm>
#include <memory>
#include <vector>

#include "io/file.h"
#include "io/read_pool.h"
#include "k3/error.h"
#include "store/streaming_store.h"
#include "store/weight_store.h"

namespace k3 {

namespace {

// One contiguous byte range of one shard, read into its own buffer.
struct Span {
    int shard = -1;
    int64_t offset = 0;
    int64_t nbytes = 0;
    io::AlignedBuffer buf;
    const uint8_t* payload = nullptr;  // where byte `offset` landed in buf
};

class ResidentStore final : public WeightStore {
public:
    explicit ResidentStore(const Checkpoint& ckpt) : n_experts_(ckpt.config.num_experts) {
        const ModelConfig& c = ckpt.config;
        std::vector<io::File> files;
        for (const auto& shard : ckpt.directory.shards()) files.push_back(io::File::open(shard.path));
        const int64_t stride = expert_bytes(c);

        // Spans: per layer its trunk run, then its experts in runs of neighbours.
        std::vector<int> layer_span(size_t(c.num_hidden_layers), -1);
        std::vector<std::pair<int, int64_t>> expert_at(size_t(c.num_hidden_layers) * size_t(n_experts_), {-1, 0});
        auto add_span = [&](int shard, int64_t offset, int64_t nbytes) {
            spans_.push_back(Span{shard, offset, nbytes, {}, nullptr});
            return int(spans_.size()) - 1;
        };
        for (int il = 0; il < c.num_hidden_layers; ++il) {
            const ByteRun& r = ckpt.layer_runs[size_t(il)];
            layer_span[size_t(il)] = add_span(r.shard, r.offset, r.nbytes);
            if (c.is_dense(il)) continue;
            int open = -1;
            for (int ie = 0; ie < n_experts_; ++ie) {
                const ExpertRun& e = ckpt.expert(il, ie);
                if (e.nbytes != stride)
                    throw Error(ErrorKind::Checkpoint, "expert " + std::to_string(ie) + " of layer " +
                                                           std::to_string(il) + " has a run of " +
                                                           std::to_string(e.nbytes) + " bytes, expected " +
                                                           std::to_string(stride));
                const bool extends = open >= 0 && spans_[size_t(open)].shard == e.shard &&
                                     spans_[size_t(open)].offset + spans_[size_t(open)].nbytes == e.offset;
                if (extends) spans_[size_t(open)].nbytes += e.nbytes;
                else open = add_span(e.shard, e.offset, e.nbytes);
                expert_at[size_t(il) * n_experts_ + ie] = {open, e.offset - spans_[size_t(open)].offset};
            }
        }

        // One request per span; the pool splits each into pieces and keeps them in flight.
        io::ReadPool pool(io::kReaderThreads);
        std::vector<io::ReadRequest> requests;
        for (auto& s : spans_) {
            s.buf = io::AlignedBuffer(io::window_capacity(s.nbytes));
            io::ReadRequest q;
            q.file = &files[size_t(s.shard)];
            q.offset = s.offset;
            q.nbytes = s.nbytes;
            q.buf = s.buf.data();
            q.cap = s.buf.size();
            Span* sp = &s;
            q.done = [sp](const Status& st, const uint8_t* payload) {
                if (st.ok()) sp->payload = payload;
            };
            requests.push_back(std::move(q));
        }
        Status st = pool.read_all(std::move(requests));
        if (!st.ok()) throw Error(ErrorKind::Io, "loading the weights: " + st.message);

        for (int il = 0; il < c.num_hidden_layers; ++il) layers_.push_back(spans_[size_t(layer_span[size_t(il)])].payload);
        expert_ptr_.resize(expert_at.size(), nullptr);
        for (size_t k = 0; k < expert_at.size(); ++k)
            if (expert_at[k].first >= 0) expert_ptr_[k] = spans_[size_t(expert_at[k].first)].payload + expert_at[k].second;
    }

    Status acquire_layer(int il, const uint8_t** run) override {
        *run = layers_[size_t(il)];
        return Status::Ok();
    }
    void release_layer(int) override {}

    Status acquire_experts(int il, std::span<const int32_t> experts, const uint8_t** out) override {
        const uint8_t* const* base = &expert_ptr_[size_t(il) * n_experts_];
        for (size_t j = 0; j < experts.size(); ++j) out[j] = base[experts[j]];
        stats_.expert_requests += experts.size();
        stats_.expert_hits += experts.size();
        return Status::Ok();
    }
    void release_experts(int) override {}
    int max_experts_per_acquire() const override { return n_experts_; }
    WeightStoreStats stats() const override { return stats_; }

private:
    int n_experts_;
    std::vector<Span> spans_;                 // the memory: every byte of trunk and experts
    std::vector<const uint8_t*> layers_;      // [n_layer] trunk runs as on disk
    std::vector<const uint8_t*> expert_ptr_;  // [n_layer * n_expert] (null for dense layers)
    WeightStoreStats stats_;
};

}  // namespace

std::unique_ptr<WeightStore> make_resident_store(const Checkpoint& ckpt) {
    return std::make_unique<ResidentStore>(ckpt);
}

}  // namespace k3

// make_resident_store: every layer run and every routed expert read into memory once at load,
// so acquire_* only hands out pointers.
//
// The load runs at the disk's sequential speed: the checkpoint is cut into a few large spans
// (each layer's trunk run, and each stretch of that layer's experts that lie back to back in one
// shard), the shards are mapped and the span loader brings the spans' pages in, several 8 MiB
// pieces in flight (store/span_loader.h: why mapped pages and not O_DIRECT into fresh memory).
//
// With background loading the store is handed out once the trunk runs are read; the experts'
// spans go on loading behind it, and acquire_experts waits for the pieces holding the experts a
// step asks for (they are read next). Until every piece is read the answer is the same bytes, so
// the tokens are the same; a piece that failed fails every step that needs it (IoError).
#include <algorithm>
#include <chrono>
#include <memory>
#include <vector>

#include "io/file.h"
#include "k3/error.h"
#include "store/span_loader.h"
#include "store/streaming_store.h"
#include "store/weight_store.h"

namespace k3 {

namespace {

class ResidentStore final : public WeightStore {
public:
    ResidentStore(const Checkpoint& ckpt, bool background, ExpertShare share, const std::string& hold_file) : n_experts_(ckpt.config.num_experts) {
        const ModelConfig& c = ckpt.config;
        for (const auto& shard : ckpt.directory.shards()) files_.push_back(io::File::open(shard.path, /*try_direct=*/false));
        const int64_t stride = expert_bytes(c);
        expert_stride_ = stride;

        // Spans: per layer its trunk run, then its experts in runs of neighbours.
        std::vector<LoadSpan> spans;
        std::vector<int> layer_span(size_t(c.num_hidden_layers), -1);
        expert_at_.assign(size_t(c.num_hidden_layers) * size_t(n_experts_), {-1, 0});
        auto add_span = [&](int shard, int64_t offset, int64_t nbytes, bool first) {
            spans.push_back(LoadSpan{&files_[size_t(shard)], offset, nbytes, first});
            return int(spans.size()) - 1;
        };
        // Under expert parallelism only this rank's share of the experts is read, and a rank
        // other than 0 reads no trunk (store/expert_share.h).
        for (int il = 0; il < c.num_hidden_layers; ++il) {
            const ByteRun& r = ckpt.layer_runs[size_t(il)];
            if (share.rank == 0) layer_span[size_t(il)] = add_span(r.shard, r.offset, r.nbytes, /*first=*/true);
            if (c.is_dense(il)) continue;
            int open = -1;
            for (int ie = share.begin(n_experts_); ie < share.end(n_experts_); ++ie) {
                const ExpertRun& e = ckpt.expert(il, ie);
                if (e.nbytes != stride)
                    throw Error(ErrorKind::Checkpoint, "expert " + std::to_string(ie) + " of layer " +
                                                           std::to_string(il) + " has a run of " +
                                                           std::to_string(e.nbytes) + " bytes, expected " +
                                                           std::to_string(stride));
                const bool extends = open >= 0 && spans[size_t(open)].file == &files_[size_t(e.shard)] &&
                                     spans[size_t(open)].offset + spans[size_t(open)].nbytes == e.offset;
                if (extends) spans[size_t(open)].nbytes += e.nbytes;
                else open = add_span(e.shard, e.offset, e.nbytes, /*first=*/false);
                expert_at_[size_t(il) * n_experts_ + ie] = {open, e.offset - spans[size_t(open)].offset};
            }
        }

        SpanLoader::Options options;
        options.threads = io::kReaderThreads;
        if (background) options.hold_path = hold_file;
        loader_ = std::make_unique<SpanLoader>(std::move(spans), std::move(options));

        Status st = background ? loader_->wait_first() : loader_->wait_all();
        if (!st.ok()) throw Error(ErrorKind::Io, "loading the weights: " + st.message);

        for (int il = 0; il < c.num_hidden_layers; ++il)
            layers_.push_back(layer_span[size_t(il)] >= 0 ? loader_->payload(layer_span[size_t(il)]) : nullptr);
        expert_ptr_.resize(expert_at_.size(), nullptr);
        for (size_t k = 0; k < expert_at_.size(); ++k)
            if (expert_at_[k].first >= 0)
                expert_ptr_[k] = loader_->payload(expert_at_[k].first) + expert_at_[k].second;
        experts_loaded_ = loader_->complete();
    }

    Status acquire_layer(int il, const uint8_t** run) override {
        *run = layers_[size_t(il)];
        return Status::Ok();
    }
    void release_layer(int il) override {
        // A forward pass is over: the background load may have the disk again.
        if (!experts_loaded_ && il + 1 == int(layers_.size())) loader_->resume_pieces();
    }

    Status acquire_experts(int il, std::span<const int32_t> experts, const uint8_t** out) override {
        const uint8_t* const* base = &expert_ptr_[size_t(il) * n_experts_];
        if (!experts_loaded_) {
            if (Status s = wait_for_experts(il, experts); !s.ok()) return s;
        }
        for (size_t j = 0; j < experts.size(); ++j) out[j] = base[experts[j]];
        stats_.expert_requests += experts.size();
        stats_.expert_hits += experts.size();
        return Status::Ok();
    }
    void release_experts(int) override {}
    int max_experts_per_acquire() const override { return n_experts_; }
    WeightStoreStats stats() const override {
        WeightStoreStats s = stats_;
        s.expert_read_failures += uint64_t(loader_->failures());
        return s;
    }
    Status finish_load() override {
        Status st = loader_->wait_all();
        experts_loaded_ = st.ok();
        return st;
    }
    WeightsLoad weights_load() const override {
        return {loader_->bytes_done(), loader_->bytes_total(), loader_->failures(), loader_->first_failure()};
    }

private:
    // Background loading: the experts asked for that are not read yet are read next, together,
    // and waited for; a failed read is this step's IoError.
    Status wait_for_experts(int il, std::span<const int32_t> experts) {
        if (loader_->complete()) {
            experts_loaded_ = true;
            return Status::Ok();
        }
        const auto t0 = std::chrono::steady_clock::now();
        std::vector<SpanLoader::Range> ranges;
        for (int32_t e : experts) {
            const auto& at = expert_at_[size_t(il) * n_experts_ + size_t(e)];
            ranges.push_back({at.first, at.second, expert_stride_});
        }
        Status result = loader_->wait_ranges(ranges);
        const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        stats_.io_wait_seconds += waited;
        stats_.expert_wait_seconds += waited;
        return result;
    }

    int n_experts_;
    int64_t expert_stride_ = 0;
    std::vector<io::File> files_;
    std::unique_ptr<SpanLoader> loader_;      // the memory: every byte of trunk and experts
    std::vector<std::pair<int, int64_t>> expert_at_;  // [n_layer * n_expert] (span, offset in it)
    std::vector<const uint8_t*> layers_;      // [n_layer] trunk runs as on disk
    std::vector<const uint8_t*> expert_ptr_;  // [n_layer * n_expert] (null for dense layers)
    bool experts_loaded_ = false;             // every piece read: no more waiting
    WeightStoreStats stats_;
};

}  // namespace

std::unique_ptr<WeightStore> make_resident_store(const Checkpoint& ckpt, bool background, ExpertShare share, const std::string& hold_file) {
    return std::make_unique<ResidentStore>(ckpt, background, share, hold_file);
}

}  // namespace k3

#include "store/streaming_store.h"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>

#include "store/expert_cache.h"
#include "io/file.h"
#include "io/read_pool.h"
#include "store/trunk_codec.h"
#include "store/trunk_pack.h"
#include "store/trunk_ring.h"
#include "util/check.h"
#include "k3/error.h"

namespace k3::io {

namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// Fixed buffers handed out to one compressed block read at a time; take() waits for a free one.
class StagingBuffers {
public:
    void allocate(int n, size_t bytes) {
        for (int i = 0; i < n; ++i) {
            buffers_.emplace_back(bytes);
            free_.push_back(buffers_.back().data());
        }
        bytes_ = bytes;
    }
    size_t buffer_bytes() const { return bytes_; }
    uint8_t* take() {
        std::unique_lock lock(mu_);
        cv_.wait(lock, [&] { return !free_.empty(); });
        uint8_t* b = free_.back();
        free_.pop_back();
        return b;
    }
    void give(uint8_t* b) {
        {
            std::lock_guard lock(mu_);
            free_.push_back(b);
        }
        cv_.notify_one();
    }

private:
    std::vector<AlignedBuffer> buffers_;
    std::vector<uint8_t*> free_;
    size_t bytes_ = 0;
    std::mutex mu_;
    std::condition_variable cv_;
};

class StreamingStore final : public WeightStore {
public:
    StreamingStore(const StreamingLayout& layout, const MemoryPlan& plan);
    ~StreamingStore() override;

    Status acquire_layer(int il, const uint8_t** run) override;
    void release_layer(int il) override;
    Status acquire_experts(int il, std::span<const int32_t> experts, const uint8_t** out) override;
    void release_experts(int il) override;
    int max_experts_per_acquire() const override { return layout_.experts_per_token; }
    void prefetch_experts(int il, std::span<const int32_t> experts) override;
    Lookahead lookahead() const override {
        if (!prefetch_enabled_ || !plan_.lookahead) return Lookahead::Off;
        return ring_ ? Lookahead::Streamed : Lookahead::Resident;
    }
    const uint8_t* peek_layer(int il) override;
    io::PassLoan begin_pass(int64_t bytes, bool lm_head_lendable) override;
    int pass_tokens_keeping_lm_head() const override {
        return plan_.streaming ? plan_.chunk_tokens_keeping_lm_head : -1;
    }
    void end_pass() override;

    WeightStoreStats stats() const override;

private:
    Status read_layer(int il, uint8_t* buf, size_t cap, const uint8_t** payload);
    Status read_compressed_layer(int il, uint8_t* buf, size_t cap, const uint8_t** payload);
    Status verify_layer(int il, const uint8_t* payload);  // packed trunk: checksum on first read
    ReadRequest expert_request(int slot, int il, int ie);

    StreamingLayout layout_;
    MemoryPlan plan_;
    std::vector<File> files_;

    // Trunk: pinned layers (read on first use, kept) and the ring for the rest.
    std::vector<AlignedBuffer> pinned_buf_;
    std::vector<const uint8_t*> pinned_run_;
    std::vector<char> lent_layer_;           // [n_layers] pinned layers lent to the pass under way
    std::unique_ptr<TrunkRing> ring_;
    std::vector<std::atomic<bool>> checksum_verified_;
    StagingBuffers staging_;  // compressed pack only

    // Experts: one arena of uniform slots; cache_ and the slot states are guarded by mu_.
    AlignedBuffer arena_;
    size_t slot_bytes_ = 0;
    mutable std::mutex mu_;
    std::condition_variable cv_;
    ExpertCache cache_;
    std::vector<Status> slot_failure_;
    std::vector<std::vector<int>> held_;   // [n_layers]: slots acquired and not yet released
    int inflight_ = 0;
    bool prefetch_enabled_ = false;

    // Counters.
    std::atomic<uint64_t> trunk_bytes_read_{0}, trunk_layer_reads_{0};
    std::atomic<int> resident_pinned_{0};  // pinned layers whose run is in memory (stats() reads it)
    uint64_t expert_bytes_read_ = 0, expert_requests_ = 0, expert_hits_ = 0, expert_failures_ = 0;
    uint64_t prefetch_reads_ = 0, prefetch_hits_ = 0, pass_lent_bytes_ = 0, demand_reads_ = 0, unpinned_layers_ = 0;
    double pinned_wait_seconds_ = 0, expert_wait_seconds_ = 0;

    std::unique_ptr<ReadPool> pool_;  // last: its threads finish before anything above goes
};

StreamingStore::StreamingStore(const StreamingLayout& layout, const MemoryPlan& plan)
    : layout_(layout), plan_(plan), checksum_verified_(size_t(layout.n_layers)),
      cache_(plan.cache_slots, int64_t(layout.n_layers) * layout.n_experts) {
    K3_CHECK(int(plan.trunk.pinned.size()) == layout.n_layers, "plan is for %d layers, layout has %d",
             int(plan.trunk.pinned.size()), layout.n_layers);
    for (const auto& p : layout_.files) files_.push_back(File::open(p));
    pool_ = std::make_unique<ReadPool>(kReaderThreads);
    if (!layout_.layer_blocks.empty())
        staging_.allocate(kCodecStagingBuffers, window_capacity(int64_t(max_encoded_bytes(layout_.codec_block_bytes))));

    pinned_buf_.resize(size_t(layout.n_layers));
    pinned_run_.assign(size_t(layout.n_layers), nullptr);
    lent_layer_.assign(size_t(layout.n_layers), 0);
    std::vector<char> streamed(size_t(layout.n_layers), 0);
    std::vector<int64_t> window_bytes;  // what a layer's read needs (a compressed one decodes into it)
    for (int il = 0; il < layout.n_layers; ++il) {
        window_bytes.push_back(int64_t(window_capacity(layout.layer_runs[il].nbytes)));
        if (plan.trunk.pinned[il])
            pinned_buf_[il] = AlignedBuffer(size_t(window_bytes.back()));
        else
            streamed[il] = 1;
    }
    if (plan.trunk.ring_bytes > 0)
        ring_ = std::make_unique<TrunkRing>(streamed, window_bytes, plan.trunk.ring_bytes,
                                            [this](int il, uint8_t* buf, size_t cap, const uint8_t** payload) {
                                                return read_layer(il, buf, cap, payload);
                                            });

    slot_bytes_ = size_t(plan.cache_slot_bytes);
    if (plan.cache_slots > 0) arena_ = AlignedBuffer(size_t(plan.cache_slots) * slot_bytes_);
    slot_failure_.resize(size_t(plan.cache_slots));
    held_.resize(size_t(layout.n_layers));
    // Read-ahead needs room beyond the layer in use and the one being fetched.
    prefetch_enabled_ = plan.cache_slots >= 2 * layout.experts_per_token + 8;
}

StreamingStore::~StreamingStore() {
    ring_.reset();  // joins the ring's reader (it may be waiting on the pool)
    {
        std::unique_lock lock(mu_);
        cv_.wait(lock, [&] { return inflight_ == 0; });
    }
    pool_.reset();
}

// A layer of a compressed pack: its blocks are read into staging buffers, a few in flight, and
// each is decoded into `buf` by the reader thread that read it, while the next blocks are read.
Status StreamingStore::read_compressed_layer(int il, uint8_t* buf, size_t cap, const uint8_t** payload) {
    const ByteRun& run = layout_.layer_runs[il];
    const std::vector<int64_t>& blocks = layout_.layer_blocks[il];
    const File& file = files_[run.shard];
    if (cap < size_t(run.nbytes))
        return io_error(file.path(), run.offset, run.nbytes, "buffer smaller than layer " + std::to_string(il));
    struct Latch {
        std::mutex mu;
        std::condition_variable cv;
        int pending = 0;
        Status failure;
    };
    auto latch = std::make_shared<Latch>();
    const int64_t B = layout_.codec_block_bytes;
    int64_t at = run.offset;
    for (size_t k = 0; k < blocks.size(); ++k) {
        uint8_t* stage = staging_.take();
        const int64_t raw_lo = int64_t(k) * B, raw_n = std::min(B, run.nbytes - raw_lo), enc = blocks[k];
        ReadRequest r;
        r.file = &file;
        r.offset = at;
        r.nbytes = enc;
        r.buf = stage;
        r.cap = staging_.buffer_bytes();
        r.done = [this, latch, stage, dst = buf + raw_lo, raw_n, enc, at, k, il, &file](const Status& st, const uint8_t* p) {
            Status s = st;
            if (s.ok() && !decode_block(p, size_t(enc), dst, size_t(raw_n)))
                s = io_error(file.path(), at, enc,
                             "block " + std::to_string(k) + " of layer " + std::to_string(il) +
                                 " of the compressed trunk does not decode (trunk.bin damaged?)");
            staging_.give(stage);
            std::lock_guard lock(latch->mu);
            if (!s.ok() && latch->failure.ok()) latch->failure = s;
            if (--latch->pending == 0) latch->cv.notify_all();
        };
        {
            std::lock_guard lock(latch->mu);
            ++latch->pending;
        }
        std::vector<ReadRequest> one;
        one.push_back(std::move(r));
        pool_->submit(std::move(one));
        at += align_up(enc, kTrunkPackAlign);
    }
    std::unique_lock lock(latch->mu);
    latch->cv.wait(lock, [&] { return latch->pending == 0; });
    if (!latch->failure.ok()) return latch->failure;
    trunk_bytes_read_ += uint64_t(at - run.offset);
    *payload = buf;
    return Status::Ok();
}

Status StreamingStore::read_layer(int il, uint8_t* buf, size_t cap, const uint8_t** payload) {
    const ByteRun& run = layout_.layer_runs[il];
    if (!layout_.layer_blocks.empty() && !layout_.layer_blocks[il].empty()) {
        Status s = read_compressed_layer(il, buf, cap, payload);
        if (!s.ok()) return s;
        trunk_layer_reads_++;
        return verify_layer(il, *payload);
    }
    ReadRequest r;
    r.file = &files_[run.shard];
    r.offset = run.offset;
    r.nbytes = run.nbytes;
    r.buf = buf;
    r.cap = cap;
    r.done = [payload](const Status& s, const uint8_t* p) {
        if (s.ok()) *payload = p;
    };
    std::vector<ReadRequest> one;
    one.push_back(std::move(r));
    Status s = pool_->read_all(std::move(one));
    if (!s.ok()) return s;
    trunk_bytes_read_ += uint64_t(run.nbytes);
    trunk_layer_reads_++;
    return verify_layer(il, *payload);
}

Status StreamingStore::verify_layer(int il, const uint8_t* payload) {
    const ByteRun& run = layout_.layer_runs[il];
    if (!layout_.layer_checksums.empty() && !checksum_verified_[il].load()) {
        uint64_t sum = run_checksum(payload, size_t(run.nbytes));
        if (sum != layout_.layer_checksums[il])
            return io_error(files_[run.shard].path(), run.offset, run.nbytes,
                            "layer " + std::to_string(il) + " of the packed trunk does not match its checksum in trunk.json");
        checksum_verified_[il] = true;
    }
    return Status::Ok();
}

Status StreamingStore::acquire_layer(int il, const uint8_t** run) {
    if (plan_.trunk.pinned[il]) {
        if (!pinned_run_[il]) {
            auto t0 = Clock::now();
            const uint8_t* payload = nullptr;
            Status s = read_layer(il, pinned_buf_[il].data(), pinned_buf_[il].size(), &payload);
            pinned_wait_seconds_ += seconds_since(t0);
            if (!s.ok()) return s;
            pinned_run_[il] = payload;
            ++resident_pinned_;
        }
        *run = pinned_run_[il];
        return Status::Ok();
    }
    return ring_->acquire(il, run);
}

void StreamingStore::release_layer(int il) {
    if (!plan_.trunk.pinned[il]) {
        ring_->release(il);
    } else if (lent_layer_[size_t(il)] && pinned_run_[size_t(il)]) {
        // lent to the pass: its pages go back until the next pass's use, or the first use after it
        give_pages_back(pinned_buf_[size_t(il)].data(), pinned_buf_[size_t(il)].size());
        pinned_run_[size_t(il)] = nullptr;
        --resident_pinned_;
    }
}

ReadRequest StreamingStore::expert_request(int s, int il, int ie) {
    const ExpertRun& run = layout_.expert_runs[size_t(il) * layout_.n_experts + ie];
    ReadRequest r;
    r.file = &files_[run.shard];
    r.offset = run.offset;
    r.nbytes = run.nbytes;
    r.buf = arena_.data() + size_t(s) * slot_bytes_;
    r.cap = slot_bytes_;
    int64_t nbytes = run.nbytes;
    r.done = [this, s, nbytes](const Status& st, const uint8_t* payload) {
        std::lock_guard lock(mu_);
        if (st.ok()) {
            cache_.publish(s, payload);
            expert_bytes_read_ += uint64_t(nbytes);
        } else {
            slot_failure_[s] = st;
            cache_.fail(s);
        }
        --inflight_;
        cv_.notify_all();
    };
    ++inflight_;
    return r;
}

Status StreamingStore::acquire_experts(int il, std::span<const int32_t> experts, const uint8_t** out) {
    auto t0 = Clock::now();
    std::unique_lock lock(mu_);
    std::vector<int> slots(experts.size(), -1);
    std::vector<ReadRequest> reads;
    for (size_t j = 0; j < experts.size(); ++j) {
        int64_t key = int64_t(il) * layout_.n_experts + experts[j];
        cache_.touch(key);
        ++expert_requests_;
        int s = cache_.find(key);
        if (s >= 0) {
            auto& slot = cache_.slot(s);
            if (slot.prefetched) {
                ++prefetch_hits_;
                slot.prefetched = false;
            } else if (slot.state == ExpertCache::SlotState::Ready) {
                ++expert_hits_;
            }
        } else {
            s = cache_.reserve(key);
            if (s < 0) {
                for (size_t k = 0; k < j; ++k) cache_.drop_user(slots[k]);
                return {StatusCode::Internal, "expert cache: no free slot for layer " + std::to_string(il) + " expert " +
                                                  std::to_string(experts[j]) + " (" + std::to_string(cache_.n_slots()) +
                                                  " slots, all in use or being read)"};
            }
            slot_failure_[s] = Status::Ok();
            reads.push_back(expert_request(s, il, experts[j]));
        }
        cache_.add_user(s);
        slots[j] = s;
    }
    if (!reads.empty()) {
        ++demand_reads_;
        lock.unlock();
        pool_->submit(std::move(reads));  // sorted by file and offset, read together
        lock.lock();
    }
    cv_.wait(lock, [&] {
        for (int s : slots)
            if (cache_.slot(s).state == ExpertCache::SlotState::Reading) return false;
        return true;
    });
    Status failure;
    for (size_t j = 0; j < experts.size(); ++j) {
        const auto& slot = cache_.slot(slots[j]);
        if (slot.state == ExpertCache::SlotState::Ready) {
            out[j] = slot.payload;
        } else if (failure.ok()) {
            failure = slot_failure_[slots[j]];
            if (failure.ok()) failure = {StatusCode::IoError, "expert read failed (layer " + std::to_string(il) + ")"};
        }
    }
    if (!failure.ok()) {
        ++expert_failures_;
        for (int s : slots) cache_.drop_user(s);
        for (size_t j = 0; j < experts.size(); ++j) out[j] = nullptr;
    } else {
        held_[il].insert(held_[il].end(), slots.begin(), slots.end());
    }
    expert_wait_seconds_ += seconds_since(t0);
    return failure;
}

void StreamingStore::release_experts(int il) {
    std::lock_guard lock(mu_);
    for (int s : held_[il]) cache_.drop_user(s);
    held_[il].clear();
}

const uint8_t* StreamingStore::peek_layer(int il) {
    if (il < 0 || il >= layout_.n_layers) return nullptr;
    if (plan_.trunk.pinned[size_t(il)]) return pinned_run_[size_t(il)];
    return ring_ ? ring_->peek(il) : nullptr;
}

void StreamingStore::prefetch_experts(int il, std::span<const int32_t> experts) {
    if (!prefetch_enabled_) return;
    std::vector<ReadRequest> reads;
    {
        std::lock_guard lock(mu_);
        for (int32_t ie : experts) {
            int64_t key = int64_t(il) * layout_.n_experts + ie;
            if (cache_.find(key) >= 0) continue;
            int s = cache_.reserve(key);
            if (s < 0) break;
            cache_.slot(s).prefetched = true;
            slot_failure_[s] = Status::Ok();
            ++prefetch_reads_;
            reads.push_back(expert_request(s, il, ie));
        }
    }
    if (!reads.empty()) pool_->submit(std::move(reads));
}

io::PassLoan StreamingStore::begin_pass(int64_t bytes, bool lm_head_lendable) {
    io::PassLoan loan = plan_.loan_for(bytes, lm_head_lendable);
    if (loan.bytes <= 0) return loan;
    // pinned layers: given back now (one not read since the last pass has nothing to give)
    for (int il : loan.layers) {
        lent_layer_[size_t(il)] = 1;
        ++unpinned_layers_;
        if (pinned_run_[size_t(il)]) {
            give_pages_back(pinned_buf_[size_t(il)].data(), pinned_buf_[size_t(il)].size());
            pinned_run_[size_t(il)] = nullptr;
            --resident_pinned_;
        }
    }
    // the expert cache's spare slots: their experts leave the cache
    std::lock_guard lock(mu_);
    pass_lent_bytes_ += uint64_t(loan.bytes);
    for (int s : cache_.lend(loan.cache_slots)) give_pages_back(arena_.data() + size_t(s) * slot_bytes_, slot_bytes_);
    return loan;
}

void StreamingStore::end_pass() {
    // a lent layer stays out until its first use reads it (acquire_layer's pinned path)
    std::fill(lent_layer_.begin(), lent_layer_.end(), 0);
    std::lock_guard lock(mu_);
    cache_.take_back();
}

WeightStoreStats StreamingStore::stats() const {
    WeightStoreStats st;
    st.trunk_bytes_read = trunk_bytes_read_.load();
    st.trunk_layer_reads = trunk_layer_reads_.load();
    double ring_wait = ring_ ? ring_->wait_seconds() : 0;
    std::lock_guard lock(mu_);
    st.expert_bytes_read = expert_bytes_read_;
    st.expert_requests = expert_requests_;
    st.expert_hits = expert_hits_;
    st.expert_evictions = cache_.evictions();
    st.pass_lent_bytes = pass_lent_bytes_;
    st.pass_unpinned_layers = unpinned_layers_;
    st.resident_pinned_layers = resident_pinned_.load();
    st.expert_demand_reads = demand_reads_;
    st.expert_read_failures = expert_failures_;
    st.expert_prefetch_reads = prefetch_reads_;
    st.expert_prefetch_hits = prefetch_hits_;
    st.trunk_wait_seconds = pinned_wait_seconds_ + ring_wait;
    st.expert_wait_seconds = expert_wait_seconds_;
    st.io_wait_seconds = st.trunk_wait_seconds + st.expert_wait_seconds;
    st.pinned_layers = plan_.trunk.n_pinned;
    st.ring_bytes = plan_.trunk.ring_bytes;
    return st;
}

}  // namespace

StreamingLayout layout_of(const Checkpoint& ckpt, const std::string& trunk_dir) {
    StreamingLayout l;
    for (const auto& s : ckpt.directory.shards()) l.files.push_back(s.path);
    l.layer_runs = ckpt.layer_runs;
    l.expert_runs = ckpt.expert_runs;
    l.n_layers = ckpt.config.num_hidden_layers;
    l.n_experts = ckpt.config.num_experts;
    l.experts_per_token = ckpt.config.num_experts_per_token;
    if (!trunk_dir.empty()) {
        TrunkPack pack = open_trunk_pack(trunk_dir, ckpt);
        int bin = int(l.files.size());
        l.files.push_back(pack.dir / kTrunkPackFile);
        for (const auto& pl : pack.layers) {
            l.layer_runs[pl.layer] = ByteRun{bin, pl.file_offset, pl.nbytes};
            l.layer_checksums.push_back(pl.checksum);
        }
        if (pack.compressed) {
            l.codec_block_bytes = pack.block_bytes;
            l.layer_blocks.resize(pack.layers.size());
            for (const auto& pl : pack.layers) l.layer_blocks[size_t(pl.layer)] = pl.blocks;
        }
    }
    return l;
}

std::unique_ptr<WeightStore> make_streaming_store(const StreamingLayout& layout, const MemoryPlan& plan) {
    return std::make_unique<StreamingStore>(layout, plan);
}

}  // namespace k3::io

namespace k3 {

std::unique_ptr<WeightStore> make_streaming_store(const Checkpoint& ckpt, const io::MemoryPlan& plan) {
    return io::make_streaming_store(io::layout_of(ckpt, plan.trunk_dir), plan);
}

}  // namespace k3

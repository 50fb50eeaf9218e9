// Rank 0 of expert parallelism (expert_parallel.h): the hello and fingerprint check, the per-layer
// exchange behind RemoteExperts, the heartbeat, and the end of the job.
#ifdef K3_HAVE_MPI
#include <spdlog/spdlog.h>

#include <atomic>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <thread>

#include "k3/error.h"
#include "parallel/expert_parallel.h"
#include "parallel/mpi_wire.h"

namespace k3::parallel {

namespace {

class MpiLeader final : public ExpertLeader {
public:
    MpiLeader(ExpertShare world, int n_experts)
        : world_(world), n_experts_(n_experts), deadlines_(Deadlines::from_environment()),
          host_(size_t(world.ranks)), pending_(size_t(world.ranks)) {}

    ~MpiLeader() override { end_job(); }

    int ranks() const override { return world_.ranks; }

    std::string failure() const override {
        std::lock_guard lock(mu_);
        return failure_;
    }

    // kHello from every rank: its host and its checkpoint's fingerprint, compared with ours.
    void hello(const std::string& fingerprint) {
        host_[0] = processor_name();
        std::vector<std::vector<char>> text(size_t(world_.ranks), std::vector<char>(2 * kStatusBytes));
        std::vector<MPI_Request> req;
        for (int r = 1; r < world_.ranks; ++r) {
            req.push_back(MPI_REQUEST_NULL);
            MPI_Irecv(text[size_t(r)].data(), 2 * kStatusBytes, MPI_CHAR, r, kHello, MPI_COMM_WORLD, &req.back());
        }
        if (!wait_all(req, Clock::now() + seconds(deadlines_.load))) {
            abandon(req);
            refuse_all();
            throw Error(ErrorKind::Io, "expert parallelism: not every rank said hello within " +
                                           std::to_string(int(deadlines_.load)) + " s (K3_RANK_LOAD_TIMEOUT_S)");
        }
        for (int r = 1; r < world_.ranks; ++r) {
            const char* t = text[size_t(r)].data();
            host_[size_t(r)] = t;
            const std::string theirs(t + kStatusBytes);
            std::string why;
            if (theirs.rfind("error: ", 0) == 0) why = "could not open its checkpoint: " + theirs.substr(7);
            else if (theirs != fingerprint)
                why = "serves checkpoint " + theirs + ", rank 0 serves " + fingerprint +
                      ": every rank needs the same model files (docs/operations.md \"Several machines\")";
            if (!why.empty()) {
                refuse_all();
                throw Error(ErrorKind::Checkpoint, "expert parallelism: " + name(r) + " " + why);
            }
        }
    }

    void start_serving(int chunk_tokens) override {
        std::vector<std::vector<char>> text(size_t(world_.ranks), std::vector<char>(kStatusBytes));
        accept_all(1, chunk_tokens);
        std::vector<MPI_Request> req;
        for (int r = 1; r < world_.ranks; ++r) {
            req.push_back(MPI_REQUEST_NULL);
            MPI_Irecv(text[size_t(r)].data(), kStatusBytes, MPI_CHAR, r, kReady, MPI_COMM_WORLD, &req.back());
        }
        if (!wait_all(req, Clock::now() + seconds(deadlines_.load))) {
            abandon(req);
            stop_all();
            throw Error(ErrorKind::Io, "expert parallelism: not every rank loaded its experts within " +
                                           std::to_string(int(deadlines_.load)) + " s (K3_RANK_LOAD_TIMEOUT_S)");
        }
        for (int r = 1; r < world_.ranks; ++r)
            if (text[size_t(r)][0]) {
                stop_all();
                throw Error(ErrorKind::Io, "expert parallelism: " + name(r) + " could not load its experts: " +
                                               std::string(text[size_t(r)].data()));
            }
        for (int r = 1; r < world_.ranks; ++r)
            spdlog::info("expert parallelism: {} serves experts {}..{} of each layer", name(r),
                         ExpertShare{r, world_.ranks}.begin(n_experts_), ExpertShare{r, world_.ranks}.end(n_experts_) - 1);
        serving_ = true;
        heartbeat_ = std::thread([this] { heartbeat(); });
    }

    Status start(int il, std::span<const int32_t> experts, const int32_t* counts, const int32_t* row_tokens,
                 const float* latent, int tokens, float* out, int64_t width) override {
        if (Status st = failed_status(); !st.ok()) return st;
        started_ = Clock::now();
        uint64_t bytes = 0;
        size_t i = 0;
        int64_t row0 = 0;
        const int latent_floats = int(int64_t(tokens) * width);
        while (i < experts.size()) {
            const int r = ExpertShare::owner(experts[i], n_experts_, world_.ranks);
            Pending& p = pending_[size_t(r)];
            p.header.assign({il, tokens, 0});
            size_t j = i;
            int64_t n_rows = 0;
            for (; j < experts.size() && ExpertShare::owner(experts[j], n_experts_, world_.ranks) == r; ++j)
                p.header.push_back(experts[j]);
            for (size_t k = i; k < j; ++k) {
                p.header.push_back(counts[experts[k]]);
                n_rows += counts[experts[k]];
            }
            p.header[2] = int32_t(j - i);
            p.done.assign(kStatusBytes, '\0');
            const int out_floats = int(n_rows * width);
            p.requests.assign(5, MPI_REQUEST_NULL);
            MPI_Irecv(p.done.data(), kStatusBytes, MPI_CHAR, r, kDone, MPI_COMM_WORLD, &p.requests[0]);
            MPI_Irecv(out + row0 * width, out_floats, MPI_FLOAT, r, kOut, MPI_COMM_WORLD, &p.requests[1]);
            MPI_Isend(p.header.data(), int(p.header.size()), MPI_INT32_T, r, kWork, MPI_COMM_WORLD, &p.requests[2]);
            MPI_Isend(row_tokens + row0, int(n_rows), MPI_INT32_T, r, kRowTokens, MPI_COMM_WORLD, &p.requests[3]);
            MPI_Isend(latent, latent_floats, MPI_FLOAT, r, kLatent, MPI_COMM_WORLD, &p.requests[4]);
            p.active = true;
            bytes += (uint64_t(latent_floats) + uint64_t(out_floats)) * sizeof(float) + uint64_t(n_rows) * sizeof(int32_t);
            row0 += n_rows;
            i = j;
        }
        std::lock_guard lock(mu_);
        traffic_.bytes += bytes;
        return Status::Ok();
    }

    Status finish() override {
        const auto waited_from = Clock::now();
        const auto deadline = waited_from + seconds(deadlines_.exchange);
        Status result = exchange(deadline);
        const auto now = Clock::now();
        std::lock_guard lock(mu_);
        traffic_.exchanges++;
        traffic_.seconds += std::chrono::duration<double>(now - started_).count();
        traffic_.wait_seconds += std::chrono::duration<double>(now - waited_from).count();
        return result;
    }

    Traffic traffic() const override {
        std::lock_guard lock(mu_);
        return traffic_;
    }

private:
    Status exchange(Clock::time_point deadline) {
        Status result;
        for (int r = 1; r < world_.ranks; ++r) {
            Pending& p = pending_[size_t(r)];
            if (!p.active) continue;
            p.active = false;
            if (!result.ok()) {
                abandon(p.requests);
                continue;
            }
            // The status first: a rank that failed sends no rows.
            std::vector<MPI_Request> done{p.requests[0]};
            p.requests[0] = MPI_REQUEST_NULL;
            if (!wait_all(done, deadline, &failed_)) {
                abandon(done);
                abandon(p.requests);
                if (!failed_) fail(r, "did not answer layer " + std::to_string(p.header[0]) + " within " +
                                          std::to_string(int(deadlines_.exchange)) + " s (K3_RANK_TIMEOUT_S): hung or gone");
                result = failed_status();
                continue;
            }
            if (p.done[0]) {
                abandon(p.requests);
                fail(r, "cannot compute its experts: " + std::string(p.done.data()));
                result = failed_status();
                continue;
            }
            if (!wait_all(p.requests, deadline, &failed_)) {
                abandon(p.requests);
                if (!failed_) fail(r, "stopped sending layer " + std::to_string(p.header[0]) + "'s rows");
                result = failed_status();
            }
        }
        return result;
    }

    struct Pending {
        bool active = false;
        std::vector<int32_t> header;
        std::vector<char> done;
        std::vector<MPI_Request> requests;
    };

    static Clock::duration seconds(double s) {
        return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s));
    }

    std::string name(int r) const {
        return "rank " + std::to_string(r) + (host_[size_t(r)].empty() ? "" : " (" + host_[size_t(r)] + ")");
    }

    Status failed_status() const {
        if (!failed_) return Status::Ok();
        return Status{StatusCode::Unavailable, failure()};
    }

    // The first failure wins: it is logged once, and the model stays unavailable.
    void fail(int r, const std::string& what) {
        std::lock_guard lock(mu_);
        if (!failure_.empty()) return;
        failure_ = "expert parallelism: " + name(r) + " " + what +
                   "; the model is unavailable until the job is restarted (docs/operations.md \"Several machines\")";
        failed_rank_ = r;
        failed_ = true;
        spdlog::error("{}", failure_);
        cv_.notify_all();
    }

    // Every second each rank answers a ping within the heartbeat deadline, or is given up on.
    void heartbeat() {
        int32_t seq = 0;
        std::unique_lock lock(mu_);
        while (!stopping_ && !failed_) {
            cv_.wait_for(lock, std::chrono::seconds(1), [&] { return stopping_ || failed_.load(); });
            if (stopping_ || failed_) break;
            lock.unlock();
            ++seq;
            std::vector<int32_t> pong(size_t(world_.ranks));
            std::vector<MPI_Request> req;
            for (int r = 1; r < world_.ranks; ++r) {
                req.push_back(MPI_REQUEST_NULL);
                MPI_Irecv(&pong[size_t(r)], 1, MPI_INT32_T, r, kPong, MPI_COMM_WORLD, &req.back());
                req.push_back(MPI_REQUEST_NULL);
                MPI_Isend(&seq, 1, MPI_INT32_T, r, kPing, MPI_COMM_WORLD, &req.back());
            }
            const auto deadline = Clock::now() + seconds(deadlines_.heartbeat);
            for (int r = 1; r < world_.ranks && !failed_; ++r) {
                std::vector<MPI_Request> one{req[size_t(2 * (r - 1))], req[size_t(2 * (r - 1) + 1)]};
                req[size_t(2 * (r - 1))] = req[size_t(2 * (r - 1) + 1)] = MPI_REQUEST_NULL;
                if (!wait_all(one, deadline, &failed_)) {
                    abandon(one);
                    if (!failed_)
                        fail(r, "has not answered the heartbeat for " + std::to_string(int(deadlines_.heartbeat)) +
                                    " s (K3_RANK_HEARTBEAT_S): dead or hung");
                }
            }
            abandon(req);
            lock.lock();
        }
    }

    void accept_all(int accepted, int chunk_tokens) {
        std::vector<int32_t> msg{accepted, chunk_tokens};
        std::vector<MPI_Request> req;
        for (int r = 1; r < world_.ranks; ++r) {
            req.push_back(MPI_REQUEST_NULL);
            MPI_Isend(msg.data(), 2, MPI_INT32_T, r, kAccept, MPI_COMM_WORLD, &req.back());
        }
        if (!wait_all(req, Clock::now() + std::chrono::seconds(5))) abandon(req);
    }
    void refuse_all() { accept_all(0, 0); }

    void stop_all() {
        int32_t stop = 1;
        std::vector<MPI_Request> req;
        for (int r = 1; r < world_.ranks; ++r) {
            if (failed_ && r == failed_rank_) continue;
            req.push_back(MPI_REQUEST_NULL);
            MPI_Isend(&stop, 1, MPI_INT32_T, r, kStop, MPI_COMM_WORLD, &req.back());
        }
        if (!wait_all(req, Clock::now() + std::chrono::seconds(5))) abandon(req);
    }

    // The other ranks are told to stop; MPI is finalised only when every rank is well (a
    // finalise waits for all of them).
    void end_job() {
        {
            std::lock_guard lock(mu_);
            stopping_ = true;
            cv_.notify_all();
        }
        if (heartbeat_.joinable()) heartbeat_.join();
        if (!serving_) return;
        for (int r = 1; r < world_.ranks; ++r) abandon(pending_[size_t(r)].requests);
        stop_all();
        if (!failed_) MPI_Finalize();
    }

    const ExpertShare world_;
    const int n_experts_;
    const Deadlines deadlines_;
    std::vector<std::string> host_;
    std::vector<Pending> pending_;   // [rank] the layer exchange in flight
    Traffic traffic_;              // under mu_: Engine::stats may be asked from another thread
    Clock::time_point started_;    // the exchange in flight
    bool serving_ = false;

    mutable std::mutex mu_;
    std::condition_variable cv_;
    std::string failure_;
    int failed_rank_ = -1;
    std::atomic<bool> failed_{false};
    bool stopping_ = false;
    std::thread heartbeat_;
};

}  // namespace

bool built_with_mpi() { return true; }

std::unique_ptr<ExpertLeader> connect_leader(ExpertShare world, const std::string& fingerprint, int n_experts) {
    init_mpi();
    auto leader = std::make_unique<MpiLeader>(world, n_experts);
    leader->hello(fingerprint);
    return leader;
}

}  // namespace k3::parallel
#endif

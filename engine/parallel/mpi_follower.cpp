// A rank other than 0 of expert parallelism (expert_parallel.h): says hello with its checkpoint's
// fingerprint, then computes its share of each layer's experts for the rows rank 0 sends, and
// answers rank 0's heartbeat on a thread of its own, so a long layer does not look like a hang.
#ifdef K3_HAVE_MPI
#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <thread>

#include "k3/error.h"
#include "model/blocks.h"
#include "util/check.h"
#include "parallel/expert_parallel.h"
#include "parallel/mpi_wire.h"

namespace k3::parallel {

namespace {

// Without a ping from rank 0 for this long, rank 0 is taken to be gone and the rank ends.
constexpr double kLeaderSilenceSeconds = 60;

class MpiFollower final : public ExpertFollower {
public:
    explicit MpiFollower(ExpertShare world) : world_(world), deadlines_(Deadlines::from_environment()) {}

    int hello(bool opened, const std::string& fingerprint_or_error) override {
        std::vector<char> msg = status_text(processor_name());
        const std::vector<char> fp = status_text(opened ? fingerprint_or_error : "error: " + fingerprint_or_error);
        msg.insert(msg.end(), fp.begin(), fp.end());
        int32_t accept[2] = {0, 0};
        std::vector<MPI_Request> req(2, MPI_REQUEST_NULL);
        MPI_Irecv(accept, 2, MPI_INT32_T, 0, kAccept, MPI_COMM_WORLD, &req[0]);
        MPI_Isend(msg.data(), int(msg.size()), MPI_CHAR, 0, kHello, MPI_COMM_WORLD, &req[1]);
        if (!wait_all(req, Clock::now() + seconds(deadlines_.load))) {
            abandon(req);
            throw Error(ErrorKind::Io, "rank 0 did not answer this rank's hello");
        }
        if (!opened) throw Error(ErrorKind::Checkpoint, fingerprint_or_error);
        if (!accept[0])
            throw Error(ErrorKind::Checkpoint,
                        "rank 0 refused this rank (another checkpoint, or another rank failed; see rank 0's log)");
        return accept[1];
    }

    void ready(const std::string& error) override {
        std::vector<char> msg = status_text(error);
        std::vector<MPI_Request> req(1, MPI_REQUEST_NULL);
        MPI_Isend(msg.data(), kStatusBytes, MPI_CHAR, 0, kReady, MPI_COMM_WORLD, &req[0]);
        if (!wait_all(req, Clock::now() + seconds(deadlines_.load))) abandon(req);
    }

    bool serve(Model& m) override {
        last_ping_ = Clock::now().time_since_epoch().count();
        std::thread pong([this] { answer_pings(); });
        const bool clean = serve_layers(m);
        stop_ = true;
        pong.join();
        if (clean) MPI_Finalize();
        return clean;
    }

private:
    static Clock::duration seconds(double s) {
        return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s));
    }

    bool leader_silent() const {
        return Clock::now() - Clock::time_point(Clock::duration(last_ping_.load())) > seconds(kLeaderSilenceSeconds);
    }

    bool serve_layers(Model& m) {
        const ModelConfig& c = m.cfg;
        Activations& a = m.act;
        const int64_t L = c.routed_expert_hidden_size;
        std::vector<int32_t> header(size_t(3 + 2 * c.num_experts));
        int32_t stop = 0;
        std::vector<MPI_Request> stop_req(1, MPI_REQUEST_NULL);
        MPI_Irecv(&stop, 1, MPI_INT32_T, 0, kStop, MPI_COMM_WORLD, &stop_req[0]);
        for (;;) {
            std::vector<MPI_Request> work(1, MPI_REQUEST_NULL);
            MPI_Irecv(header.data(), int(header.size()), MPI_INT32_T, 0, kWork, MPI_COMM_WORLD, &work[0]);
            // A layer, the end of the job, or silence from rank 0.
            for (;;) {
                if (wait_all(work, Clock::now() + std::chrono::milliseconds(200))) break;
                if (wait_all(stop_req, Clock::now())) {
                    abandon(work);
                    return true;
                }
                if (leader_silent()) {
                    abandon(work);
                    abandon(stop_req);
                    spdlog::error("expert parallelism: rank 0 has not been heard from for {} s; rank {} ends",
                                  int(kLeaderSilenceSeconds), world_.rank);
                    return false;
                }
            }
            const int il = header[0], tokens = header[1], n = header[2];
            int64_t n_rows = 0;
            for (int i = 0; i < n; ++i) {
                const int32_t e = header[size_t(3 + i)], count = header[size_t(3 + n + i)];
                a.union_ids[size_t(i)] = e;
                a.first_slot[size_t(e)] = int32_t(n_rows);
                n_rows += count;
                a.cursor[size_t(e)] = int32_t(n_rows);
            }
            K3_CHECK(tokens <= a.max_tokens, "layer %d: a pass of %d tokens, room for %d", il, tokens, a.max_tokens);
            K3_CHECK(n_rows <= int64_t(tokens) * c.num_experts_per_token, "layer %d: %lld rows for %d tokens", il,
                     (long long)n_rows, tokens);
            std::vector<MPI_Request> rows(2, MPI_REQUEST_NULL);
            MPI_Irecv(a.slot_token.data(), int(n_rows), MPI_INT32_T, 0, kRowTokens, MPI_COMM_WORLD, &rows[0]);
            MPI_Irecv(a.lat.data(), int(int64_t(tokens) * L), MPI_FLOAT, 0, kLatent, MPI_COMM_WORLD, &rows[1]);
            if (!wait_all(rows, Clock::now() + seconds(deadlines_.exchange))) {
                abandon(rows);
                abandon(stop_req);
                spdlog::error("expert parallelism: rank 0 stopped sending layer {}'s rows; rank {} ends", il, world_.rank);
                return false;
            }
            Status st;
            {
                StageClock clock(m.stage_seconds, ForwardStage::Experts);
                st = routed_experts(m, il, n, nullptr, tokens, clock);
            }
            if (!st.ok()) spdlog::error("expert parallelism: rank {} cannot compute layer {}: {}", world_.rank, il, st.message);
            std::vector<char> done = status_text(st.ok() ? "" : st.message.empty() ? "failed" : st.message);
            std::vector<MPI_Request> reply(1, MPI_REQUEST_NULL);
            MPI_Isend(done.data(), kStatusBytes, MPI_CHAR, 0, kDone, MPI_COMM_WORLD, &reply[0]);
            if (st.ok()) {
                reply.push_back(MPI_REQUEST_NULL);
                MPI_Isend(a.ex_out.data(), int(n_rows * L), MPI_FLOAT, 0, kOut, MPI_COMM_WORLD, &reply.back());
            }
            if (!wait_all(reply, Clock::now() + seconds(deadlines_.exchange))) {
                abandon(reply);
                abandon(stop_req);
                spdlog::error("expert parallelism: rank 0 stopped taking layer {}'s results; rank {} ends", il, world_.rank);
                return false;
            }
            m.layers_evaluated.fetch_add(1, std::memory_order_relaxed);
        }
    }

    void answer_pings() {
        int32_t seq = 0;
        while (!stop_) {
            std::vector<MPI_Request> ping(1, MPI_REQUEST_NULL);
            MPI_Irecv(&seq, 1, MPI_INT32_T, 0, kPing, MPI_COMM_WORLD, &ping[0]);
            bool got = false;
            while (!stop_ && !(got = wait_all(ping, Clock::now() + std::chrono::milliseconds(100)))) {
            }
            if (!got) {
                abandon(ping);
                return;
            }
            last_ping_ = Clock::now().time_since_epoch().count();
            std::vector<MPI_Request> pong(1, MPI_REQUEST_NULL);
            MPI_Isend(&seq, 1, MPI_INT32_T, 0, kPong, MPI_COMM_WORLD, &pong[0]);
            if (!wait_all(pong, Clock::now() + seconds(deadlines_.heartbeat))) abandon(pong);
        }
    }

    const ExpertShare world_;
    const Deadlines deadlines_;
    std::atomic<bool> stop_{false};
    std::atomic<Clock::rep> last_ping_{0};
};

}  // namespace

std::unique_ptr<ExpertFollower> connect_follower(ExpertShare world) {
    init_mpi();
    return std::make_unique<MpiFollower>(world);
}

}  // namespace k3::parallel
#endif

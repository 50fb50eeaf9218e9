// netbench (netbench.h): one layer's exchange, timed, without the experts. The counts are
// compiled with or without MPI (plan --ranks uses them); the exchange itself only with it.
#include "parallel/netbench.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "k3/error.h"
#include "parallel/expert_parallel.h"

#ifdef K3_HAVE_MPI
#include "parallel/mpi_wire.h"
#endif

namespace k3::parallel {

int64_t expected_rows(const ExchangeShape& s, int rank, int ranks) {
    if (s.n_experts <= 0) return 0;
    const double share = double(ExpertShare{rank, ranks}.count(s.n_experts)) / s.n_experts;
    return std::llround(double(s.tokens) * s.experts_per_token * share);
}

int64_t exchange_layer_bytes(const ExchangeShape& s, int ranks) {
    int64_t bytes = 0;
    for (int r = 1; r < ranks; ++r) {
        const int64_t rows = expected_rows(s, r, ranks);
        if (rows == 0) continue;  // rank 0 sends nothing to a rank none of whose experts the pass chose
        bytes += int64_t(s.tokens) * s.width * int64_t(sizeof(float)) +
                 rows * int64_t(sizeof(int32_t) + s.width * sizeof(float));
    }
    return bytes;
}

#ifndef K3_HAVE_MPI

std::vector<ExchangeTiming> netbench(ExpertShare, const std::vector<ExchangeShape>&, double) {
    throw Error(ErrorKind::Usage, "this build has no MPI (install libopenmpi-dev and rebuild; docs/operations.md "
                                  "\"Several machines\")");
}

#else

namespace {

Clock::duration seconds(double s) {
    return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s));
}

// kWork here: the shape of the round (tokens, rows), or tokens = 0 for the end.
constexpr int kHeaderInts = 2;

// Rank 0's side of one round: every other rank's messages out and answers back.
bool exchange_once(const ExchangeShape& s, int ranks, std::vector<float>& latent, std::vector<int32_t>& row_tokens,
                   std::vector<std::vector<float>>& out, std::vector<std::vector<char>>& done,
                   std::vector<std::vector<int32_t>>& header, Clock::time_point deadline, int& late_rank) {
    std::vector<MPI_Request> req;
    std::vector<int> rank_of;  // [request / 5]
    for (int r = 1; r < ranks; ++r) {
        const int64_t rows = expected_rows(s, r, ranks);
        if (rows == 0) continue;
        header[size_t(r)] = {s.tokens, int32_t(rows)};
        rank_of.push_back(r);
        req.insert(req.end(), 5, MPI_REQUEST_NULL);
        MPI_Request* q = &req[req.size() - 5];
        MPI_Irecv(done[size_t(r)].data(), kStatusBytes, MPI_CHAR, r, kDone, MPI_COMM_WORLD, &q[0]);
        MPI_Irecv(out[size_t(r)].data(), int(rows * s.width), MPI_FLOAT, r, kOut, MPI_COMM_WORLD, &q[1]);
        MPI_Isend(header[size_t(r)].data(), kHeaderInts, MPI_INT32_T, r, kWork, MPI_COMM_WORLD, &q[2]);
        MPI_Isend(row_tokens.data(), int(rows), MPI_INT32_T, r, kRowTokens, MPI_COMM_WORLD, &q[3]);
        MPI_Isend(latent.data(), int(int64_t(s.tokens) * s.width), MPI_FLOAT, r, kLatent, MPI_COMM_WORLD, &q[4]);
    }
    if (wait_all(req, deadline)) return true;
    // the first rank whose requests are still pending
    for (size_t i = 0; i < req.size(); ++i)
        if (req[i] != MPI_REQUEST_NULL) {
            late_rank = rank_of[i / 5];
            break;
        }
    abandon(req);
    return false;
}

std::vector<ExchangeTiming> lead(ExpertShare world, const std::vector<ExchangeShape>& shapes, double seconds_each,
                                 double timeout) {
    int64_t max_tokens = 1, max_rows = 1, width = 1;
    for (const ExchangeShape& s : shapes) {
        max_tokens = std::max<int64_t>(max_tokens, s.tokens);
        width = std::max<int64_t>(width, s.width);
        for (int r = 1; r < world.ranks; ++r) max_rows = std::max(max_rows, expected_rows(s, r, world.ranks));
    }
    std::vector<float> latent(size_t(max_tokens * width), 0.5f);
    std::vector<int32_t> row_tokens(size_t(max_rows), 0);
    std::vector<std::vector<float>> out(size_t(world.ranks), std::vector<float>(size_t(max_rows * width)));
    std::vector<std::vector<char>> done(size_t(world.ranks), std::vector<char>(kStatusBytes));
    std::vector<std::vector<int32_t>> header(size_t(world.ranks), std::vector<int32_t>(kHeaderInts));
    auto fail = [&](int r, const ExchangeShape& s) {
        throw Error(ErrorKind::Io, "netbench: rank " + std::to_string(r) + " did not answer a " + std::to_string(s.tokens) +
                                       "-token layer within " + std::to_string(int(timeout)) + " s (K3_RANK_TIMEOUT_S)");
    };
    std::vector<ExchangeTiming> timings;
    for (const ExchangeShape& s : shapes) {
        int late = 0;
        for (int i = 0; i < 3; ++i)  // warm-up: connections, buffers, the other ranks' first pages
            if (!exchange_once(s, world.ranks, latent, row_tokens, out, done, header, Clock::now() + seconds(timeout), late))
                fail(late, s);
        std::vector<double> us;
        const auto end = Clock::now() + seconds(seconds_each);
        while ((Clock::now() < end || us.size() < 5) && us.size() < 100000) {
            const auto t0 = Clock::now();
            if (!exchange_once(s, world.ranks, latent, row_tokens, out, done, header, t0 + seconds(timeout), late))
                fail(late, s);
            us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
        }
        std::sort(us.begin(), us.end());
        ExchangeTiming t;
        t.tokens = s.tokens;
        t.bytes = exchange_layer_bytes(s, world.ranks);
        t.rounds = int(us.size());
        t.min_us = us.front();
        t.median_us = us[us.size() / 2];
        t.p90_us = us[std::min(us.size() - 1, us.size() * 9 / 10)];
        timings.push_back(t);
    }
    // the end: a round of 0 tokens
    std::vector<std::vector<int32_t>> stop(size_t(world.ranks), std::vector<int32_t>(kHeaderInts, 0));
    std::vector<MPI_Request> req;
    for (int r = 1; r < world.ranks; ++r) {
        req.push_back(MPI_REQUEST_NULL);
        MPI_Isend(stop[size_t(r)].data(), kHeaderInts, MPI_INT32_T, r, kWork, MPI_COMM_WORLD, &req.back());
    }
    if (!wait_all(req, Clock::now() + seconds(timeout))) abandon(req);
    return timings;
}

void answer(ExpertShare world, const std::vector<ExchangeShape>& shapes, double timeout) {
    int64_t max_tokens = 1, max_rows = 1, width = 1;
    for (const ExchangeShape& s : shapes) {
        max_tokens = std::max<int64_t>(max_tokens, s.tokens);
        width = std::max<int64_t>(width, s.width);
        max_rows = std::max(max_rows, expected_rows(s, world.rank, world.ranks));
    }
    std::vector<float> latent(size_t(max_tokens * width)), out(size_t(max_rows * width), 0.25f);
    std::vector<int32_t> row_tokens(static_cast<size_t>(max_rows)), header(kHeaderInts);
    const std::vector<char> ok = status_text("");
    for (;;) {
        std::vector<MPI_Request> work(1, MPI_REQUEST_NULL);
        MPI_Irecv(header.data(), kHeaderInts, MPI_INT32_T, 0, kWork, MPI_COMM_WORLD, &work[0]);
        if (!wait_all(work, Clock::now() + seconds(timeout))) {
            abandon(work);
            throw Error(ErrorKind::Io, "netbench: rank 0 sent nothing for " + std::to_string(int(timeout)) + " s");
        }
        const int tokens = header[0];
        const int64_t rows = header[1];
        if (tokens == 0) return;
        if (tokens > max_tokens || rows > max_rows)
            throw Error(ErrorKind::Runtime, "netbench: rank 0 sent a layer of " + std::to_string(tokens) + " tokens and " +
                                                std::to_string(rows) + " rows, more than this rank sized for");
        std::vector<MPI_Request> in(2, MPI_REQUEST_NULL);
        MPI_Irecv(row_tokens.data(), int(rows), MPI_INT32_T, 0, kRowTokens, MPI_COMM_WORLD, &in[0]);
        MPI_Irecv(latent.data(), int(int64_t(tokens) * width), MPI_FLOAT, 0, kLatent, MPI_COMM_WORLD, &in[1]);
        std::vector<MPI_Request> reply(2, MPI_REQUEST_NULL);
        if (wait_all(in, Clock::now() + seconds(timeout))) {
            MPI_Isend(ok.data(), kStatusBytes, MPI_CHAR, 0, kDone, MPI_COMM_WORLD, &reply[0]);
            MPI_Isend(out.data(), int(rows * width), MPI_FLOAT, 0, kOut, MPI_COMM_WORLD, &reply[1]);
            if (wait_all(reply, Clock::now() + seconds(timeout))) continue;
        }
        abandon(in);
        abandon(reply);
        throw Error(ErrorKind::Io, "netbench: rank 0 stopped in the middle of a layer");
    }
}

}  // namespace

std::vector<ExchangeTiming> netbench(ExpertShare world, const std::vector<ExchangeShape>& shapes, double seconds_each) {
    if (world.ranks < 2)
        throw Error(ErrorKind::Usage, "netbench runs under mpirun with 2 or more ranks (mpirun -n 2 k3serve netbench)");
    for (const ExchangeShape& s : shapes)
        if (s.tokens < 1 || int64_t(s.tokens) * s.width >= (int64_t(1) << 31) ||
            expected_rows(s, 1, world.ranks) * s.width >= (int64_t(1) << 31))
            throw Error(ErrorKind::Usage, "netbench: a pass of " + std::to_string(s.tokens) +
                                              " tokens is out of range (1 token up to a message of 2^31 numbers)");
    init_mpi();
    const double timeout = Deadlines::from_environment().exchange;
    std::vector<ExchangeTiming> timings;
    if (world.rank == 0) timings = lead(world, shapes, seconds_each, timeout);
    else answer(world, shapes, timeout);
    MPI_Finalize();
    return timings;
}

#endif

}  // namespace k3::parallel

// init_mpi, wait_all, abandon (mpi_wire.h).
#ifdef K3_HAVE_MPI
#include "parallel/mpi_wire.h"

#include <algorithm>
#include <mutex>
#include <thread>

#include "k3/error.h"

namespace k3::parallel {

void init_mpi() {
    static std::once_flag once;
    std::call_once(once, [] {
        int initialized = 0;
        MPI_Initialized(&initialized);
        if (initialized) return;
        int provided = 0;
        if (MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided) != MPI_SUCCESS)
            throw Error(ErrorKind::Runtime, "MPI_Init_thread failed");
        if (provided < MPI_THREAD_MULTIPLE)
            throw Error(ErrorKind::Runtime, "this MPI library does not support MPI_THREAD_MULTIPLE");
        MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    });
}

std::string processor_name() {
    char name[MPI_MAX_PROCESSOR_NAME];
    int len = 0;
    MPI_Get_processor_name(name, &len);
    return std::string(name, size_t(len));
}

bool wait_all(std::vector<MPI_Request>& requests, Clock::time_point deadline, const std::atomic<bool>* abort) {
    int round = 0;
    for (;;) {
        int done = 0;
        if (requests.empty()) return true;
        if (MPI_Testall(int(requests.size()), requests.data(), &done, MPI_STATUSES_IGNORE) != MPI_SUCCESS) return false;
        if (done) return true;
        if ((abort && abort->load(std::memory_order_relaxed)) || Clock::now() >= deadline) return false;
        ++round;
        if (round < 2000) std::this_thread::yield();
        else std::this_thread::sleep_for(std::chrono::microseconds(std::min(1000, (round - 2000) / 10 + 20)));
    }
}

void abandon(std::vector<MPI_Request>& requests) {
    for (MPI_Request& r : requests) {
        if (r == MPI_REQUEST_NULL) continue;
        MPI_Cancel(&r);
        MPI_Request_free(&r);
    }
    requests.clear();
}

std::vector<char> status_text(const std::string& s) {
    std::vector<char> out(kStatusBytes, '\0');
    std::copy_n(s.data(), std::min<size_t>(s.size(), kStatusBytes - 1), out.data());
    return out;
}

}  // namespace k3::parallel
#endif

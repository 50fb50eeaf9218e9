// How often a piece of work runs in a given time: the timing loop of every speed doctor and plan
// measure (machine_speed.cpp, token_work.cpp).
#pragma once
#include <chrono>

namespace k3::cli {

// Runs `pass` until `seconds` have gone (after one warm-up pass): passes per second.
template <class F>
double passes_per_second(double seconds, F&& pass) {
    pass();
    int reps = 0;
    const auto t0 = std::chrono::steady_clock::now();
    double s = 0;
    do {
        pass();
        ++reps;
        s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    } while (s < seconds);
    return reps / s;
}

}  // namespace k3::cli

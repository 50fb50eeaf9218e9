// The machine's load average as /proc/loadavg has it (benchmarks print it with their figures:
// on a shared machine a ratio means little without the load it was measured under).
#pragma once
#include <cstdio>
#include <string>

inline std::string load_average() {
    char buf[128] = {0};
    if (FILE* f = std::fopen("/proc/loadavg", "r")) {
        if (!std::fgets(buf, sizeof buf, f)) buf[0] = 0;
        std::fclose(f);
    }
    std::string s(buf);
    while (!s.empty() && s.back() == '\n') s.pop_back();
    return s;
}

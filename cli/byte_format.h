// Human-readable byte counts for the tool reports: decimal units (GB = 1e9 bytes), as the
// spec and the performance notes quote them, with exact byte counts where they matter.
#pragma once
#include <cstdint>
#include <cstdio>
#include <string>

namespace k3::cli {

inline std::string human_bytes(double bytes) {
    const char* units[] = {"B", "kB", "MB", "GB", "TB"};
    int u = 0;
    while (bytes >= 1000 && u < 4) {
        bytes /= 1000;
        ++u;
    }
    char buf[32];
    std::snprintf(buf, sizeof buf, u == 0 ? "%.0f %s" : "%.2f %s", bytes, units[u]);
    return buf;
}

// 17547264 -> "17,547,264"
inline std::string grouped(int64_t n) {
    std::string digits = std::to_string(n < 0 ? -n : n), out;
    for (size_t i = 0; i < digits.size(); ++i) {
        if (i && (digits.size() - i) % 3 == 0) out += ',';
        out += digits[i];
    }
    return n < 0 ? "-" + out : out;
}

}  // namespace k3::cli

// ConnectionTable: how many connections each client address holds, and the figures of the
// connection caps (docs/operations.md, "Connections, limits and slow clients"). A connection
// holds an Entry from accept to close, whichever thread closes it (the event loop, or a
// handler thread after answering), so the per-address count is exact without the loop seeing
// every close.
#pragma once
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

namespace k3::server {

// What the front did to hold its caps, for /metrics.
struct ConnectionFigures {
    int open = 0;                       // connections open now
    uint64_t evicted_idle = 0;          // idle connections closed to make room for a new one
    uint64_t first_byte_deadline = 0;   // connections closed for sending nothing in time
    uint64_t refused_address = 0;       // refused: their address held its share, none idle
    uint64_t refused_total = 0;         // refused at the total cap (not /health or /metrics)
};

class ConnectionTable {
public:
    // Released (the address's count goes down) when the last copy is dropped.
    using Entry = std::shared_ptr<void>;

    // Counts one more connection from `address`; returns its hold and the address's count now.
    std::pair<Entry, int> acquire(const std::string& address) {
        int count;
        {
            std::lock_guard lock(mutex_);
            count = ++counts_[address];
        }
        Entry entry(nullptr, [this, address](void*) { release(address); });
        return {std::move(entry), count};
    }
    int count(const std::string& address) const {
        std::lock_guard lock(mutex_);
        auto it = counts_.find(address);
        return it == counts_.end() ? 0 : it->second;
    }

    std::atomic<uint64_t> evicted_idle{0}, first_byte_deadline{0}, refused_address{0}, refused_total{0};

private:
    void release(const std::string& address) {
        std::lock_guard lock(mutex_);
        auto it = counts_.find(address);
        if (it != counts_.end() && --it->second <= 0) counts_.erase(it);
    }

    mutable std::mutex mutex_;
    std::unordered_map<std::string, int> counts_;
};

}  // namespace k3::server

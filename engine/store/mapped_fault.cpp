#include "store/mapped_fault.h"

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <mutex>

namespace k3 {

namespace {

// Fixed slots, read by the signal handler without locks: a slot is published by storing its
// base last (release) and retired by clearing the base first.
struct Slot {
    std::atomic<const uint8_t*> base{nullptr};
    size_t length = 0;
    char path[512] = {};
};
constexpr int kSlots = 64;
Slot g_slots[kSlots];
std::mutex g_mu;  // registering and unregistering only
struct sigaction g_previous {};

void write_all(const char* s) {
    size_t n = std::strlen(s);
    while (n > 0) {
        ssize_t w = write(STDERR_FILENO, s, n);
        if (w <= 0) return;
        s += w;
        n -= size_t(w);
    }
}

void on_sigbus(int sig, siginfo_t* info, void* context) {
    const auto* addr = static_cast<const uint8_t*>(info->si_addr);
    for (Slot& slot : g_slots) {
        const uint8_t* base = slot.base.load(std::memory_order_acquire);
        if (base && addr >= base && addr < base + slot.length) {
            write_all("k3serve: fatal: ");
            write_all(slot.path);
            write_all(" changed on disk while mapped (truncated or rewritten in place?): the weights are gone; "
                      "restart with an intact checkpoint\n");
            break;
        }
    }
    // Die of the signal as without this handler (or pass it on to one installed before).
    if (g_previous.sa_flags & SA_SIGINFO && g_previous.sa_sigaction) {
        g_previous.sa_sigaction(sig, info, context);
        return;
    }
    if (g_previous.sa_handler != SIG_DFL && g_previous.sa_handler != SIG_IGN && g_previous.sa_handler) {
        g_previous.sa_handler(sig);
        return;
    }
    signal(SIGBUS, SIG_DFL);
    raise(SIGBUS);
}

}  // namespace

void register_mapped_file(const uint8_t* base, size_t length, const std::string& path) {
    std::lock_guard lock(g_mu);
    static bool installed = false;
    if (!installed) {
        struct sigaction sa {};
        sa.sa_sigaction = on_sigbus;
        sa.sa_flags = SA_SIGINFO;
        sigemptyset(&sa.sa_mask);
        sigaction(SIGBUS, &sa, &g_previous);
        installed = true;
    }
    for (Slot& slot : g_slots) {
        if (slot.base.load(std::memory_order_relaxed)) continue;
        slot.length = length;
        std::strncpy(slot.path, path.c_str(), sizeof slot.path - 1);
        slot.base.store(base, std::memory_order_release);
        return;
    }
    // More mappings than slots: the SIGBUS still kills the process, only without the file's name.
}

void unregister_mapped_file(const uint8_t* base) {
    std::lock_guard lock(g_mu);
    for (Slot& slot : g_slots)
        if (slot.base.load(std::memory_order_relaxed) == base) slot.base.store(nullptr, std::memory_order_release);
}

}  // namespace k3

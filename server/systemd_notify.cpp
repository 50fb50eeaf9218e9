#include "systemd_notify.h"

#include <systemd/sd-daemon.h>

#include <atomic>
#include <chrono>

namespace k3::server {

void notify_status(const std::string& status) { sd_notify(0, ("STATUS=" + status).c_str()); }

void notify_ready(const std::string& status) { sd_notify(0, ("READY=1\nSTATUS=" + status).c_str()); }

void notify_stopping() { sd_notify(0, "STOPPING=1\nSTATUS=draining requests"); }

void notify_watchdog() {
    static std::atomic<int64_t> last_ms{0};
    int64_t now = std::chrono::duration_cast<std::chrono::milliseconds>(
                      std::chrono::steady_clock::now().time_since_epoch()).count();
    if (now - last_ms.load() < 1000) return;
    last_ms = now;
    sd_notify(0, "WATCHDOG=1");
}

}  // namespace k3::server

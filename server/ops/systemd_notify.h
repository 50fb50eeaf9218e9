// systemd readiness protocol (sd_notify(3)) through libsystemd: READY=1 once the model is
// loaded, STATUS= lines while loading, (WATCHDOG=1 comes from ops/liveness.h), STOPPING=1 on
// shutdown. Without $NOTIFY_SOCKET (not under systemd) every call is a cheap no-op.
#pragma once
#include <string>

namespace k3::server {

void notify_status(const std::string& status);
void notify_ready(const std::string& status);
void notify_stopping();

}  // namespace k3::server

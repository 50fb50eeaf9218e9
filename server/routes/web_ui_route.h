// GET / and the web UI's files, embedded at build time (server/CMakeLists.txt) or read from
// --web-dir (docs/web-ui.md).
#pragma once
#include "http/message.h"
#include "settings/daemon_config.h"

namespace k3::server {

void answer_web_ui(const DaemonConfig& config, const HttpRequest& req, HttpResponse& res);

}  // namespace k3::server

// `k3serve serve`: the daemon. Returns the process exit code.
#pragma once

namespace k3::server {

int serve_main(int argc, char** argv);

}  // namespace k3::server

// Placeholder until the daemon lands.
#include "serve.h"

#include <cstdio>

namespace k3::server {

int serve_main(int, char**) {
    std::fprintf(stderr, "k3serve: 'serve' is not built yet\n");
    return 1;
}

}  // namespace k3::server

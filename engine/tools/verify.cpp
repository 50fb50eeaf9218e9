// Placeholder until the verify subcommand lands.
#include <cstdio>

#include "k3/tools.h"

namespace k3::tools {

int verify_main(int, char**) {
    std::fprintf(stderr, "k3serve: 'verify' is not built yet\n");
    return 1;
}

}  // namespace k3::tools

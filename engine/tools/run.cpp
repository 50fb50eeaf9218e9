// Placeholder until the run subcommand lands.
#include <cstdio>

#include "k3/tools.h"

namespace k3::tools {

int run_main(int, char**) {
    std::fprintf(stderr, "k3serve: 'run' is not built yet\n");
    return 1;
}

}  // namespace k3::tools

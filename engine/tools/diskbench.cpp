// Placeholder until the diskbench subcommand lands.
#include <cstdio>

#include "k3/tools.h"

namespace k3::tools {

int diskbench_main(int, char**) {
    std::fprintf(stderr, "k3serve: 'diskbench' is not built yet\n");
    return 1;
}

}  // namespace k3::tools

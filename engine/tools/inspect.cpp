// Placeholder until the inspect subcommand lands.
#include <cstdio>

#include "k3/tools.h"

namespace k3::tools {

int inspect_main(int, char**) {
    std::fprintf(stderr, "k3serve: 'inspect' is not built yet\n");
    return 1;
}

}  // namespace k3::tools

// Placeholder until the pack-trunk subcommand lands.
#include <cstdio>

#include "k3/tools.h"

namespace k3::tools {

int pack_trunk_main(int, char**) {
    std::fprintf(stderr, "k3serve: 'pack-trunk' is not built yet\n");
    return 1;
}

}  // namespace k3::tools

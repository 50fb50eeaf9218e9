// Placeholder until the detokenize subcommand lands.
#include <cstdio>

#include "k3/tools.h"

namespace k3::tools {

int detokenize_main(int, char**) {
    std::fprintf(stderr, "k3serve: 'detokenize' is not built yet\n");
    return 1;
}

}  // namespace k3::tools

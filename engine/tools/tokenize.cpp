// Placeholder until the tokenize subcommand lands.
#include <cstdio>

#include "k3/tools.h"

namespace k3::tools {

int tokenize_main(int, char**) {
    std::fprintf(stderr, "k3serve: 'tokenize' is not built yet\n");
    return 1;
}

}  // namespace k3::tools

// Placeholder until the make-model subcommand lands.
#include <cstdio>

#include "k3/tools.h"

namespace k3::tools {

int make_model_main(int, char**) {
    std::fprintf(stderr, "k3serve: 'make-model' is not built yet\n");
    return 1;
}

}  // namespace k3::tools

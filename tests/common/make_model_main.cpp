// k3-test-make-model OUT_DIR --preset NAME [--seed N] [--shards N] [--force]: `k3serve
// make-model` without the server, for the synthetic models the tests share
// (tests/common/model_cache.h), so that only the tests that run the daemon wait for k3serve.
#include "k3/cli.h"

int main(int argc, char** argv) { return k3::cli::make_model_main(argc, argv); }

// k3serve: one binary, many subcommands. This file only dispatches; every subcommand lives in
// its own file (engine/tools/*.cpp for the engine-level ones, server/serve.cpp for the daemon).
#include <cstdio>
#include <cstring>
#include <string_view>

#include "k3/cli.h"
#include "serve.h"

namespace {

struct Command {
    const char* name;
    int (*main)(int, char**);
    const char* summary;
};

const Command kCommands[] = {
    {"serve", k3::server::serve_main, "run the OpenAI-compatible daemon"},
    {"run", k3::cli::run_main, "generate from a prompt on the command line"},
    {"make-model", k3::cli::make_model_main, "write a synthetic Kimi K3 checkpoint (presets tiny ... k3-mini)"},
    {"verify", k3::cli::verify_main, "check a checkpoint completely before serving it"},
    {"inspect", k3::cli::inspect_main, "print a checkpoint's shape, bytes and memory needs"},
    {"tokenize", k3::cli::tokenize_main, "text on stdin -> token ids (JSON array)"},
    {"detokenize", k3::cli::detokenize_main, "token ids (JSON array) on stdin -> text"},
    {"pack-trunk", k3::cli::pack_trunk_main, "copy the dense trunk into one aligned file"},
    {"diskbench", k3::cli::diskbench_main, "measure read bandwidth the way the engine reads"},
    {"doctor", k3::cli::doctor_main, "can this machine run the model, and how fast?"},
    {"download", k3::cli::download_main, "fetch and verify a checkpoint from a Hugging Face repository"},
    {"embed-image", k3::cli::embed_image_main, "an image's projected rows (vision tower + projector) to a file"},
    {"plan", k3::cli::plan_main, "project s/token and prefill speed for a model at memory budgets"},
    {"netbench", k3::cli::netbench_main, "under mpirun: time expert parallelism's per-layer exchange between ranks"},
    {"rank", k3::cli::rank_main, "under mpirun: hold and compute a share of the routed experts for rank 0"},
};

void usage(FILE* out) {
    std::fprintf(out, "usage: k3serve <command> [options]   (k3serve <command> --help for more)\n\ncommands:\n");
    for (const auto& c : kCommands) std::fprintf(out, "  %-11s %s\n", c.name, c.summary);
    std::fprintf(out, "\nk3serve --version prints the version.\n");
}

}  // namespace

int main(int argc, char** argv) {
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    std::string_view cmd = argv[1];
    if (cmd == "--version" || cmd == "version") {
        std::printf("k3serve %s\n", K3_VERSION);
        return 0;
    }
    if (cmd == "--help" || cmd == "-h" || cmd == "help") {
        usage(stdout);
        return 0;
    }
    for (const auto& c : kCommands)
        if (cmd == c.name) return c.main(argc - 1, argv + 1);
    std::fprintf(stderr, "k3serve: unknown command '%s'\n\n", argv[1]);
    usage(stderr);
    return 2;
}

// k3serve rank: a rank other than 0 of expert parallelism (docs/operations.md "Several
// machines"), started by mpirun next to rank 0's `k3serve serve` or `run`:
//   mpirun -n 1 k3serve serve --model M ... : -n 2 k3serve rank M
#include <cstdio>
#include <string>

#include "cli/subcommand.h"
#include "k3/cli.h"
#include "k3/error.h"
#include "k3/expert_rank.h"

namespace k3::cli {

namespace {

const char* const kUsage =
    "usage: k3serve rank MODEL_DIR [options]   (under mpirun, as rank 1 or above)\n"
    "\n"
    "Expert parallelism: this process holds and computes a fixed share of every layer's routed\n"
    "experts for rank 0 (k3serve serve or k3serve run, which gives the job its answers). It reads\n"
    "only its share, from its own MODEL_DIR (the same checkpoint as rank 0's: checked at start), and\n"
    "ends when rank 0 ends the job (docs/operations.md 'Several machines').\n"
    "  --threads N          compute threads (default: physical cores)\n"
    "  --kernels NAME       force a kernel set: scalar, avx2, avx512, neon (default: best for this CPU)\n"
    "\n"
    "Memory (this machine's; default: its share resident):\n"
    "  --preset NAME        laptop, desktop, workstation, server, max or auto: the expert cache budget\n"
    "  --cache-gb X         expert cache budget (overrides the preset)\n"
    "\n"
    "Exit codes: 0 rank 0 ended the job, 1 runtime failure (rank 0 went away), 2 usage or another checkpoint.\n";

}  // namespace

int rank_main(int argc, char** argv) {
    return run_subcommand({"rank", kUsage}, argc, argv, [](ArgList& args) {
        EngineOptions options;
        while (args.next()) {
            if (args.is("--threads")) options.threads = int(args.integer());
            else if (args.is("--kernels")) options.kernels = args.value();
            else if (args.is("--preset")) options.memory.preset = args.value();
            else if (args.is("--cache-gb")) options.memory.cache_gb = args.number();
            else args.positional({&options.model_dir});
        }
        if (options.model_dir.empty()) throw Error(ErrorKind::Usage, "missing MODEL_DIR");
        serve_expert_rank(options, [](const std::string& line) { std::fprintf(stderr, "k3serve rank: %s\n", line.c_str()); });
        return 0;
    });
}

}  // namespace k3::cli

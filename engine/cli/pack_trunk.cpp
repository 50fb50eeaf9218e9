// k3serve pack-trunk MODEL_DIR OUT_DIR: copies every layer's trunk run byte for byte into
// OUT_DIR/trunk.bin (4096-aligned runs) and writes OUT_DIR/trunk.json (sizes, sources and a
// checksum of each run), so the trunk can sit on a faster disk. `k3serve run --trunk OUT_DIR`
// (and the daemon's --trunk) use it after checking it against the checkpoint.
#include <chrono>
#include <cstdio>
#include <string>

#include "weights/checkpoint.h"
#include "store/trunk_pack.h"
#include "k3/cli.h"
#include "k3/error.h"

namespace k3::cli {

namespace {

void usage(FILE* out) {
    std::fprintf(out,
                 "usage: k3serve pack-trunk MODEL_DIR OUT_DIR [--quiet]\n"
                 "  Copies each layer's trunk tensors (one contiguous run per layer) byte for byte into\n"
                 "  OUT_DIR/trunk.bin, each run 4096-aligned, and writes OUT_DIR/trunk.json with every\n"
                 "  run's size, source shard and offset, and checksum. Use it with `run --trunk OUT_DIR`.\n");
}

}  // namespace

int pack_trunk_main(int argc, char** argv) {
    std::string model_dir, out_dir;
    bool quiet = false;
    try {
        for (int i = 1; i < argc; ++i) {
            std::string a = argv[i];
            if (a == "--help" || a == "-h") {
                usage(stdout);
                return 0;
            } else if (a == "--quiet") {
                quiet = true;
            } else if (!a.empty() && a[0] == '-') {
                throw Error(ErrorKind::Usage, "unknown option " + a);
            } else if (model_dir.empty()) {
                model_dir = a;
            } else if (out_dir.empty()) {
                out_dir = a;
            } else {
                throw Error(ErrorKind::Usage, "unexpected argument " + a);
            }
        }
        if (model_dir.empty() || out_dir.empty()) throw Error(ErrorKind::Usage, "MODEL_DIR and OUT_DIR are required");
        auto t0 = std::chrono::steady_clock::now();
        Checkpoint ckpt = open_checkpoint(model_dir);
        io::TrunkPack pack = io::write_trunk_pack(ckpt, out_dir, !quiet);
        double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        int64_t bytes = 0;
        for (const auto& l : pack.layers) bytes += l.nbytes;
        std::printf("packed %zu layer runs, %.3f GB, into %s/trunk.bin in %.1f s (%.0f MB/s)\n", pack.layers.size(),
                    double(bytes) / 1e9, out_dir.c_str(), secs, secs > 0 ? double(bytes) / 1e6 / secs : 0.0);
        return 0;
    } catch (const Error& e) {
        std::fprintf(stderr, "k3serve pack-trunk: %s\n", e.what());
        if (e.kind() == ErrorKind::Usage) usage(stderr);
        return exit_code_for(e.kind());
    }
}

}  // namespace k3::cli

// k3serve pack-trunk MODEL_DIR OUT_DIR: copies every layer's trunk run byte for byte into
// OUT_DIR/trunk.bin (4096-aligned runs) and writes OUT_DIR/trunk.json (sizes, sources and a
// checksum of each run), so the trunk can sit on a faster disk. `k3serve run --trunk OUT_DIR`
// (and the daemon's --trunk) use it after checking it against the checkpoint. With --compress
// the runs are stored losslessly compressed (store/trunk_codec.h) and decoded as they are read.
#include <chrono>
#include <cstdio>
#include <string>

#include "weights/checkpoint.h"
#include "store/trunk_pack.h"
#include "k3/cli.h"
#include "cli/subcommand.h"
#include "k3/error.h"

namespace k3::cli {

namespace {

constexpr const char* kUsage =
    "usage: k3serve pack-trunk MODEL_DIR OUT_DIR [--compress] [--quiet]\n"
    "  Copies each layer's trunk tensors (one contiguous run per layer) byte for byte into\n"
    "  OUT_DIR/trunk.bin, each run 4096-aligned, and writes OUT_DIR/trunk.json with every\n"
    "  run's size, source shard and offset, and checksum. Use it with `run --trunk OUT_DIR`.\n"
    "  --compress  store each run losslessly compressed (bf16 high bytes as 4-bit codes,\n"
    "              about 0.75 of the bytes); the engine decodes it bit for bit as it reads\n";

}  // namespace

int pack_trunk_main(int argc, char** argv) {
    return run_subcommand({"pack-trunk", kUsage}, argc, argv, [](ArgList& args) {
        std::string model_dir, out_dir;
        bool quiet = false, compress = false;
        while (args.next()) {
            if (args.is("--quiet")) quiet = true;
            else if (args.is("--compress")) compress = true;
            else args.positional({&model_dir, &out_dir});
        }
        if (model_dir.empty() || out_dir.empty()) throw Error(ErrorKind::Usage, "MODEL_DIR and OUT_DIR are required");
        auto t0 = std::chrono::steady_clock::now();
        Checkpoint ckpt = open_checkpoint(model_dir);
        io::TrunkPack pack = io::write_trunk_pack(ckpt, out_dir, [quiet](const std::string& line) {
            if (!quiet) std::fprintf(stderr, "pack-trunk: %s\n", line.c_str());
        }, compress);
        double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        int64_t bytes = 0, stored = 0;
        for (const auto& l : pack.layers) bytes += l.nbytes, stored += l.stored_bytes();
        std::printf("packed %zu layer runs, %.3f GB, into %s/trunk.bin in %.1f s (%.0f MB/s)\n", pack.layers.size(),
                    double(bytes) / 1e9, out_dir.c_str(), secs, secs > 0 ? double(bytes) / 1e6 / secs : 0.0);
        if (compress)
            std::printf("compressed: %.3f GB stored, ratio %.3f; high-byte entropy %.2f bits per weight (an ideal "
                        "entropy coder of the high byte: ratio %.3f)\n",
                        double(stored) / 1e9, bytes > 0 ? double(stored) / double(bytes) : 0.0,
                        pack.high_byte_entropy_bits, (8.0 + pack.high_byte_entropy_bits) / 16.0);
        return 0;
    });
}

}  // namespace k3::cli

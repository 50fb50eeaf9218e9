// The packed trunk (`k3serve pack-trunk MODEL_DIR OUT_DIR`): every layer's trunk run copied byte
// for byte into one file, trunk.bin, each run starting on a 4096-byte boundary, so the trunk can
// live on a faster disk than the experts. trunk.json describes it:
//   { "format": "k3serve-trunk-pack", "version": 1, "align": 4096, "n_layers": N,
//     "layers": [ { "layer": L, "file_offset": O, "nbytes": B, "shard": "model-00001-of-00004.safetensors",
//                   "shard_offset": S, "checksum": "<16 hex digits>" }, ... ] }
// The engine uses a pack only after checking it against the checkpoint: the same layer count,
// every run's size and source, trunk.bin large enough, and the first and last bytes of every
// run equal in both files (a cheap check at load); each run's full checksum is verified the
// first time that layer is read from trunk.bin.
//
// `pack-trunk --compress` writes version 2: "codec": "bf16-nibble", "block_bytes": B, and per
// layer "blocks": [encoded sizes]. The run is cut into blocks of B raw bytes (the last one
// shorter), each encoded losslessly (store/trunk_codec.h) and starting on a 4096-byte boundary
// of trunk.bin; "nbytes" and "checksum" stay those of the raw run, so the checksum also checks
// the decoder. The first and last blocks are decoded for the cheap check at load.
#pragma once
#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "weights/checkpoint.h"

namespace k3::io {

inline constexpr int64_t kTrunkPackAlign = 4096;
inline constexpr const char* kTrunkPackFile = "trunk.bin";
inline constexpr const char* kTrunkPackManifest = "trunk.json";

struct PackedLayer {
    int layer = 0;
    int64_t file_offset = 0;   // in trunk.bin
    int64_t nbytes = 0;
    std::string shard;         // source shard's file name
    int64_t shard_offset = 0;
    uint64_t checksum = 0;
    std::vector<int64_t> blocks;   // compressed pack: encoded size of each block (empty otherwise)

    // Where block k starts in trunk.bin (compressed pack).
    int64_t block_offset(size_t k) const;
    // Bytes of trunk.bin the layer takes (its blocks, aligned), or nbytes uncompressed.
    int64_t stored_bytes() const;
};

struct TrunkPack {
    std::filesystem::path dir;
    std::vector<PackedLayer> layers;
    bool compressed = false;
    int64_t block_bytes = 0;       // raw bytes per block (compressed pack)
    // Filled by write_trunk_pack for its report.
    double high_byte_entropy_bits = 0;  // over the whole trunk, bits per bf16 word
};

// A fast 64-bit checksum of a run (8-byte words in four lanes, then the tail): detects any
// changed, missing or reordered bytes with overwhelming probability; not cryptographic.
uint64_t run_checksum(const uint8_t* data, size_t n);

// Writes OUT_DIR/trunk.bin and OUT_DIR/trunk.json from the checkpoint, losslessly compressed
// when `compress` (store/trunk_codec.h); `progress` (may be empty) receives one line per layer,
// as Engine::load and make-model report theirs. Throws k3::Error(Io) on any read/write
// failure, naming the file.
TrunkPack write_trunk_pack(const Checkpoint& ckpt, const std::filesystem::path& out_dir,
                           const std::function<void(const std::string&)>& progress = {}, bool compress = false);

// Reads DIR/trunk.json and checks it (and trunk.bin) against the checkpoint as described above.
// Throws k3::Error(Checkpoint) listing every mismatch.
TrunkPack open_trunk_pack(const std::filesystem::path& dir, const Checkpoint& ckpt);

}  // namespace k3::io

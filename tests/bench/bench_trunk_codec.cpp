// Decode throughput of the trunk codec (store/trunk_codec.h) on one core, against memcpy of the
// same bytes measured in the same run, and the ratio the codec reaches.
//
//   bench_trunk_codec [PACK_DIR]   (a `pack-trunk --compress` directory; default: 64 MB of
//                                   make-model-like bf16, N(0, 1/sqrt(2048)) rounded to bf16)
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "store/trunk_codec.h"

using namespace k3::io;

namespace {

struct Block {
    std::vector<uint8_t> enc;
    size_t raw = 0;
};

double seconds_since(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

std::vector<Block> synthetic_blocks(size_t* raw_total) {
    std::mt19937 rng(1);
    std::normal_distribution<float> dist(0.0f, 1.0f / std::sqrt(2048.0f));
    std::vector<Block> blocks;
    *raw_total = 0;
    std::vector<uint8_t> raw(static_cast<size_t>(kCodecBlockBytes));
    for (int b = 0; b < 32; ++b) {
        for (size_t i = 0; i < raw.size() / 2; ++i) {
            float v = dist(rng);
            uint32_t bits;
            std::memcpy(&bits, &v, 4);
            const uint16_t h = uint16_t((bits + 0x7fff + ((bits >> 16) & 1)) >> 16);
            std::memcpy(&raw[2 * i], &h, 2);
        }
        Block blk;
        blk.raw = raw.size();
        encode_block(raw.data(), raw.size(), blk.enc);
        *raw_total += blk.raw;
        blocks.push_back(std::move(blk));
    }
    return blocks;
}

// The first layers' blocks of a compressed pack, up to 256 MB raw.
std::vector<Block> pack_blocks(const std::string& dir, size_t* raw_total) {
    std::ifstream in(dir + "/trunk.json");
    nlohmann::json j = nlohmann::json::parse(in);
    const int64_t B = j.at("block_bytes").get<int64_t>();
    std::ifstream bin(dir + "/trunk.bin", std::ios::binary);
    std::vector<Block> blocks;
    *raw_total = 0;
    for (const auto& l : j.at("layers")) {
        int64_t at = l.at("file_offset").get<int64_t>(), nbytes = l.at("nbytes").get<int64_t>(), k = 0;
        for (int64_t enc : l.at("blocks").get<std::vector<int64_t>>()) {
            Block blk;
            blk.raw = size_t(std::min(B, nbytes - k * B));
            blk.enc.resize(size_t(enc));
            bin.seekg(at);
            bin.read(reinterpret_cast<char*>(blk.enc.data()), enc);
            at += (enc + 4095) / 4096 * 4096;
            ++k;
            *raw_total += blk.raw;
            blocks.push_back(std::move(blk));
        }
        if (*raw_total > (size_t(256) << 20)) break;
    }
    return blocks;
}

}  // namespace

int main(int argc, char** argv) {
    size_t raw_total = 0;
    std::vector<Block> blocks = argc > 1 ? pack_blocks(argv[1], &raw_total) : synthetic_blocks(&raw_total);
    size_t enc_total = 0;
    for (const auto& b : blocks) enc_total += b.enc.size();
    std::vector<uint8_t> out(static_cast<size_t>(kCodecBlockBytes));
    // Decode every block a few times (one core), then memcpy the same raw bytes as the yardstick.
    double decode_s = 0, copy_s = 0;
    int reps = 0;
    bool ok = true;
    std::vector<uint8_t> src(static_cast<size_t>(kCodecBlockBytes), 1);
    while (decode_s < 1.0) {
        auto t0 = std::chrono::steady_clock::now();
        for (const auto& b : blocks) ok &= decode_block(b.enc.data(), b.enc.size(), out.data(), b.raw);
        decode_s += seconds_since(t0);
        t0 = std::chrono::steady_clock::now();
        for (const auto& b : blocks) std::memcpy(out.data(), src.data(), b.raw);
        copy_s += seconds_since(t0);
        ++reps;
    }
    const double raw_gb = double(raw_total) * reps / 1e9;
    std::printf("trunk codec (%s kernels), %s: %.1f MB raw in %zu blocks, ratio %.3f\n", k3::select_kernels().name,
                argc > 1 ? argv[1] : "synthetic N(0, 1/sqrt(2048)) bf16", double(raw_total) / 1e6, blocks.size(),
                double(enc_total) / double(raw_total));
    std::printf("  decode %.2f GB/s of output per core; memcpy of the same bytes %.2f GB/s; decode/memcpy %.2f\n",
                raw_gb / decode_s, raw_gb / copy_s, copy_s / decode_s);
    if (!ok) std::printf("  DECODE FAILED\n");
    return ok ? 0 : 1;
}

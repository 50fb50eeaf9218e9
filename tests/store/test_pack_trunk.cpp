// `k3serve pack-trunk`: trunk.bin holds every layer's run byte for byte at 4096-aligned offsets,
// trunk.json describes it, open_trunk_pack accepts it for its checkpoint and refuses a stale or
// mismatched one, naming what is wrong.
#include <doctest/doctest.h>

#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>

#include "common/process.h"
#include "common/scratch.h"
#include "common/model_cache.h"
#include "weights/checkpoint.h"
#include "io/file.h"
#include "store/trunk_pack.h"
#include "k3/error.h"

using namespace k3;

namespace {

std::string bin() { return k3::test::k3serve_bin(); }
int sh(const std::string& cmd) { return k3::test::run_command(cmd).exit_code; }

std::vector<uint8_t> read_bytes(const std::filesystem::path& p, int64_t off, int64_t n) {
    std::vector<uint8_t> b(static_cast<size_t>(n));
    std::ifstream in(p, std::ios::binary);
    in.seekg(off);
    in.read(reinterpret_cast<char*>(b.data()), n);
    REQUIRE(in.gcount() == n);
    return b;
}

}  // namespace

TEST_CASE("pack-trunk copies every layer run byte for byte, aligned, with a manifest that checks") {
    // pack-trunk reads the model only, so the shared cached one will do.
    const std::filesystem::path model = k3::test::cached_model("tiny-wide");
    auto pack = k3::test::scratch_dir("pack") / "out";
    REQUIRE(sh(bin() + " pack-trunk " + model.string() + " " + pack.string()) == 0);

    Checkpoint ckpt = open_checkpoint(model);
    io::TrunkPack p = io::open_trunk_pack(pack, ckpt);
    REQUIRE(p.layers.size() == ckpt.layer_runs.size());
    for (size_t il = 0; il < p.layers.size(); ++il) {
        CAPTURE(il);
        const auto& pl = p.layers[il];
        const ByteRun& run = ckpt.layer_runs[il];
        CHECK(pl.file_offset % 4096 == 0);
        CHECK(pl.nbytes == run.nbytes);
        auto packed = read_bytes(pack / "trunk.bin", pl.file_offset, pl.nbytes);
        auto source = read_bytes(ckpt.directory.shards()[size_t(run.shard)].path, run.offset, run.nbytes);
        CHECK(packed == source);
        CHECK(io::run_checksum(packed.data(), packed.size()) == pl.checksum);
    }

    SUBCASE("a run with a changed byte in the middle passes the load check but fails its checksum") {
        // The load check samples the ends; the full checksum is the engine's first-read check.
        const auto& pl = p.layers[2];
        auto bytes = read_bytes(pack / "trunk.bin", pl.file_offset, pl.nbytes);
        bytes[bytes.size() / 2] ^= 1;
        CHECK(io::run_checksum(bytes.data(), bytes.size()) != pl.checksum);
    }
    SUBCASE("a manifest for another checkpoint is refused, naming the layer") {
        Checkpoint ck2 = open_checkpoint(k3::test::cached_model("tiny"));
        CHECK_THROWS_WITH_AS(io::open_trunk_pack(pack, ck2), doctest::Contains("does not match the checkpoint"), Error);
    }
    SUBCASE("a truncated trunk.bin is refused") {
        std::filesystem::resize_file(pack / "trunk.bin", 4096);
        CHECK_THROWS_WITH_AS(io::open_trunk_pack(pack, ckpt), doctest::Contains("ends past the end"), Error);
    }
    SUBCASE("a malformed manifest is refused, naming the file") {
        std::ofstream(pack / "trunk.json") << "{\"format\": \"k3serve-trunk-pack\", \"version\": 1}";
        CHECK_THROWS_WITH_AS(io::open_trunk_pack(pack, ckpt), doctest::Contains("trunk.json"), Error);
    }
}

TEST_CASE("the checksum does not depend on how the run is chunked") {
    std::vector<uint8_t> data(100003);
    for (size_t i = 0; i < data.size(); ++i) data[i] = uint8_t(i * 7 + (i >> 9));
    uint64_t whole = io::run_checksum(data.data(), data.size());
    CHECK(whole != io::run_checksum(data.data(), data.size() - 1));
    std::swap(data[10], data[50000]);
    CHECK(whole != io::run_checksum(data.data(), data.size()));
}

TEST_CASE("pack-trunk usage") {
    CHECK(sh(bin() + " pack-trunk --help") == 0);
    CHECK(sh(bin() + " pack-trunk") == 2);
    CHECK(sh(bin() + " pack-trunk /nonexistent/model " + (k3::test::scratch_dir("pack-x") / "out").string()) == 2);
}

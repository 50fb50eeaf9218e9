// `k3serve verify` and `k3serve inspect` as a user runs them ($K3SERVE_BIN): exit 0 on a sound
// checkpoint with a summary of the layout facts; exit 2 with a message naming the file and
// tensor on a truncated shard, a flipped header byte or a deleted tensor; inspect's figures
// for the real Kimi K3 config (docs/model.md "Sizes", "MXFP4").
#include <doctest/doctest.h>

#include <algorithm>
#include <fstream>

#include "common/process.h"
#include "common/scratch.h"
#include "weights/tiny_checkpoint.h"

using namespace k3;
using namespace k3::test;

namespace {

std::string read_all(const std::filesystem::path& p) {
    std::ifstream in(p, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
}

void write_all(const std::filesystem::path& p, const std::string& s) { ShardBuilder::write_file(p, s); }

void check_contains(const ProcessResult& r, std::initializer_list<std::string> needles) {
    for (const auto& n : needles) CHECK_MESSAGE(r.output.find(n) != std::string::npos, "want '", n, "' in:\n", r.output);
}

ProcessResult verify(const std::filesystem::path& dir) { return run_command(k3serve_bin() + " verify " + quoted(dir)); }

std::filesystem::path hand_built(const std::string& name) {
    auto dir = scratch_dir(name);
    auto cfg = parse_config(tiny_config().dump(), "tiny");
    auto entries = release_entries(cfg);
    entries.push_back({"vision_tower.patch_embed.weight", "BF16", {4, 4}, 1});
    write_checkpoint(dir, entries);
    return dir;
}

}  // namespace

TEST_CASE("verify and inspect: --help exits 0, bad usage exits 2") {
    for (const char* cmd : {"verify", "inspect"}) {
        auto r = run_command(k3serve_bin() + " " + cmd + " --help");
        CHECK(r.exit_code == 0);
        check_contains(r, {std::string("usage: k3serve ") + cmd});
        CHECK(run_command(k3serve_bin() + " " + cmd).exit_code == 2);
        CHECK(run_command(k3serve_bin() + " " + cmd + " a b").exit_code == 2);
        CHECK(run_command(k3serve_bin() + " " + cmd + " --bogus x").exit_code == 2);
    }
    auto r = verify("/nonexistent-model-dir");
    CHECK(r.exit_code == 2);
    check_contains(r, {"/nonexistent-model-dir"});
}

TEST_CASE("verify passes a sound hand-built checkpoint and prints the layout facts") {
    auto dir = hand_built("verify-ok");
    auto r = verify(dir);
    CHECK(r.exit_code == 0);
    check_contains(r, {"hidden=128 layers=13 vocab=256 | 4 MLA + 9 KDA | experts 8 top2 shared2 | latent=64",
                       "2 files", "1 not in the tensor list, ignored (vision_tower.* 1)", "13 trunk runs, each contiguous in one shard",
                       "12 MoE layers x 8 = 96 routed experts, each six MXFP4 tensors back to back, 6,528 B each",
                       "288 packed/scale pairs consistent", "OK: the checkpoint is sound"});
}

TEST_CASE("verify refuses a hand-built checkpoint with a truncated shard, flipped header byte or deleted tensor") {
    SUBCASE("truncated shard") {
        auto dir = hand_built("verify-trunc");
        auto shard = dir / "model-00002-of-00002.safetensors";
        std::filesystem::resize_file(shard, std::filesystem::file_size(shard) - 100);
        auto r = verify(dir);
        CHECK(r.exit_code == 2);
        check_contains(r, {"model-00002-of-00002.safetensors: tensor ", "truncated", "FAILED"});
    }
    SUBCASE("flipped header byte: dtype") {
        auto dir = hand_built("verify-flip");
        auto shard = dir / "model-00001-of-00002.safetensors";
        std::string bytes = read_all(shard);
        size_t at = bytes.find("\"F32\"");
        REQUIRE(at != std::string::npos);
        bytes[at + 1] ^= 0x01;  // "F32" -> "G32"
        write_all(shard, bytes);
        auto r = verify(dir);
        CHECK(r.exit_code == 2);
        check_contains(r, {"model-00001-of-00002.safetensors: tensor language_model.model.layers.", "\"G32\""});
    }
    SUBCASE("deleted tensor") {
        auto dir = scratch_dir("verify-deleted");
        auto entries = release_entries(parse_config(tiny_config().dump(), "tiny"));
        entries.erase(entries.begin() + 40);
        write_checkpoint(dir, entries);
        auto r = verify(dir);
        CHECK(r.exit_code == 2);
        check_contains(r, {"missing tensor language_model.model.layers.1."});
    }
}

TEST_CASE("inspect on the real Kimi K3 config prints the model's figures") {
    const char* src = std::getenv("K3_SOURCE_DIR");
    REQUIRE(src);
    auto r = run_command(k3serve_bin() + " inspect " +
                         quoted(std::string(src) + "/tests/fixtures/config/kimi_k3_config.json"));
    CHECK(r.exit_code == 0);
    check_contains(r, {"hidden=7168 layers=93 vocab=163840 | 24 MLA + 69 KDA | experts 896 top16 shared2 | latent=3584",
                       "MLA at zero-based 3,7,11,15,19,23,27,31,35,39,43,47,51,55,59,63,67,71,75,79,83,87,91,92",
                       "497,052 required = 2,455 trunk + 494,592 routed-expert + 5 model-level",
                       "trunk, one KDA + dense MLP layer (x1, 23 tensors)", "2.34 GB",
                       "trunk, one KDA + MoE layer (x68, 28 tensors)", "1.27 GB",
                       "trunk, one MLA + MoE layer (x24, 22 tensors)", "844.34 MB",
                       "trunk, all 93 layers", "108.81 GB", "17,547,264 B", "1.45 TB",
                       "136.99 GB touched", "= 25.83 GB", "6.73 MB", "2.37 MB expanded",
                       "streaming floor (nothing pinned)", "trunk resident, experts streamed",
                       // docs/model.md "The vision config and tensors": 401,214,464 + 46,144,512 bf16 parameters
                       "vision tower + projector (168 tensors, 27 blocks)", "894.72 MB"});
}

TEST_CASE("inspect on a checkpoint directory validates it first") {
    auto dir = hand_built("inspect-ok");
    auto r = run_command(k3serve_bin() + " inspect " + quoted(dir));
    CHECK(r.exit_code == 0);
    check_contains(r, {"2 shards, verified", "6.53 kB  (6,528 B, six MXFP4 tensors)"});
    std::filesystem::resize_file(dir / "model-00001-of-00002.safetensors", 100);
    r = run_command(k3serve_bin() + " inspect " + quoted(dir));
    CHECK(r.exit_code == 2);
    check_contains(r, {"model-00001-of-00002.safetensors"});
}

// ---- on checkpoints written by `k3serve make-model` ----

namespace {

// A fresh make-model checkpoint of `preset` under $K3_TEST_TMP.
std::filesystem::path made(const std::string& preset, const std::string& name) {
    auto dir = scratch_dir(name);
    std::filesystem::remove_all(dir);  // make-model creates it
    auto r = run_command(k3serve_bin() + " make-model " + quoted(dir) + " --preset " + preset);
    REQUIRE_MESSAGE(r.exit_code == 0, r.output);
    return dir;
}

// Rewrites `shard` with `tensor` dropped from its header (its bytes stay, as a gap), so the
// file is a well-formed safetensors file that simply lacks the tensor.
void delete_tensor(const std::filesystem::path& shard, const std::string& tensor) {
    std::string bytes = read_all(shard);
    uint64_t n = 0;
    for (int i = 7; i >= 0; --i) n = (n << 8) | uint8_t(bytes[size_t(i)]);
    auto header = nlohmann::json::parse(bytes.substr(8, n));
    REQUIRE(header.erase(tensor) == 1);
    std::string text = header.dump();
    std::string out(8, '\0');
    for (int i = 0; i < 8; ++i) out[size_t(i)] = char((uint64_t(text.size()) >> (8 * i)) & 0xff);
    write_all(shard, out + text + bytes.substr(8 + n));
}

std::string first_shard(const std::filesystem::path& dir) {
    std::vector<std::string> names;
    for (const auto& e : std::filesystem::directory_iterator(dir))
        if (e.path().extension() == ".safetensors") names.push_back(e.path().filename().string());
    std::sort(names.begin(), names.end());
    REQUIRE(!names.empty());
    return names.front();
}

}  // namespace

TEST_CASE("verify passes make-model's tiny and tiny-wide checkpoints") {
    for (const std::string preset : {"tiny", "tiny-wide"}) {
        CAPTURE(preset);
        auto dir = made(preset, "mm-ok-" + preset);
        auto r = verify(dir);
        CHECK(r.exit_code == 0);
        check_contains(r, {"model.safetensors.index.json agrees with them", "each contiguous in one shard",
                           "each six MXFP4 tensors back to back", "OK: the checkpoint is sound"});
        // tiny-wide is the three-shard shape with two dense layers.
        if (preset == "tiny-wide") check_contains(r, {"3 files", "8 MoE layers"});
        // Every preset writes a vision tower (18 tensors for 2 blocks, 24 for 3).
        check_contains(r, {preset == "tiny" ? "vision:   18 tensors (tower 2 blocks of width 64, projector to 128)"
                                            : "vision:   24 tensors (tower 3 blocks of width 96, projector to 160)"});
    }
}

TEST_CASE("verify refuses make-model checkpoints that were damaged") {
    for (const std::string preset : {"tiny", "tiny-wide"}) {
        CAPTURE(preset);
        const auto pristine = made(preset, "mm-pristine-" + preset);
        const std::string shard = first_shard(pristine);
        auto copy = [&](const std::string& what) {
            auto dir = scratch_dir(std::string("mm-") + what + "-" + preset);
            std::filesystem::remove_all(dir);
            std::filesystem::copy(pristine, dir);
            return dir;
        };

        {  // a truncated shard copy names the file and the cut tensor
            auto dir = copy("trunc");
            std::filesystem::resize_file(dir / shard, std::filesystem::file_size(dir / shard) / 2);
            auto r = verify(dir);
            CHECK(r.exit_code == 2);
            check_contains(r, {shard + ": tensor language_model.", "but the file is only", "truncated download"});
        }
        {  // a flipped byte in a header names the file and the tensor
            auto dir = copy("flip");
            std::string bytes = read_all(dir / shard);
            size_t at = bytes.find("\"BF16\"");
            REQUIRE(at != std::string::npos);
            bytes[at + 1] ^= 0x01;  // BF16 -> CF16
            write_all(dir / shard, bytes);
            auto r = verify(dir);
            CHECK(r.exit_code == 2);
            check_contains(r, {shard + ": tensor language_model.", "dtype \"CF16\" is not one of"});
        }
        {  // a flipped bit in the header length names the file
            auto dir = copy("flip-length");
            std::string bytes = read_all(dir / shard);
            bytes[0] ^= 0x04;
            write_all(dir / shard, bytes);
            auto r = verify(dir);
            CHECK(r.exit_code == 2);
            check_contains(r, {shard + ": header"});
        }
        {  // a deleted tensor is named, in the shard and in the index
            auto dir = copy("deleted");
            const std::string victim = layer_prefix(1) + "post_attention_layernorm.weight";
            std::string holder;
            for (const auto& e : std::filesystem::directory_iterator(dir))
                if (e.path().extension() == ".safetensors" && read_all(e.path()).find(victim) != std::string::npos)
                    holder = e.path().filename().string();
            REQUIRE(!holder.empty());
            delete_tensor(dir / holder, victim);
            auto r = verify(dir);
            CHECK(r.exit_code == 2);
            check_contains(r, {"tensor " + victim + " is listed in " + holder + " but no shard holds it"});
            // Without the index, the tensor list itself catches it.
            std::filesystem::remove(dir / "model.safetensors.index.json");
            r = verify(dir);
            CHECK(r.exit_code == 2);
            check_contains(r, {"missing tensor " + victim + " (expected BF16 [1"});
        }
    }
}

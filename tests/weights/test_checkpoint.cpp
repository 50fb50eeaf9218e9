// open_checkpoint() on hand-built checkpoints of the tiny test shape (docs/model.md
// "Configuration") (written tensor by tensor from the one tensor list, zero bytes): the layout
// facts come out right, and each problem (missing tensor, wrong shape or dtype, inconsistent MXFP4
// pair, a layer's trunk not contiguous or split across shards, an expert not back to back) is
// refused naming the tensor.
#include <doctest/doctest.h>

#include <algorithm>
#include <functional>

#include "weights/checkpoint.h"
#include "weights/safetensors_builder.h"
#include "weights/tiny_checkpoint.h"
#include "k3/error.h"

using namespace k3;
using k3::test::ShardBuilder;
using k3::test::Entry;
using k3::test::release_entries;
using k3::test::tiny_config;
using k3::test::write_checkpoint;
using nlohmann::json;

namespace {

ModelConfig tiny_cfg() { return parse_config(tiny_config().dump(), "tiny"); }

std::filesystem::path make_dir(const std::string& name, const std::function<void(std::vector<Entry>&)>& edit = {}) {
    auto dir = k3::test::scratch_dir(name);
    auto entries = release_entries(tiny_cfg());
    if (edit) edit(entries);
    write_checkpoint(dir, entries);
    return dir;
}

size_t index_of(const std::vector<Entry>& v, const std::string& name) {
    auto it = std::find_if(v.begin(), v.end(), [&](const Entry& e) { return e.name == name; });
    REQUIRE_MESSAGE(it != v.end(), name);
    return size_t(it - v.begin());
}

void expect_refusal(const std::filesystem::path& dir, std::initializer_list<std::string> needles) {
    try {
        open_checkpoint(dir);
        FAIL("accepted a checkpoint that must be refused");
    } catch (const Error& e) {
        CHECK(exit_code_for(e.kind()) == 2);
        const std::string msg = e.what();
        for (const auto& n : needles) CHECK_MESSAGE(msg.find(n) != std::string::npos, "want '", n, "' in: ", msg);
    }
}

}  // namespace

TEST_CASE("a sound checkpoint opens with one run per layer and per expert") {
    auto dir = make_dir("ckpt-ok", [](std::vector<Entry>& v) {
        // Vision tensors are not ours and are ignored.
        v.push_back({"vision_tower.encoder.blocks.0.attn.qkv.weight", "BF16", {12, 4}, 1});
        v.push_back({"mm_projector.proj.0.weight", "F32", {3}, 0});
    });
    Checkpoint ck = open_checkpoint(dir);
    const ModelConfig& c = ck.config;
    CHECK(c.num_hidden_layers == 13);
    REQUIRE(ck.layer_runs.size() == 13);
    REQUIRE(ck.expert_runs.size() == 13 * 8);
    const int64_t eb = expert_bytes(c);
    for (int il = 0; il < 13; ++il) {
        const ByteRun& run = ck.layer_runs[size_t(il)];
        CHECK(run.shard == (il < 7 ? 0 : 1));
        int64_t trunk = 0;
        for (const auto& t : layer_trunk_tensors(c, il)) trunk += t.nbytes();
        CHECK(run.nbytes == trunk);
        // The layer's first tensor starts the run; every trunk tensor lies inside it.
        CHECK(ck.offset_in_layer(layer_prefix(il) + "input_layernorm.weight", il) == 0);
        for (const auto& t : layer_trunk_tensors(c, il)) {
            int64_t off = ck.offset_in_layer(t.name, il);
            CHECK(off >= 0);
            CHECK(off + t.nbytes() <= run.nbytes);
        }
        if (c.is_dense(il)) {
            CHECK(ck.expert(il, 0).shard == -1);
            continue;
        }
        for (int ie = 0; ie < 8; ++ie) {
            const ExpertRun& er = ck.expert(il, ie);
            CHECK(er.shard == run.shard);
            CHECK(er.nbytes == eb);
            // In the release order the experts follow the trunk, back to back.
            CHECK(er.offset == run.offset + run.nbytes + ie * eb);
            auto parts = expert_tensors(c, il, ie);
            int64_t expect = 0;
            for (int k = 0; k < kExpertParts; ++k) {
                CHECK(er.part_offset[size_t(k)] == expect);
                CHECK(ck.directory.find(parts[size_t(k)].name)->offset == er.offset + expect);
                expect += parts[size_t(k)].nbytes();
            }
        }
    }
    // w1 packed 64x32, w1 scale 64x2, w2 packed 64x32, ...
    CHECK(ck.expert(1, 0).part_offset[kW1Scale] == 64 * 32);
    CHECK(ck.expert(1, 0).part_offset[kW2Packed] == 64 * 32 + 64 * 2);
    CHECK_THROWS_AS(ck.offset_in_layer(layer_prefix(2) + "input_layernorm.weight", 1), Error);
    CHECK_THROWS_AS(ck.offset_in_layer("no.such.tensor", 1), Error);
}

TEST_CASE("expert runs record part offsets whatever order the six tensors are stored in") {
    auto dir = make_dir("ckpt-expert-order", [](std::vector<Entry>& v) {
        // Store layer 2 expert 3's w3 pair first.
        const std::string p = expert_prefix(2, 3);
        size_t first = index_of(v, p + "w1.weight_packed");
        size_t w3p = index_of(v, p + "w3.weight_packed");
        std::rotate(v.begin() + long(first), v.begin() + long(w3p), v.begin() + long(w3p) + 2);
    });
    Checkpoint ck = open_checkpoint(dir);
    const ExpertRun& er = ck.expert(2, 3);
    const int64_t w3_bytes = 64 * 32 + 64 * 2;
    CHECK(er.part_offset[kW3Packed] == 0);
    CHECK(er.part_offset[kW3Scale] == 64 * 32);
    CHECK(er.part_offset[kW1Packed] == w3_bytes);
    CHECK(er.nbytes == expert_bytes(ck.config));
}

TEST_CASE("refused: missing tensors, all listed with a count") {
    auto dir = make_dir("ckpt-missing", [](std::vector<Entry>& v) {
        v.erase(v.begin() + long(index_of(v, layer_prefix(5) + "self_attn.A_log")));
        v.erase(v.begin() + long(index_of(v, expert_prefix(7, 6) + "w2.weight_scale")));
        v.erase(v.begin() + long(index_of(v, kLmHeadName)));
    });
    expect_refusal(dir, {"3 required tensors missing", "missing tensor language_model.model.layers.5.self_attn.A_log (expected F32 [16])",
                         "missing tensor language_model.model.layers.7.block_sparse_moe.experts.6.w2.weight_scale",
                         "missing tensor language_model.lm_head.weight (expected BF16 [256, 128])"});
}

TEST_CASE("refused: wrong dtype or shape, naming file, tensor, expected vs actual") {
    auto dir = make_dir("ckpt-shape", [](std::vector<Entry>& v) {
        v[index_of(v, layer_prefix(1) + "self_attn.dt_bias")].dtype = "BF16";
        v[index_of(v, layer_prefix(3) + "self_attn.q_b_proj.weight")].shape = {4 * 24, 64};  // 128-style head width
    });
    expect_refusal(dir, {"model-00001-of-00002.safetensors: tensor language_model.model.layers.1.self_attn.dt_bias is BF16 [64], expected F32 [64]",
                         "layers.3.self_attn.q_b_proj.weight is BF16 [96, 64], expected BF16 [128, 64]"});
}

TEST_CASE("refused: an MXFP4 packed/scale pair that disagrees") {
    auto dir = make_dir("ckpt-mxfp4", [](std::vector<Entry>& v) {
        v[index_of(v, expert_prefix(4, 2) + "w1.weight_scale")].shape = {64, 4};  // group 16
    });
    expect_refusal(dir, {"MXFP4 pair language_model.model.layers.4.block_sparse_moe.experts.2.w1.weight_packed [64, 32]",
                         "scales cover 128"});
}

TEST_CASE("refused: a layer's trunk tensors not contiguous") {
    auto dir = make_dir("ckpt-gap", [](std::vector<Entry>& v) {
        // An unknown tensor between two of layer 2's trunk tensors.
        size_t at = index_of(v, layer_prefix(2) + "self_attn.q_proj.weight");
        v.insert(v.begin() + long(at), Entry{"language_model.model.layers.2.extra.weight", "BF16", {8}, 0});
    });
    expect_refusal(dir, {"layer 2 trunk is not contiguous in model-00001-of-00002.safetensors",
                         "layers.2.self_attn.q_proj.weight, starts at byte"});
}

TEST_CASE("refused: a layer's trunk split across shards") {
    auto dir = make_dir("ckpt-split", [](std::vector<Entry>& v) {
        v[index_of(v, layer_prefix(6) + "block_sparse_moe.shared_experts.down_proj.weight")].shard = 1;
    });
    expect_refusal(dir, {"layer 6 trunk is split across shards",
                         "layers.6.block_sparse_moe.shared_experts.down_proj.weight is in model-00002-of-00002.safetensors"});
}

TEST_CASE("refused: an expert's six tensors not back to back") {
    auto dir = make_dir("ckpt-expert-gap", [](std::vector<Entry>& v) {
        // Move layer 9 expert 1's w2 scales after expert 2.
        size_t from = index_of(v, expert_prefix(9, 1) + "w2.weight_scale");
        Entry e = v[from];
        v.erase(v.begin() + long(from));
        v.insert(v.begin() + long(index_of(v, expert_prefix(9, 2) + "w3.weight_scale")) + 1, e);
    });
    expect_refusal(dir, {"layer 9 expert 1 (six MXFP4 tensors) is not contiguous in model-00002-of-00002.safetensors"});
}

TEST_CASE("config problems surface as config errors") {
    auto dir = make_dir("ckpt-config");
    json c = tiny_config();
    c["num_experts_per_token"] = 9;
    ShardBuilder::write_file(dir / "config.json", c.dump());
    try {
        open_checkpoint(dir);
        FAIL("accepted");
    } catch (const Error& e) {
        CHECK(e.kind() == ErrorKind::Config);
        CHECK(std::string(e.what()).find("config.json") != std::string::npos);
    }
}

// make-model output read back through the real loader (config reader, tensor directory,
// open_checkpoint) and `k3serve verify`: every preset loads to its exact shape and byte runs;
// verify passes on each, and fails with exit 2 on a truncated shard or a corrupted header.
#include <doctest/doctest.h>

#include "common/scratch.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "weights/checkpoint.h"
#include "weights/config.h"
#include "synthetic/model_presets.h"
#include "synthetic/checkpoint.h"

using namespace k3;
namespace fs = std::filesystem;

namespace {


int run_k3serve(const std::string& args) {
    const char* bin = std::getenv("K3SERVE_BIN");
    REQUIRE_MESSAGE(bin != nullptr, "K3SERVE_BIN not set");
    const int status = std::system((std::string(bin) + " " + args + " >/dev/null 2>&1").c_str());
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

fs::path make(const std::string& preset_name, const std::string& dir_name) {
    const ModelPreset* p = find_preset(preset_name);
    REQUIRE(p);
    const fs::path dir = k3::test::scratch_path(dir_name);
    write_synthetic_model(p->config, dir, 5, p->default_shards, false);
    return dir;
}

}  // namespace

TEST_CASE("every small preset loads through open_checkpoint to its exact shape") {
    for (const char* name : {"tiny", "tiny-wide", "demo"}) {
        INFO(name);
        const ModelPreset* p = find_preset(name);
        const fs::path dir = make(name, std::string("load_") + name);
        const Checkpoint ck = open_checkpoint(dir);
        const ModelConfig& want = p->config;
        const ModelConfig& got = ck.config;
        CHECK(got.hidden_size == want.hidden_size);
        CHECK(got.num_hidden_layers == want.num_hidden_layers);
        CHECK(got.vocab_size == want.vocab_size);
        CHECK(got.first_k_dense_replace == want.first_k_dense_replace);
        CHECK(got.kda_num_heads == want.kda_num_heads);
        CHECK(got.kda_head_dim == want.kda_head_dim);
        CHECK(got.short_conv_kernel_size == want.short_conv_kernel_size);
        CHECK(got.num_experts == want.num_experts);
        CHECK(got.num_experts_per_token == want.num_experts_per_token);
        CHECK(got.routed_expert_hidden_size == want.routed_expert_hidden_size);
        CHECK(got.moe_intermediate_size == want.moe_intermediate_size);
        CHECK(got.attn_res_block_size == want.attn_res_block_size);
        CHECK(got.rms_norm_eps == want.rms_norm_eps);
        CHECK(got.layer_kind == want.layer_kind);
        CHECK(got.bos_token_id == want.bos_token_id);
        CHECK(got.eos_token_id == want.eos_token_id);
        CHECK(got.pad_token_id == want.pad_token_id);

        CHECK(int(ck.directory.shards().size()) == p->default_shards);
        // Exactly the language model's tensors and the vision tower's, nothing else.
        REQUIRE(want.vision.present);
        CHECK(ck.directory.tensors().size() == model_tensors(want).size() + vision_tensors(want).size());
        for (const auto& t : vision_tensors(want)) {
            const TensorInfo* info = ck.directory.find(t.name);
            REQUIRE_MESSAGE(info != nullptr, t.name);
            CHECK(info->shape == t.shape);
            CHECK(info->dtype == t.dtype);
        }
        CHECK_NOTHROW(check_vision_tensors(ck));
        // The vision_config written is the one read back.
        CHECK(got.vision.present);
        CHECK(got.vision.hidden == want.vision.hidden);
        CHECK(got.vision.layers == want.vision.layers);
        CHECK(got.vision.heads == want.vision.heads);
        CHECK(got.vision.qkv_hidden == want.vision.qkv_hidden);
        CHECK(got.vision.intermediate == want.vision.intermediate);
        CHECK(got.vision.pos_emb_height == want.vision.pos_emb_height);
        CHECK(got.vision.text_hidden == want.hidden_size);
        CHECK(got.vision.media_placeholder_token_id == want.vocab_size - 256 + 21);
        // The byte runs match the plan the writer used.
        const auto plan = plan_shards(want, p->default_shards);
        REQUIRE(int(ck.layer_runs.size()) == want.num_hidden_layers);
        for (int il = 0; il < want.num_hidden_layers; ++il) {
            int64_t trunk = 0;
            for (const auto& t : layer_trunk_tensors(want, il)) trunk += t.nbytes();
            CHECK(ck.layer_runs[size_t(il)].nbytes == trunk);
            if (want.is_dense(il)) continue;
            for (int ie = 0; ie < want.num_experts; ++ie) {
                const ExpertRun& run = ck.expert(il, ie);
                CHECK(run.nbytes == expert_bytes(want));
                CHECK(run.shard == ck.layer_runs[size_t(il)].shard);
                CHECK(run.part_offset[kW1Packed] == 0);
            }
        }
        for (const auto& t : plan.back().tensors) {
            const TensorInfo* info = ck.directory.find(t.spec.name);
            REQUIRE(info != nullptr);
            CHECK(info->shard == p->default_shards - 1);
        }
    }
}

TEST_CASE("verify passes on every small preset and fails on a truncated or corrupted copy") {
    for (const char* name : {"tiny", "tiny-wide", "demo"}) {
        INFO(name);
        const fs::path dir = make(name, std::string("verify_") + name);
        CHECK(run_k3serve("verify " + dir.string()) == 0);
    }

    // Truncated download: the last shard loses its last byte.
    const fs::path truncated = make("tiny", "truncated");
    const fs::path last = truncated / "model-00002-of-00002.safetensors";
    fs::resize_file(last, fs::file_size(last) - 1);
    CHECK(run_k3serve("verify " + truncated.string()) == 2);

    // A flipped byte inside the first shard's JSON header.
    const fs::path flipped = make("tiny", "flipped");
    {
        std::fstream f(flipped / "model-00001-of-00002.safetensors", std::ios::in | std::ios::out | std::ios::binary);
        f.seekp(20);
        f.put('#');
    }
    CHECK(run_k3serve("verify " + flipped.string()) == 2);
}

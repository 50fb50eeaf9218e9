// The vision side of a checkpoint (docs/model.md "The vision config
// and tensors"): vision_config read and checked by key, the 12 kinds of vision tensor listed in the
// release's names and shapes, and check_vision_tensors() refusing a missing tensor, a wrong
// shape and a wrong dtype by name, on hand-built checkpoints (tiny_checkpoint.h).
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdlib>
#include <functional>

#include "common/scratch.h"

#include "k3/error.h"
#include "weights/checkpoint.h"
#include "weights/config.h"
#include "weights/model_tensors.h"
#include "weights/tiny_checkpoint.h"

using namespace k3;
using k3::test::Entry;
using k3::test::release_entries;
using k3::test::tiny_config;
using k3::test::write_checkpoint;
using nlohmann::json;

namespace {

// A small K3-style vision_config for the tiny text shape (hidden 128).
json vision_json() {
    return json{{"model_type", "moonvit_v2"},     {"patch_size", 14},
                {"vt_hidden_size", 32},           {"vt_intermediate_size", 64},
                {"vt_num_attention_heads", 2},    {"vt_num_hidden_layers", 2},
                {"qkv_hidden_size", 32},          {"norm_type", "rmsnorm"},
                {"attn_bias", false},             {"linear_bias", false},
                {"patch_embed_proj_bias", false}, {"mlp_type", "mlp2"},
                {"pos_emb_type", "divided_fixed"}, {"init_pos_emb_height", 4},
                {"init_pos_emb_width", 6},        {"pos_emb_interpolation_mode", "bilinear"},
                {"merge_kernel_size", {2, 2}},    {"merge_type", "sd2_tpool"},
                {"mm_projector_type", "patchmergerv2"}, {"mm_hidden_size", 32},
                {"text_hidden_size", 128},        {"projector_ln_eps", 1e-5}};
}

json config_with_vision(const json& vision = vision_json()) {
    json c = tiny_config();
    c["vision_config"] = vision;
    c["media_placeholder_token_id"] = 200;
    return c;
}

std::string refusal_of_config(const json& c) {
    try {
        parse_config(c.dump(), "test");
    } catch (const Error& e) {
        return e.what();
    }
    return "";
}

// The tiny text model plus its vision tensors (in the last shard), edited by `edit`.
std::filesystem::path make_dir(const std::string& name, const std::function<void(std::vector<Entry>&)>& edit = {}) {
    const json config = config_with_vision();
    const ModelConfig cfg = parse_config(config.dump(), name);
    auto entries = release_entries(cfg);
    for (const TensorSpec& t : vision_tensors(cfg)) entries.push_back({t.name, dtype_name(t.dtype), t.shape, 1});
    if (edit) edit(entries);
    auto dir = k3::test::scratch_dir(name);
    write_checkpoint(dir, entries, config);
    return dir;
}

std::string vision_refusal(const std::filesystem::path& dir) {
    const Checkpoint ck = open_checkpoint(dir);  // the text model is sound either way
    try {
        check_vision_tensors(ck);
    } catch (const Error& e) {
        CHECK(exit_code_for(e.kind()) == 2);
        return e.what();
    }
    return "";
}

Entry& entry(std::vector<Entry>& v, const std::string& name) {
    auto it = std::find_if(v.begin(), v.end(), [&](const Entry& e) { return e.name == name; });
    REQUIRE_MESSAGE(it != v.end(), name);
    return *it;
}

}  // namespace

TEST_CASE("vision_config: read into the tower's shapes; absent means text only") {
    const ModelConfig text = parse_config(tiny_config().dump(), "text");
    CHECK_FALSE(text.vision.present);
    CHECK(vision_tensors(text).empty());

    const ModelConfig c = parse_config(config_with_vision().dump(), "vision");
    REQUIRE(c.vision.present);
    CHECK(c.vision.hidden == 32);
    CHECK(c.vision.head_dim() == 16);
    CHECK(c.vision.merged_width() == 128);
    CHECK(c.vision.pos_emb_height == 4);
    CHECK(c.vision.pos_emb_width == 6);
    CHECK(c.vision.media_placeholder_token_id == 200);
    const auto t = vision_tensors(c);
    CHECK(t.size() == 3 + 2 + 2 * 6 + 1);
    CHECK(t.front().name == "mm_projector.proj.0.weight");
    CHECK(t.front().shape == std::vector<int64_t>{128, 128});
    CHECK(t[1].shape == std::vector<int64_t>{128, 128});  // proj.2: [text hidden][4 * D]
    CHECK(t[3].name == "vision_tower.patch_embed.proj.weight");
    CHECK(t[3].shape == std::vector<int64_t>{32, 3, 14, 14});
    CHECK(t[4].shape == std::vector<int64_t>{4, 6, 32});
    CHECK(t[6].name == "vision_tower.encoder.blocks.0.wqkv.weight");
    CHECK(t[6].shape == std::vector<int64_t>{96, 32});
    CHECK(t.back().name == "vision_tower.encoder.final_layernorm.weight");
    for (const auto& s : t) CHECK(s.dtype == DType::BF16);
}

TEST_CASE("vision_config: the released K3 values give the 401M tower and 46M projector") {
    const char* src = std::getenv("K3_SOURCE_DIR");
    REQUIRE(src);
    const ModelConfig c = load_config(std::filesystem::path(src) / "tests/fixtures/config/kimi_k3_config.json");
    REQUIRE(c.vision.present);
    int64_t tower = 0, projector = 0;
    for (const auto& t : vision_tensors(c)) (t.name.starts_with("mm_projector.") ? projector : tower) += t.nbytes() / 2;
    CHECK(tower == 401'214'464);      // docs/model.md "The vision config and tensors"
    CHECK(projector == 46'144'512);
    CHECK(vision_tensors(c).size() == 168);
    CHECK(c.vision.media_placeholder_token_id == 163605);
}

TEST_CASE("vision_config: what k3serve does not implement is refused by key") {
    auto with = [](const char* key, json value) {
        json v = vision_json();
        v[key] = value;
        return refusal_of_config(config_with_vision(v));
    };
    CHECK(with("norm_type", "layernorm").find("vision_config.norm_type") != std::string::npos);
    CHECK(with("attn_bias", true).find("vision_config.attn_bias") != std::string::npos);
    CHECK(with("pos_emb_interpolation_mode", "bicubic").find("pos_emb_interpolation_mode") != std::string::npos);
    CHECK(with("mm_projector_type", "patchmerger").find("mm_projector_type") != std::string::npos);
    CHECK(with("merge_kernel_size", json::array({3, 3})).find("merge_kernel_size") != std::string::npos);
    CHECK(with("text_hidden_size", 64).find("text_hidden_size 64 differs") != std::string::npos);
    CHECK(with("qkv_hidden_size", 30).find("qkv_hidden_size") != std::string::npos);
    CHECK(with("vt_num_hidden_layers", 0).find("vt_num_hidden_layers") != std::string::npos);
    json no_pad = config_with_vision();
    no_pad.erase("media_placeholder_token_id");
    CHECK(refusal_of_config(no_pad).find("media_placeholder_token_id is missing") != std::string::npos);
}

TEST_CASE("vision tensors: a sound set passes; missing, misshapen and wrong-dtype ones are refused by name") {
    CHECK(vision_refusal(make_dir("vision-ok")) == "");

    const std::string missing = vision_refusal(make_dir("vision-missing", [](std::vector<Entry>& v) {
        v.erase(std::find_if(v.begin(), v.end(), [](const Entry& e) { return e.name == "vision_tower.encoder.blocks.1.mlp.fc0.weight"; }));
    }));
    CHECK(missing.find("missing vision tensor vision_tower.encoder.blocks.1.mlp.fc0.weight") != std::string::npos);
    CHECK(missing.find("--no-vision") != std::string::npos);

    const std::string shape = vision_refusal(make_dir("vision-shape", [](std::vector<Entry>& v) {
        entry(v, "vision_tower.patch_embed.pos_emb.weight").shape = {6, 4, 32};  // rows and columns swapped
    }));
    CHECK(shape.find("vision tensor vision_tower.patch_embed.pos_emb.weight is BF16 [6, 4, 32], expected BF16 [4, 6, 32]") !=
          std::string::npos);

    const std::string dtype = vision_refusal(make_dir("vision-dtype", [](std::vector<Entry>& v) {
        entry(v, "mm_projector.post_norm.weight").dtype = "F32";
    }));
    CHECK(dtype.find("mm_projector.post_norm.weight is F32 [128], expected BF16 [128]") != std::string::npos);
}

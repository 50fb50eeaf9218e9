// The config reader: the real Kimi K3 config.json (released nested form, fixture) loads to the
// exact shape; the flat test form and its aliases load; every rule refuses with a message that
// names the key. Refusal tests start from the real config and change one thing.
#include <doctest/doctest.h>

#include <cstdlib>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <sstream>

#include "weights/config.h"
#include "k3/error.h"

using namespace k3;
using nlohmann::json;

namespace {

std::filesystem::path fixture_path() {
    const char* src = std::getenv("K3_SOURCE_DIR");
    REQUIRE_MESSAGE(src, "K3_SOURCE_DIR is not set (run through ctest)");
    return std::filesystem::path(src) / "tests/fixtures/config/kimi_k3_config.json";
}

json k3_json() {
    std::ifstream in(fixture_path());
    REQUIRE(in.good());
    return json::parse(in);
}

// The tiny test model (docs/model.md "Configuration") in the flat form with its short aliases.
json tiny_flat_json() {
    return json{{"hidden_size", 128},          {"num_hidden_layers", 13},
                {"vocab_size", 256},           {"rms_norm_eps", 1e-5},
                {"tie_word_embeddings", false}, {"kda_num_heads", 4},
                {"kda_head_dim", 16},          {"short_conv_kernel_size", 4},
                {"gate_lower_bound", -5.0},    {"num_attention_heads", 4},
                {"q_lora_rank", 64},           {"kv_lora_rank", 32},
                {"qk_nope_head_dim", 24},      {"qk_rope_head_dim", 8},
                {"v_head_dim", 16},            {"mla_use_output_gate", true},
                {"num_experts", 8},            {"num_experts_per_token", 2},
                {"num_shared_experts", 2},     {"routed_expert_hidden_size", 64},
                {"moe_intermediate_size", 64}, {"routed_scaling_factor", 1.0},
                {"moe_renormalize", true},     {"latent_moe_use_norm", true},
                {"first_k_dense_replace", 1},  {"intermediate_size", 96},
                {"attn_res_block_size", 3},    {"situ_beta", 4.0},
                {"situ_linear_beta", 25.0},    {"full_attn_layers", {4, 8, 12, 13}}};
}

// Parses `j`, expecting a Config refusal whose message contains every one of `needles`.
void expect_refusal(const json& j, std::initializer_list<const char*> needles) {
    try {
        parse_config(j.dump(), "cfg.json");
        FAIL("accepted a config that must be refused: ", j.dump().substr(0, 200));
    } catch (const Error& e) {
        CHECK(e.kind() == ErrorKind::Config);
        CHECK(exit_code_for(e.kind()) == 2);
        const std::string msg = e.what();
        CHECK_MESSAGE(msg.find("cfg.json") != std::string::npos, msg);
        for (const char* n : needles) CHECK_MESSAGE(msg.find(n) != std::string::npos, "want '", n, "' in: ", msg);
    }
}

// The K3 config with one edit to text_config (or linear_attn_config).
void expect_k3_refusal(const std::function<void(json& text, json& linear)>& edit,
                       std::initializer_list<const char*> needles) {
    json j = k3_json();
    edit(j["text_config"], j["text_config"]["linear_attn_config"]);
    expect_refusal(j, needles);
}

}  // namespace

TEST_CASE("the real Kimi K3 config.json loads to the exact K3 shape") {
    ModelConfig c = load_config(fixture_path());
    CHECK(c.hidden_size == 7168);
    CHECK(c.num_hidden_layers == 93);
    CHECK(c.vocab_size == 163840);
    CHECK(c.rms_norm_eps == doctest::Approx(1e-5));
    CHECK(c.intermediate_size == 33792);
    CHECK(c.first_k_dense_replace == 1);
    CHECK(c.attn_res_block_size == 12);
    CHECK(c.max_position_embeddings == 1048576);
    CHECK(c.bos_token_id == 163584);
    CHECK(c.eos_token_id == 163586);
    CHECK(c.pad_token_id == 163839);
    CHECK(c.num_attention_heads == 96);
    CHECK(c.num_key_value_heads == 96);
    CHECK(c.q_lora_rank == 1536);
    CHECK(c.kv_lora_rank == 512);
    CHECK(c.qk_nope_head_dim == 128);
    CHECK(c.qk_rope_head_dim == 64);
    CHECK(c.v_head_dim == 128);
    CHECK(c.mla_use_output_gate);
    CHECK(c.kda_num_heads == 96);
    CHECK(c.kda_head_dim == 128);
    CHECK(c.short_conv_kernel_size == 4);
    CHECK(c.gate_lower_bound == -5.0f);
    CHECK(c.num_experts == 896);
    CHECK(c.num_experts_per_token == 16);
    CHECK(c.num_shared_experts == 2);
    CHECK(c.routed_expert_hidden_size == 3584);
    CHECK(c.moe_intermediate_size == 3072);
    CHECK(c.routed_scaling_factor == 1.0f);
    CHECK(c.moe_renormalize);
    CHECK(c.latent_moe_use_norm);
    CHECK(c.activation_situ_beta == 4.0f);
    CHECK(c.activation_situ_linear_beta == 25.0f);
    // Derived widths (docs/model.md "Configuration").
    CHECK(c.kda_width() == 12288);
    CHECK(c.mla_q_head_dim() == 192);
    CHECK(c.mla_kv_latent_dim() == 576);
    CHECK(c.shared_intermediate() == 6144);
    CHECK(c.a_log_len() == 128);
    // Layer map: ONE-based 4,8,...,92,93 in the file -> zero-based MLA 3,7,...,87,91,92.
    REQUIRE(c.layer_kind.size() == 93);
    std::vector<int> mla;
    for (int il = 0; il < 93; ++il)
        if (c.is_mla(il)) mla.push_back(il);
    std::vector<int> want;
    for (int il = 3; il <= 91; il += 4) want.push_back(il);
    want.push_back(92);
    CHECK(mla == want);
    CHECK(mla.size() == 24);
    CHECK_FALSE(c.is_mla(0));
    CHECK(c.is_mla(91));
    CHECK(c.is_mla(92));
    CHECK(c.is_dense(0));
    CHECK_FALSE(c.is_dense(1));
    CHECK(describe(c) == "hidden=7168 layers=93 vocab=163840 | 24 MLA + 69 KDA | experts 896 top16 shared2 | latent=3584");
}

TEST_CASE("the flat test form loads with the kda_* and situ_* aliases") {
    ModelConfig c = parse_config(tiny_flat_json().dump(), "flat.json");
    CHECK(c.kda_num_heads == 4);
    CHECK(c.kda_head_dim == 16);
    CHECK(c.activation_situ_beta == 4.0f);
    CHECK(c.activation_situ_linear_beta == 25.0f);
    CHECK(c.num_key_value_heads == 4);  // absent -> equal to the attention heads
    std::string map;
    for (LayerKind k : c.layer_kind) map += k == LayerKind::Mla ? 'M' : 'K';
    CHECK(map == "KKKMKKKMKKKMM");  // docs/model.md "Configuration"
}

TEST_CASE("KDA dims never come from an unrelated head_dim or num_heads") {
    SUBCASE("text_config.head_dim / num_heads are ignored in favour of linear_attn_config") {
        json j = k3_json();
        j["text_config"]["head_dim"] = 72;
        j["text_config"]["num_heads"] = 7;
        j["head_dim"] = 64;
        ModelConfig c = parse_config(j.dump(), "cfg.json");
        CHECK(c.kda_head_dim == 128);
        CHECK(c.kda_num_heads == 96);
    }
    SUBCASE("a top-level head_dim does not stand in for a missing KDA head_dim") {
        json j = k3_json();
        j["text_config"]["linear_attn_config"].erase("head_dim");
        j["head_dim"] = 128;
        j["text_config"]["head_dim"] = 128;
        expect_refusal(j, {"missing required keys", "head_dim (or kda_head_dim)"});
    }
    SUBCASE("flat form with head_dim but not kda_head_dim is refused") {
        json j = tiny_flat_json();
        j.erase("kda_head_dim");
        j["head_dim"] = 16;
        expect_refusal(j, {"head_dim (or kda_head_dim)"});
    }
}

TEST_CASE("lookup order: text_config wins over the top level") {
    json j = k3_json();
    j["hidden_size"] = 1152;  // e.g. a wrapper-level value; text_config's must be used
    j["vocab_size"] = 5;
    ModelConfig c = parse_config(j.dump(), "cfg.json");
    CHECK(c.hidden_size == 7168);
    CHECK(c.vocab_size == 163840);
}

TEST_CASE("every missing required key is reported in one message") {
    json j = k3_json();
    j["text_config"].erase("hidden_size");
    j["text_config"].erase("num_experts");
    j["text_config"].erase("activation_situ_beta");
    j["text_config"]["linear_attn_config"].erase("full_attn_layers");
    j["text_config"]["linear_attn_config"].erase("num_heads");
    expect_refusal(j, {"missing required keys", "hidden_size", "num_experts,", "activation_situ_beta (or situ_beta)",
                       "full_attn_layers", "num_heads (or kda_num_heads)"});
}

TEST_CASE("wrongly typed values are refused by key") {
    expect_k3_refusal([](json& t, json&) { t["hidden_size"] = "7168"; }, {"text_config.hidden_size", "integer"});
    expect_k3_refusal([](json& t, json&) { t["hidden_size"] = 7168.5; }, {"text_config.hidden_size", "integer"});
    expect_k3_refusal([](json& t, json&) { t["vocab_size"] = 1ll << 40; }, {"vocab_size", "32 bits"});
    expect_k3_refusal([](json&, json& l) { l["full_attn_layers"] = "4,8"; }, {"full_attn_layers", "array"});
    expect_k3_refusal([](json& t, json&) { t["moe_renormalize"] = 1; }, {"moe_renormalize", "true or false"});
}

TEST_CASE("malformed, over-nested and duplicate-key JSON is refused") {
    CHECK_THROWS_WITH_AS(parse_config("{\"hidden_size\": 12,", "cfg.json"), doctest::Contains("malformed JSON"), Error);
    CHECK_THROWS_WITH_AS(parse_config(std::string(100, '[') + std::string(100, ']'), "cfg.json"),
                         doctest::Contains("nested deeper"), Error);
    CHECK_THROWS_WITH_AS(parse_config("[1, 2]", "cfg.json"), doctest::Contains("object"), Error);
    std::string dup = k3_json().dump();
    dup.insert(1, "\"vocab_size\": 1, \"vocab_size\": 2, ");
    CHECK_THROWS_WITH_AS(parse_config(dup, "cfg.json"), doctest::Contains("\"vocab_size\" appears twice"), Error);
    CHECK_THROWS_WITH_AS(load_config("/nonexistent/config.json"), doctest::Contains("no such config file"), Error);
}

TEST_CASE("refused: sizes that are not positive") {
    expect_k3_refusal([](json& t, json&) { t["hidden_size"] = 0; }, {"text_config.hidden_size must be positive"});
    expect_k3_refusal([](json& t, json&) { t["num_experts"] = -3; }, {"num_experts must be positive"});
    expect_k3_refusal([](json&, json& l) { l["short_conv_kernel_size"] = 0; }, {"short_conv_kernel_size must be positive"});
    expect_k3_refusal([](json& t, json&) { t["rms_norm_eps"] = 0.0; }, {"rms_norm_eps must be positive"});
}

TEST_CASE("refused: sizes beyond what k3serve accepts") {
    expect_k3_refusal([](json& t, json&) { t["vocab_size"] = 1 << 30; }, {"vocab_size", "larger than k3serve accepts"});
    expect_k3_refusal([](json&, json& l) { l["num_heads"] = 1 << 20; }, {"KDA width", "larger than k3serve accepts"});
}

TEST_CASE("refused: full_attn_layers is ONE-based and inside 1..n") {
    expect_k3_refusal([](json&, json& l) { l["full_attn_layers"][0] = 0; }, {"full_attn_layers holds 0", "ONE-based"});
    expect_k3_refusal([](json&, json& l) { l["full_attn_layers"][23] = 94; }, {"holds 94, outside 1..93"});
    expect_k3_refusal([](json&, json& l) { l["full_attn_layers"][1] = 4; }, {"lists layer 4 twice"});
}

TEST_CASE("refused: kda_layers and full_attn_layers must partition the layers") {
    // Layer 1 dropped from kda_layers: uncovered.
    expect_k3_refusal([](json&, json& l) { l["kda_layers"].erase(0); }, {"do not cover every layer", "[1]"});
    // Layer 4 in both lists.
    expect_k3_refusal([](json&, json& l) { l["kda_layers"].push_back(4); }, {"layer 4 (one-based) is in both"});
    // A zero-based kda list (off by one) is caught.
    expect_k3_refusal(
        [](json&, json& l) {
            for (auto& v : l["kda_layers"]) v = v.get<int>() - 1;
        },
        {"kda_layers holds 0"});
}

TEST_CASE("refused: top-k larger than the expert count") {
    expect_k3_refusal([](json& t, json&) { t["num_experts_per_token"] = 897; },
                      {"num_experts_per_token = 897 exceeds", "num_experts = 896"});
}

TEST_CASE("refused: grouped routing") {
    expect_k3_refusal([](json& t, json&) { t["num_expert_group"] = 8; }, {"num_expert_group = 8"});
    expect_k3_refusal([](json& t, json&) { t["topk_group"] = 4; }, {"topk_group = 4"});
}

TEST_CASE("refused: hidden_act other than situ") {
    expect_k3_refusal([](json& t, json&) { t["hidden_act"] = "silu"; }, {"hidden_act is \"silu\"", "situ"});
}

TEST_CASE("refused: router activation other than sigmoid") {
    expect_k3_refusal([](json& t, json&) { t["moe_router_activation_func"] = "softmax"; },
                      {"moe_router_activation_func is \"softmax\""});
}

TEST_CASE("refused: topk_method other than noaux_tc") {
    expect_k3_refusal([](json& t, json&) { t["topk_method"] = "greedy"; }, {"topk_method is \"greedy\""});
    // Absent is fine.
    json j = k3_json();
    j["text_config"].erase("topk_method");
    CHECK_NOTHROW(parse_config(j.dump(), "cfg.json"));
}

TEST_CASE("refused: an MTP head") {
    expect_k3_refusal([](json& t, json&) { t["num_nextn_predict_layers"] = 1; }, {"num_nextn_predict_layers = 1"});
}

TEST_CASE("refused: tied embeddings") {
    expect_k3_refusal([](json& t, json&) { t["tie_word_embeddings"] = true; }, {"tie_word_embeddings is true"});
    json flat = tiny_flat_json();
    flat["tie_word_embeddings"] = true;
    expect_refusal(flat, {"tie_word_embeddings is true"});
}

TEST_CASE("refused: RoPE MLA (mla_use_nope false)") {
    expect_k3_refusal([](json& t, json&) { t["mla_use_nope"] = false; }, {"mla_use_nope is false"});
}

TEST_CASE("refused: low-rank KDA gate (use_full_rank_gate false)") {
    expect_k3_refusal([](json&, json& l) { l["use_full_rank_gate"] = false; },
                      {"text_config.linear_attn_config.use_full_rank_gate is false"});
}

TEST_CASE("refused: ungated MLA and un-normed latent MoE") {
    expect_k3_refusal([](json& t, json&) { t["mla_use_output_gate"] = false; }, {"mla_use_output_gate is false"});
    expect_k3_refusal([](json& t, json&) { t["latent_moe_use_norm"] = false; }, {"latent_moe_use_norm is false"});
}

TEST_CASE("refused: MoE not on every layer") {
    expect_k3_refusal([](json& t, json&) { t["moe_layer_freq"] = 2; }, {"moe_layer_freq = 2"});
}

TEST_CASE("refused: grouped-query attention") {
    expect_k3_refusal([](json& t, json&) { t["num_key_value_heads"] = 8; },
                      {"num_key_value_heads = 8 differs from num_attention_heads = 96"});
}

TEST_CASE("refused: expert input widths that are not a multiple of the MXFP4 group") {
    expect_k3_refusal([](json& t, json&) { t["routed_expert_hidden_size"] = 3584 + 16; },
                      {"routed_expert_hidden_size = 3600 is not a multiple of the MXFP4 group"});
    expect_k3_refusal([](json& t, json&) { t["moe_intermediate_size"] = 3072 - 8; },
                      {"moe_intermediate_size = 3064 is not a multiple of the MXFP4 group"});
}

TEST_CASE("refused: quantization_config other than MXFP4 group 32") {
    auto edit_quant = [](const std::function<void(json&)>& f, std::initializer_list<const char*> needles) {
        json j = k3_json();
        f(j["quantization_config"]);
        expect_refusal(j, needles);
    };
    edit_quant([](json& q) { q["config_groups"]["group_0"]["weights"]["group_size"] = 16; },
               {"quantization_config group_size is 16"});
    edit_quant(
        [](json& q) {
            q["format"] = "nvfp4-pack-quantized";
            q["config_groups"]["group_0"]["format"] = "nvfp4-pack-quantized";
        },
        {"quantization_config does not describe MXFP4"});
    edit_quant([](json& q) { q["config_groups"]["group_0"]["weights"]["num_bits"] = 8; },
               {"quantization_config num_bits is 8"});
    edit_quant([](json& q) { q = "mxfp4"; }, {"quantization_config must be an object"});
    // Absent is fine (the flat form never has one).
    json j = k3_json();
    j.erase("quantization_config");
    CHECK_NOTHROW(parse_config(j.dump(), "cfg.json"));
}

TEST_CASE("refused: first_k_dense_replace beyond the layer count") {
    expect_k3_refusal([](json& t, json&) { t["first_k_dense_replace"] = 94; },
                      {"first_k_dense_replace = 94 must be within 0..num_hidden_layers (93)"});
}

TEST_CASE("the release form must state the semantics it uses; the flat form may omit them") {
    for (const char* key : {"hidden_act", "moe_router_activation_func", "num_nextn_predict_layers"}) {
        json j = k3_json();
        j["text_config"].erase(key);
        expect_refusal(j, {"missing required keys", key});
    }
    json j = k3_json();
    j["text_config"].erase("tie_word_embeddings");
    j.erase("tie_word_embeddings");
    expect_refusal(j, {"missing required keys", "tie_word_embeddings"});
    CHECK_NOTHROW(parse_config(tiny_flat_json().dump(), "flat.json"));
}

TEST_CASE("several structural problems are reported together") {
    json j = k3_json();
    j["text_config"]["hidden_act"] = "gelu";
    j["text_config"]["num_nextn_predict_layers"] = 2;
    j["text_config"]["linear_attn_config"]["full_attn_layers"][0] = 0;
    expect_refusal(j, {"hidden_act is \"gelu\"", "num_nextn_predict_layers = 2", "full_attn_layers holds 0"});
}

// make-model: presets, the files it writes (layout, headers, index, config), determinism, and
// the realism of the random weights (MXFP4 groups, scales, router bias). Its tokenizer files:
// test_synthetic_vocab.cpp.
#include <doctest/doctest.h>

#include "common/scratch.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>

#include "kernels/kernels.h"
#include "synthetic/model_presets.h"
#include "weights/model_tensors.h"
#include "synthetic/checkpoint.h"
#include "synthetic/vocab.h"
#include "synthetic/weights.h"
#include "k3/error.h"

using namespace k3;
namespace fs = std::filesystem;
using Json = nlohmann::json;

namespace {


std::string read_file(const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    REQUIRE_MESSAGE(in.good(), p.string());
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

const ModelConfig& preset(const std::string& name) {
    const ModelPreset* p = find_preset(name);
    REQUIRE_MESSAGE(p != nullptr, name);
    return p->config;
}

// One shard read back by hand (the header JSON and the raw bytes).
struct Shard {
    std::string name;
    std::string bytes;
    int64_t data_start = 0;
    nlohmann::ordered_json header;
};

Shard read_shard(const fs::path& path) {
    Shard s;
    s.name = path.filename().string();
    s.bytes = read_file(path);
    REQUIRE(s.bytes.size() >= 8);
    uint64_t n = 0;
    for (int i = 0; i < 8; ++i) n |= uint64_t(uint8_t(s.bytes[size_t(i)])) << (8 * i);
    REQUIRE(8 + n <= s.bytes.size());
    s.data_start = int64_t(8 + n);
    s.header = nlohmann::ordered_json::parse(s.bytes.substr(8, n));
    return s;
}

std::vector<Shard> read_shards(const fs::path& dir) {
    std::vector<fs::path> paths;
    for (const auto& e : fs::directory_iterator(dir))
        if (e.path().extension() == ".safetensors") paths.push_back(e.path());
    std::sort(paths.begin(), paths.end());
    std::vector<Shard> out;
    for (const auto& p : paths) out.push_back(read_shard(p));
    return out;
}

// Where one tensor lives: shard index, absolute offset, size.
struct Located {
    int shard;
    int64_t begin, end;
};

std::map<std::string, Located> locate_all(const std::vector<Shard>& shards) {
    std::map<std::string, Located> out;
    for (size_t k = 0; k < shards.size(); ++k) {
        for (auto it = shards[k].header.begin(); it != shards[k].header.end(); ++it) {
            if (it.key() == "__metadata__") continue;
            const auto& off = it.value()["data_offsets"];
            out[it.key()] = {int(k), shards[k].data_start + off[0].get<int64_t>(), shards[k].data_start + off[1].get<int64_t>()};
        }
    }
    return out;
}

std::string_view tensor_bytes(const std::vector<Shard>& shards, const Located& l) {
    return std::string_view(shards[size_t(l.shard)].bytes).substr(size_t(l.begin), size_t(l.end - l.begin));
}

void make(const std::string& preset_name, const fs::path& dir, uint64_t seed, int shards = 0) {
    const ModelPreset* p = find_preset(preset_name);
    REQUIRE(p);
    write_synthetic_model(p->config, dir, seed, shards ? shards : p->default_shards, false);
}

int run_k3serve(const std::string& args) {
    const char* bin = std::getenv("K3SERVE_BIN");
    REQUIRE_MESSAGE(bin != nullptr, "K3SERVE_BIN not set");
    const int status = std::system((std::string(bin) + " " + args + " >/dev/null 2>&1").c_str());
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

}  // namespace

TEST_CASE("presets have the documented shapes") {
    const ModelConfig& tiny = preset("tiny");
    CHECK(tiny.hidden_size == 128);
    CHECK(tiny.num_hidden_layers == 13);
    CHECK(tiny.vocab_size == 512);
    CHECK(tiny.num_experts == 8);
    CHECK(tiny.num_experts_per_token == 2);
    CHECK(tiny.num_shared_experts == 2);
    CHECK(tiny.routed_expert_hidden_size == 64);
    CHECK(tiny.moe_intermediate_size == 64);
    CHECK(tiny.attn_res_block_size == 3);
    CHECK(tiny.full_attn_layers == std::vector<int>{4, 8, 12, 13});
    std::string map;
    for (int il = 0; il < 13; ++il) map += tiny.is_mla(il) ? 'M' : 'K';
    CHECK(map == "KKKMKKKMKKKMM");  // docs/model.md "Configuration" layer map
    CHECK(model_tensors(tiny).size() == 916);

    const ModelConfig& wide = preset("tiny-wide");
    CHECK(wide.first_k_dense_replace == 2);
    CHECK(wide.hidden_size != tiny.hidden_size);
    CHECK(wide.kda_head_dim != tiny.kda_head_dim);
    CHECK(wide.short_conv_kernel_size != tiny.short_conv_kernel_size);
    CHECK(find_preset("tiny-wide")->default_shards == 3);
    // At least two complete attention-residual blocks.
    CHECK(wide.num_hidden_layers / wide.attn_res_block_size >= 2);

    // docs/model.md "Synthetic models": the k3-mini row.
    const ModelConfig& mini = preset("k3-mini");
    CHECK(mini.hidden_size == 2048);
    CHECK(mini.num_hidden_layers == 24);
    CHECK(mini.vocab_size == 32768);
    CHECK(mini.kda_num_heads == 16);
    CHECK(mini.kda_head_dim == 128);
    CHECK(mini.full_attn_layers == std::vector<int>{4, 8, 12, 16, 20, 24});
    CHECK(mini.num_attention_heads == 16);
    CHECK(mini.q_lora_rank == 512);
    CHECK(mini.kv_lora_rank == 256);
    CHECK(mini.num_experts == 256);
    CHECK(mini.num_experts_per_token == 16);
    CHECK(mini.routed_expert_hidden_size == 1024);
    CHECK(mini.moe_intermediate_size == 768);
    CHECK(mini.intermediate_size == 8192);
    CHECK(mini.attn_res_block_size == 6);
    CHECK(expert_bytes(mini) == 1253376);
    int64_t pool = 0, trunk = 0;
    for (const auto& t : model_tensors(mini)) {
        if (t.role == TensorRole::ExpertPacked || t.role == TensorRole::ExpertScale) pool += t.nbytes();
        if (t.role == TensorRole::LayerTrunk) trunk += t.nbytes();
    }
    CHECK(pool == 23ll * 256 * 1253376);                   // 7.38 GB
    CHECK(std::abs(double(trunk) / 1e9 - 1.68) < 0.01);    // 1.68 GB
    CHECK(find_preset("k3-mini")->default_shards == 4);

    for (const auto& p : model_presets()) {
        INFO(p.name);
        const ModelConfig& c = p.config;
        CHECK(c.routed_expert_hidden_size % kMxfp4Group == 0);
        CHECK(c.moe_intermediate_size % kMxfp4Group == 0);
        CHECK(int(c.full_attn_layers.size() + c.kda_layers.size()) == c.num_hidden_layers);
        std::set<int> all(c.full_attn_layers.begin(), c.full_attn_layers.end());
        all.insert(c.kda_layers.begin(), c.kda_layers.end());
        CHECK(int(all.size()) == c.num_hidden_layers);
        CHECK(*all.begin() == 1);
        CHECK(*all.rbegin() == c.num_hidden_layers);
        CHECK(c.bos_token_id == c.vocab_size - 256);
        CHECK(c.eos_token_id == c.vocab_size - 254);
        CHECK(c.pad_token_id == c.vocab_size - 1);
    }
    CHECK(find_preset("no-such-preset") == nullptr);
}

TEST_CASE("config.json is the release's nested form") {
    const ModelConfig& c = preset("tiny-wide");
    const Json j = Json::parse(release_config_json(c));
    CHECK(j["architectures"][0] == "KimiK3ForConditionalGeneration");
    CHECK(j["model_type"] == "kimi_k3");
    CHECK(j["vision_config"].is_object());
    CHECK(j["quantization_config"]["quant_method"] == "compressed-tensors");
    CHECK(j["quantization_config"]["format"] == "mxfp4-pack-quantized");
    CHECK(j["quantization_config"]["config_groups"]["group_0"]["weights"]["group_size"] == 32);
    const Json& t = j["text_config"];
    CHECK(t["hidden_size"] == 160);
    CHECK(t["num_hidden_layers"] == 10);
    CHECK(t["hidden_act"] == "situ");
    CHECK(t["rms_norm_eps"].get<double>() == 1e-5);  // written as the decimal, not the float's binary value
    CHECK(t["moe_router_activation_func"] == "sigmoid");
    CHECK(t["topk_method"] == "noaux_tc");
    CHECK(t["num_expert_group"] == 1);
    CHECK(t["topk_group"] == 1);
    CHECK(t["num_nextn_predict_layers"] == 0);
    CHECK(t["tie_word_embeddings"] == false);
    CHECK(t["first_k_dense_replace"] == 2);
    CHECK(t["bos_token_id"] == 640 - 256);
    CHECK(t["eos_token_id"] == 640 - 254);
    CHECK(t["pad_token_id"] == 639);
    const Json& la = t["linear_attn_config"];
    CHECK(la["num_heads"] == 5);
    CHECK(la["head_dim"] == 32);
    CHECK(la["short_conv_kernel_size"] == 3);
    CHECK(la["gate_lower_bound"] == -5.0);
    CHECK(la["use_full_rank_gate"] == true);
    CHECK(la["full_attn_layers"] == Json({3, 6, 9, 10}));
    CHECK(la["kda_layers"] == Json({1, 2, 4, 5, 7, 8}));
    for (const char* key : {"rms_norm_eps", "intermediate_size", "attn_res_block_size", "num_attention_heads",
                            "num_key_value_heads", "q_lora_rank", "kv_lora_rank", "qk_nope_head_dim",
                            "qk_rope_head_dim", "v_head_dim", "mla_use_nope", "mla_use_output_gate", "num_experts",
                            "num_experts_per_token", "num_shared_experts", "routed_expert_hidden_size",
                            "moe_intermediate_size", "routed_scaling_factor", "moe_renormalize",
                            "latent_moe_use_norm", "activation_situ_beta", "activation_situ_linear_beta",
                            "use_grouped_topk", "max_position_embeddings", "vocab_size"}) {
        CHECK_MESSAGE(t.contains(key), key);
    }
}

TEST_CASE("tiny: shards, headers and index read back as the tensor list") {
    const fs::path dir = k3::test::scratch_path("tiny_layout");
    make("tiny", dir, 7);
    const ModelConfig& c = preset("tiny");
    for (const char* f : {"config.json", "model.safetensors.index.json", "tiktoken.model", "tokenizer_config.json",
                          "model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"})
        CHECK_MESSAGE(fs::exists(dir / f), f);

    const auto shards = read_shards(dir);
    REQUIRE(shards.size() == 2);
    const auto where = locate_all(shards);
    // The language model's tensors, then the vision tower's (docs/model.md "Image input").
    auto expected = model_tensors(c);
    for (const auto& t : vision_tensors(c)) expected.push_back(t);
    CHECK(vision_tensors(c).size() == 18);
    CHECK(where.size() == expected.size());

    for (const auto& s : shards) {
        INFO(s.name);
        CHECK(s.data_start % 64 == 0);  // header padded to align the data section
        CHECK(s.header["__metadata__"]["format"] == "pt");
        // No holes, no overlaps, file ends where the last tensor ends.
        std::vector<std::pair<int64_t, int64_t>> ranges;
        for (auto it = s.header.begin(); it != s.header.end(); ++it)
            if (it.key() != "__metadata__")
                ranges.push_back({it.value()["data_offsets"][0].get<int64_t>(), it.value()["data_offsets"][1].get<int64_t>()});
        std::sort(ranges.begin(), ranges.end());
        int64_t pos = 0;
        for (auto [b, e] : ranges) {
            CHECK(b == pos);
            pos = e;
        }
        CHECK(s.data_start + pos == int64_t(s.bytes.size()));
    }

    // Every tensor of the list, with its dtype and shape, in storage order.
    int prev_shard = 0;
    int64_t prev_end = shards[0].data_start;
    for (const auto& t : expected) {
        INFO(t.name);
        auto it = where.find(t.name);
        REQUIRE(it != where.end());
        const auto& h = shards[size_t(it->second.shard)].header[t.name];
        CHECK(h["dtype"] == dtype_name(t.dtype));
        CHECK(h["shape"].get<std::vector<int64_t>>() == t.shape);
        CHECK(it->second.end - it->second.begin == t.nbytes());
        if (it->second.shard == prev_shard) {
            CHECK(it->second.begin == prev_end);  // storage order, back to back
        } else {
            CHECK(it->second.shard == prev_shard + 1);
            CHECK(it->second.begin == shards[size_t(it->second.shard)].data_start);
        }
        prev_shard = it->second.shard;
        prev_end = it->second.end;
    }

    // Layout facts: a layer (trunk + experts) never straddles shards; model-level tensors last.
    for (int il = 0; il < c.num_hidden_layers; ++il) {
        const int shard = where.at(layer_trunk_tensors(c, il).front().name).shard;
        for (const auto& t : layer_trunk_tensors(c, il)) CHECK(where.at(t.name).shard == shard);
        if (c.is_dense(il)) continue;
        for (int ie = 0; ie < c.num_experts; ++ie) {
            const auto six = expert_tensors(c, il, ie);
            for (size_t k = 1; k < six.size(); ++k) CHECK(where.at(six[k].name).begin == where.at(six[k - 1].name).end);
            CHECK(where.at(six[0].name).shard == shard);
        }
    }
    for (const auto& t : expected)
        if (t.layer < 0) CHECK(where.at(t.name).shard == 1);

    // The index maps every tensor to the shard that holds it; total_size is the tensor bytes.
    const Json index = Json::parse(read_file(dir / "model.safetensors.index.json"));
    int64_t total = 0;
    for (const auto& t : expected) {
        total += t.nbytes();
        CHECK(index["weight_map"][t.name] == shards[size_t(where.at(t.name).shard)].name);
    }
    CHECK(index["weight_map"].size() == expected.size());
    CHECK(index["metadata"]["total_size"] == total);

    // Release dtypes.
    const auto& layer1 = shards[size_t(where.at(layer_prefix(1) + "self_attn.A_log").shard)].header;
    CHECK(layer1[layer_prefix(1) + "self_attn.A_log"]["dtype"] == "F32");
    CHECK(layer1[layer_prefix(1) + "self_attn.dt_bias"]["dtype"] == "F32");
    CHECK(layer1[layer_prefix(1) + "self_attn.q_conv1d.weight"]["dtype"] == "F32");
    CHECK(layer1[layer_prefix(1) + "self_attn.o_norm.weight"]["dtype"] == "F32");
    CHECK(layer1[layer_prefix(1) + "block_sparse_moe.gate.e_score_correction_bias"]["dtype"] == "F32");
    CHECK(layer1[layer_prefix(1) + "self_attn.q_proj.weight"]["dtype"] == "BF16");
    CHECK(layer1[expert_prefix(1, 0) + "w1.weight_packed"]["dtype"] == "U8");

    // config.json parses and agrees with the preset.
    const Json cfg = Json::parse(read_file(dir / "config.json"));
    CHECK(cfg["text_config"]["num_hidden_layers"] == 13);
    CHECK(cfg["text_config"]["linear_attn_config"]["full_attn_layers"] == Json({4, 8, 12, 13}));
}

TEST_CASE("tiny-wide writes three shards with whole layers and the model-level tensors last") {
    const fs::path dir = k3::test::scratch_path("wide_layout");
    make("tiny-wide", dir, 1);
    const auto shards = read_shards(dir);
    REQUIRE(shards.size() == 3);
    CHECK(shards[2].name == "model-00003-of-00003.safetensors");
    CHECK(shards[2].header.contains(kLmHeadName));
    CHECK(shards[2].header.contains(kModelPrefix + "embed_tokens.weight"));
    const ModelConfig& c = preset("tiny-wide");
    const auto where = locate_all(shards);
    // Layer 1 is dense (first_k_dense_replace 2): it has an MLP and no experts.
    CHECK(where.count(layer_prefix(1) + "mlp.down_proj.weight") == 1);
    CHECK(where.count(expert_prefix(1, 0) + "w1.weight_packed") == 0);
    CHECK(where.count(expert_prefix(2, c.num_experts - 1) + "w3.weight_scale") == 1);
    for (const auto& s : shards) CHECK(s.header.size() > 1);  // no empty shard
}

TEST_CASE("shard plans split by whole layers and refuse impossible shard counts") {
    const ModelConfig& c = preset("tiny");
    for (int n : {1, 2, 5, 14}) {
        const auto plan = plan_shards(c, n);
        REQUIRE(int(plan.size()) == n);
        for (const auto& s : plan) CHECK(!s.tensors.empty());
        // The last shard holds the head, then the vision tower (docs/model.md "Image input").
        const auto& last = plan.back().tensors;
        CHECK(std::any_of(last.begin(), last.end(), [](const auto& t) { return t.spec.name == kLmHeadName; }));
        CHECK(last.back().spec.name == vision_tensors(c).back().name);
    }
    CHECK_THROWS_AS(plan_shards(c, 0), Error);
    CHECK_THROWS_AS(plan_shards(c, 15), Error);  // 13 layers + model-level = 14 units

    // demo and k3-mini: every tensor start 64-byte aligned in the file (all sizes multiples of 64).
    for (const char* name : {"demo", "k3-mini"}) {
        INFO(name);
        const auto plan = plan_shards(preset(name), find_preset(name)->default_shards);
        for (const auto& s : plan) {
            CHECK((8 + int64_t(s.header.size())) % 64 == 0);
            for (const auto& t : s.tensors) CHECK(t.data_begin % 64 == 0);
        }
    }
    // k3-mini shards are balanced (each within 25% of an equal split).
    const auto mini = plan_shards(preset("k3-mini"), 4);
    int64_t total = 0;
    for (const auto& s : mini) total += s.data_bytes;
    for (const auto& s : mini) CHECK(std::abs(double(s.data_bytes) / (double(total) / 4) - 1.0) < 0.25);
}

TEST_CASE("the same preset and seed give byte-identical files; another seed differs") {
    const fs::path a = k3::test::scratch_path("det_a"), b = k3::test::scratch_path("det_b"), c = k3::test::scratch_path("det_c");
    make("tiny-wide", a, 42);
    make("tiny-wide", b, 42);
    make("tiny-wide", c, 43);
    int files = 0;
    for (const auto& e : fs::directory_iterator(a)) {
        const std::string name = e.path().filename().string();
        INFO(name);
        CHECK(read_file(a / name) == read_file(b / name));
        if (e.path().extension() == ".safetensors") {
            const std::string x = read_file(a / name), y = read_file(c / name);
            CHECK(x.size() == y.size());
            CHECK(x != y);
        }
        ++files;
    }
    CHECK(files == 7);  // 3 shards, index, config.json, tiktoken.model, tokenizer_config.json
    CHECK(read_file(a / "config.json") == read_file(c / "config.json"));
}

TEST_CASE("fill blocks are independent of the order they are computed in") {
    // The writer fills blocks in parallel; a block's bytes must depend only on (recipe, block).
    const ModelConfig& c = preset("k3-mini");
    const auto specs = expert_tensors(c, 1, 3);
    const TensorRecipe r = recipe_for(c, specs[0], 5);
    const int64_t n = specs[0].nbytes();
    REQUIRE(n > 2 * kFillBlockBytes);
    std::vector<uint8_t> forward(static_cast<size_t>(n)), backward(static_cast<size_t>(n));
    const int64_t blocks = (n + kFillBlockBytes - 1) / kFillBlockBytes;
    for (int64_t b = 0; b < blocks; ++b) fill_tensor_block(r, n, b, forward.data() + b * kFillBlockBytes);
    for (int64_t b = blocks - 1; b >= 0; --b) fill_tensor_block(r, n, b, backward.data() + b * kFillBlockBytes);
    CHECK(forward == backward);
    // ...and differ between blocks (no repeated stream).
    CHECK(std::memcmp(forward.data(), forward.data() + kFillBlockBytes, size_t(kFillBlockBytes)) != 0);
}

TEST_CASE("MXFP4 experts look quantised from real weights") {
    const fs::path dir = k3::test::scratch_path("mxfp4");
    make("tiny", dir, 3);
    const ModelConfig& c = preset("tiny");
    const auto shards = read_shards(dir);
    const auto where = locate_all(shards);
    std::set<int> codes_seen_layer1;
    for (int il = c.first_k_dense_replace; il < c.num_hidden_layers; ++il) {
        for (int ie = 0; ie < c.num_experts; ++ie) {
            const auto six = expert_tensors(c, il, ie);
            for (size_t w = 0; w < 6; w += 2) {
                INFO(six[w].name);
                const auto packed = tensor_bytes(shards, where.at(six[w].name));
                const auto scales = tensor_bytes(shards, where.at(six[w + 1].name));
                // No 32-element group is all +-0.
                for (size_t g = 0; g < packed.size(); g += 16) {
                    bool live = false;
                    for (size_t k = g; k < g + 16; ++k) live |= (uint8_t(packed[k]) & 0x77) != 0;
                    REQUIRE(live);
                }
                std::set<int> codes;
                for (char ch : packed) {
                    codes.insert(uint8_t(ch) & 0xf);
                    codes.insert(uint8_t(ch) >> 4);
                }
                CHECK(codes.size() == 16);  // every E2M1 code, +-0 and +-6 included
                std::set<int> scale_values(scales.begin(), scales.end());
                CHECK(scale_values.size() >= 5);
                CHECK(*scale_values.rbegin() - *scale_values.begin() >= 4);
                CHECK(*scale_values.begin() >= 100);  // no tiny or NaN scales
                CHECK(*scale_values.rbegin() < 140);
                if (il == 1) codes_seen_layer1.insert(codes.begin(), codes.end());
            }
        }
    }
    CHECK(codes_seen_layer1.size() == 16);

    // Dequantised w1 has the std of N(0, 1/in) within a factor of 1.5.
    const auto w1 = expert_tensors(c, 1, 0);
    const auto packed = tensor_bytes(shards, where.at(w1[0].name));
    const auto scales = tensor_bytes(shards, where.at(w1[1].name));
    const int64_t in = w1[0].shape[1] * 2;
    double ss = 0;
    for (size_t i = 0; i < packed.size() * 2; ++i) {
        const uint8_t b = uint8_t(packed[i / 2]);
        const int code = (i % 2 == 0) ? (b & 0xf) : (b >> 4);  // low nibble = even element
        const double v = kE2M1[code] * e8m0_to_float(uint8_t(scales[i / 32]));
        ss += v * v;
    }
    const double rms = std::sqrt(ss / double(packed.size() * 2));
    CHECK(rms > 1.0 / std::sqrt(double(in)) / 1.5);
    CHECK(rms < 1.0 / std::sqrt(double(in)) * 1.5);
}

TEST_CASE("trunk values: norm gains, A_log, router bias that reorders the top-k") {
    const fs::path dir = k3::test::scratch_path("trunk_values");
    make("tiny-wide", dir, 11);
    const ModelConfig& c = preset("tiny-wide");
    const auto shards = read_shards(dir);
    const auto where = locate_all(shards);
    auto f32 = [&](const std::string& name) {
        const auto raw = tensor_bytes(shards, where.at(name));
        std::vector<float> v(raw.size() / 4);
        std::memcpy(v.data(), raw.data(), raw.size());
        return v;
    };
    auto bf16 = [&](const std::string& name) {
        const auto raw = tensor_bytes(shards, where.at(name));
        std::vector<float> v(raw.size() / 2);
        for (size_t i = 0; i < v.size(); ++i) {
            uint16_t h;
            std::memcpy(&h, raw.data() + 2 * i, 2);
            v[i] = bf16_to_f32(h);
        }
        return v;
    };

    for (float g : bf16(layer_prefix(0) + "input_layernorm.weight")) {
        CHECK(g >= 0.79f);
        CHECK(g <= 1.21f);
    }
    // A_log: per head, spread over log(1)..log(16), zero padding past num_heads.
    const auto a_log = f32(layer_prefix(0) + "self_attn.A_log");
    REQUIRE(int(a_log.size()) == c.a_log_len());
    std::set<float> distinct;
    for (int h = 0; h < c.kda_num_heads; ++h) {
        CHECK(a_log[size_t(h)] >= 0.0f);
        CHECK(a_log[size_t(h)] <= std::log(16.0f) + 1e-5f);
        distinct.insert(a_log[size_t(h)]);
    }
    CHECK(int(distinct.size()) == c.kda_num_heads);
    CHECK(*distinct.rbegin() == doctest::Approx(std::log(16.0f)));
    for (size_t i = size_t(c.kda_num_heads); i < a_log.size(); ++i) CHECK(a_log[i] == 0.0f);

    // The bias reorders the top-k for a good share of random inputs (x ~ RMSNorm output).
    const int layer = 3;
    const auto gate = bf16(layer_prefix(layer) + "block_sparse_moe.gate.weight");
    const auto bias = f32(layer_prefix(layer) + "block_sparse_moe.gate.e_score_correction_bias");
    const int E = c.hidden_size, n = c.num_experts, k = c.num_experts_per_token;
    uint64_t state = 1;
    int changed = 0;
    const int trials = 200;
    for (int t = 0; t < trials; ++t) {
        std::vector<float> x(static_cast<size_t>(E));
        for (auto& v : x) {
            state = mix64(state);
            v = float(int64_t(state % 2001) - 1000) / 1000.0f * 1.732f;  // uniform, unit variance
        }
        std::vector<std::pair<float, int>> plain, biased;
        for (int e = 0; e < n; ++e) {
            double logit = 0;
            for (int i = 0; i < E; ++i) logit += double(gate[size_t(e) * size_t(E) + size_t(i)]) * x[size_t(i)];
            const float s = 1.0f / (1.0f + std::exp(-float(logit)));
            plain.push_back({-s, e});
            biased.push_back({-(s + bias[size_t(e)]), e});
        }
        std::sort(plain.begin(), plain.end());
        std::sort(biased.begin(), biased.end());
        std::set<int> a, b;
        for (int j = 0; j < k; ++j) {
            a.insert(plain[size_t(j)].second);
            b.insert(biased[size_t(j)].second);
        }
        changed += a != b;
    }
    CHECK(changed > trials / 4);
    CHECK(changed < trials);  // and the scores still matter

    // lm_head: the special slots' rows are quiet, so a normalised hidden state's argmax is text.
    const auto head = bf16(kLmHeadName);
    const int V = c.vocab_size;
    for (int t = 0; t < 50; ++t) {
        std::vector<float> x(static_cast<size_t>(E));
        for (auto& v : x) {
            state = mix64(state);
            v = float(int64_t(state % 2001) - 1000) / 1000.0f * 1.732f;
        }
        int best = 0;
        double best_logit = -1e30, special_max = -1e30;
        for (int id = 0; id < V; ++id) {
            double logit = 0;
            for (int i = 0; i < E; ++i) logit += double(head[size_t(id) * size_t(E) + size_t(i)]) * x[size_t(i)];
            if (logit > best_logit) best_logit = logit, best = id;
            if (id >= V - 256) special_max = std::max(special_max, std::abs(logit));
        }
        CHECK(best < V - 256);
        CHECK(best_logit > 1.5);         // text logits have std ~1 over 384 ranks
        CHECK(special_max < best_logit / 4);
    }
}

TEST_CASE("make-model command line: help, usage errors, refusing to overwrite") {
    CHECK(run_k3serve("make-model --help") == 0);
    const fs::path dir = k3::test::scratch_path("cli");
    CHECK(run_k3serve("make-model " + dir.string()) == 2);                                // no --preset
    CHECK(run_k3serve("make-model " + dir.string() + " --preset nope") == 2);             // unknown preset
    CHECK(run_k3serve("make-model " + dir.string() + " --preset tiny --shards 0") == 2);  // bad shard count
    CHECK(run_k3serve("make-model " + dir.string() + " --preset tiny --shards 99") == 2);
    CHECK(run_k3serve("make-model " + dir.string() + " --preset tiny --seed -1") == 2);
    CHECK(!fs::exists(dir / "config.json"));
    CHECK(run_k3serve("make-model " + dir.string() + " --preset tiny --seed 9 --shards 3") == 0);
    CHECK(fs::exists(dir / "model-00003-of-00003.safetensors"));
    CHECK(run_k3serve("make-model " + dir.string() + " --preset tiny") == 2);  // already holds a model
    CHECK(run_k3serve("make-model " + dir.string() + " --preset tiny --force") == 0);
    CHECK(!fs::exists(dir / "model-00003-of-00003.safetensors"));  // old shards removed
    CHECK(fs::exists(dir / "model-00002-of-00002.safetensors"));
    std::ofstream(dir / "notes.txt") << "user file";
    CHECK(run_k3serve("make-model " + dir.string() + " --preset tiny --force") == 0);  // other files kept
    CHECK(fs::exists(dir / "notes.txt"));
}

// A hand-built checkpoint of the tiny test shape (docs/model.md "Configuration")
// (moe_intermediate_size 64 so MXFP4 groups divide it), written tensor by tensor from the one
// tensor list with constant bytes, in the release layout or any edited one. Used by the checkpoint
// and verify tests without needing make-model.
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "weights/model_tensors.h"
#include "weights/safetensors_builder.h"

namespace k3::test {

using nlohmann::json;

inline json tiny_config() {
    return json{{"hidden_size", 128},          {"num_hidden_layers", 13},
                {"vocab_size", 256},           {"rms_norm_eps", 1e-5},
                {"tie_word_embeddings", false}, {"kda_num_heads", 4},
                {"kda_head_dim", 16},          {"short_conv_kernel_size", 4},
                {"gate_lower_bound", -5.0},    {"num_attention_heads", 4},
                {"q_lora_rank", 64},           {"kv_lora_rank", 32},
                {"qk_nope_head_dim", 24},      {"qk_rope_head_dim", 8},
                {"v_head_dim", 16},            {"num_experts", 8},
                {"num_experts_per_token", 2},  {"num_shared_experts", 2},
                {"routed_expert_hidden_size", 64}, {"moe_intermediate_size", 64},
                {"routed_scaling_factor", 1.0}, {"first_k_dense_replace", 1},
                {"intermediate_size", 96},     {"attn_res_block_size", 3},
                {"situ_beta", 4.0},            {"situ_linear_beta", 25.0},
                {"full_attn_layers", {4, 8, 12, 13}}};
}

struct Entry {
    std::string name;
    std::string dtype;
    std::vector<int64_t> shape;
    int shard;
};

// The release layout: layers 0..6 in shard 0, the rest and the model-level tensors in shard 1.
inline std::vector<Entry> release_entries(const ModelConfig& cfg) {
    std::vector<Entry> out;
    for (const TensorSpec& t : model_tensors(cfg))
        out.push_back({t.name, dtype_name(t.dtype), t.shape, (t.layer >= 0 && t.layer < 7) ? 0 : 1});
    return out;
}

// Writes config.json and the shards (entries in list order within each shard).
inline void write_checkpoint(const std::filesystem::path& dir, const std::vector<Entry>& entries,
                             const json& config = tiny_config()) {
    ShardBuilder::write_file(dir / "config.json", config.dump(2));
    ShardBuilder shards[2];
    for (const Entry& e : entries) shards[e.shard].add(e.name, e.dtype, e.shape, 0x11);
    shards[0].write(dir / "model-00001-of-00002.safetensors");
    shards[1].write(dir / "model-00002-of-00002.safetensors");
}

}  // namespace k3::test

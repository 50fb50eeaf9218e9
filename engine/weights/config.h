// ModelConfig: the model's shape, read from the checkpoint's config.json (nested release form or
// flat test form, docs/model.md "Configuration"). Field names mirror the config.json keys so
// parsing is 1:1 and greppable. load_config() refuses to guess: every missing required key is
// reported in one message, and anything k3serve does not implement is refused by name.
#pragma once
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "weights/vision_config.h"

namespace k3 {

enum class LayerKind { Kda, Mla };

struct ModelConfig {
    // ---- trunk ----
    int hidden_size = 0;
    int num_hidden_layers = 0;
    int vocab_size = 0;
    float rms_norm_eps = 0;            // every RMSNorm except the MLA low-rank norms
    int intermediate_size = 0;         // dense FFN width of layers [0, first_k_dense_replace)
    int first_k_dense_replace = 0;
    int attn_res_block_size = 0;
    int max_position_embeddings = 0;   // 0 when absent
    int bos_token_id = -1, eos_token_id = -1, pad_token_id = -1;

    // ---- gated NoPE MLA ----
    int num_attention_heads = 0;
    int num_key_value_heads = 0;
    int q_lora_rank = 0;
    int kv_lora_rank = 0;
    int qk_nope_head_dim = 0;
    int qk_rope_head_dim = 0;
    int v_head_dim = 0;
    bool mla_use_output_gate = true;

    // ---- KDA (text_config.linear_attn_config) ----
    int kda_num_heads = 0;             // linear_attn_config.num_heads (flat alias kda_num_heads)
    int kda_head_dim = 0;              // linear_attn_config.head_dim  (flat alias kda_head_dim)
    int short_conv_kernel_size = 0;
    float gate_lower_bound = 0;
    std::vector<int> full_attn_layers; // ONE-based, as in the file
    std::vector<int> kda_layers;       // ONE-based, as in the file (may be empty in flat configs)

    // ---- latent MoE ----
    int num_experts = 0;
    int num_experts_per_token = 0;
    int num_shared_experts = 0;
    int routed_expert_hidden_size = 0; // the latent width experts run in
    int moe_intermediate_size = 0;
    float routed_scaling_factor = 1.0f;
    bool moe_renormalize = true;
    bool latent_moe_use_norm = true;
    float activation_situ_beta = 0;          // flat alias situ_beta
    float activation_situ_linear_beta = 0;   // flat alias situ_linear_beta

    // ---- the image side (vision_config; present = false for a text-only checkpoint) ----
    VisionConfig vision;

    // ---- derived at load ----
    std::vector<LayerKind> layer_kind;       // zero-based, size num_hidden_layers

    bool is_mla(int il) const { return layer_kind[il] == LayerKind::Mla; }
    bool is_dense(int il) const { return il < first_k_dense_replace; }
    int kda_width() const { return kda_num_heads * kda_head_dim; }                   // P
    int mla_q_head_dim() const { return qk_nope_head_dim + qk_rope_head_dim; }         // 192 for K3
    int mla_kv_latent_dim() const { return kv_lora_rank + qk_rope_head_dim; }          // 576 for K3
    int shared_intermediate() const { return moe_intermediate_size * num_shared_experts; }
    int a_log_len() const {  // A_log is stored zero-padded up to a multiple of head_dim
        return (kda_num_heads + kda_head_dim - 1) / kda_head_dim * kda_head_dim;
    }
};

// The fixed eps of the MLA low-rank norms (q_a_layernorm, kv_a_layernorm): first-party code
// constructs them with the class default, not rms_norm_eps (docs/model.md "Numerics").
inline constexpr float kMlaLoraNormEps = 1e-6f;
// KDA q/k L2 norm: x * rsqrt(sum(x^2) + 1e-6).
inline constexpr float kKdaL2NormEps = 1e-6f;
// MXFP4 group size along the input dimension.
inline constexpr int kMxfp4Group = 32;

// Reads and validates `path` (a config.json). Throws k3::Error(ErrorKind::Config) naming the
// file and every problem found.
ModelConfig load_config(const std::filesystem::path& path);
// Same, from JSON text (`origin` names the source in messages).
ModelConfig parse_config(const std::string& json_text, const std::string& origin);

// One line: "hidden=… layers=… vocab=… | 24 MLA + 69 KDA | experts 896 top16 shared2 |
// latent=3584".
std::string describe(const ModelConfig& cfg);

}  // namespace k3

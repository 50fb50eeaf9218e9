// VisionConfig: the image side of a Kimi K3 checkpoint (the MoonViT-V2 tower, the 2x2 merge and
// the PatchMergerMLPV2 projector), read from config.json's vision_config and the top-level
// media_placeholder_token_id (docs/model.md "The vision config and tensors").
// Like the text config it refuses what k3serve does not implement, by key: K2.5's LayerNorm
// tower, biases, bicubic position tables, other projectors or merge kernels.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace k3 {

struct VisionConfig {
    bool present = false;          // config.json describes a vision tower this engine runs
    int patch_size = 0;            // 14
    int hidden = 0;                // vt_hidden_size (D, 1024 for K3)
    int intermediate = 0;          // vt_intermediate_size (4096)
    int heads = 0;                 // vt_num_attention_heads (12)
    int layers = 0;                // vt_num_hidden_layers (27)
    int qkv_hidden = 0;            // qkv_hidden_size (1536): heads * head_dim
    int pos_emb_height = 0;        // init_pos_emb_height (64)
    int pos_emb_width = 0;         // init_pos_emb_width (64)
    int merge_h = 0, merge_w = 0;  // merge_kernel_size ([2, 2])
    int mm_hidden = 0;             // mm_hidden_size (= hidden)
    int text_hidden = 0;           // text_hidden_size (= the LM's hidden_size)
    float projector_eps = 0;       // projector_ln_eps (1e-5)
    int media_placeholder_token_id = -1;  // top level (163605 = <|media_pad|>)

    int head_dim() const { return qkv_hidden / heads; }
    int merged_width() const { return merge_h * merge_w * hidden; }  // the projector's input, 4096
};

// The RMSNorm epsilon of the tower's norms: nn.RMSNorm(1024) without eps, which PyTorch >= 2.7
// resolves to float32's epsilon and 2.4-2.6 to bf16's (docs/model.md "The tower").
inline constexpr float kVisionEpsTorch27 = 1.1920928955078125e-7f;  // 2^-23, the default
inline constexpr float kVisionEpsTorch24 = 0.0078125f;              // 2^-7

// Reads root["vision_config"] (absent or without vt_hidden_size: no vision, present = false).
// Problems are appended to `problems`, each naming its key.
VisionConfig parse_vision_config(const nlohmann::json& root, int text_hidden, int vocab_size,
                                 std::vector<std::string>& problems);

// The vision_config object (and the placeholder id) as the release writes them.
void write_vision_config(const VisionConfig& v, nlohmann::ordered_json& root);

}  // namespace k3

// The make-model presets and the nested config.json writer. Shapes: `tiny` is the spec's
// section 1.3 test model (with two deliberate changes, see below), `tiny-wide` a second small
// shape whose every dimension differs from tiny's, `demo` a small model with a real vocabulary,
// `k3-mini` the benchmark shape (docs/model.md "Synthetic models").
#include "synthetic/model_presets.h"

#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>

#include "util/check.h"

namespace k3 {

namespace {

// The fields every preset shares with Kimi K3 (docs/model.md "Configuration").
ModelConfig k3_family_defaults() {
    ModelConfig c;
    c.rms_norm_eps = 1e-5f;
    c.gate_lower_bound = -5.0f;
    c.mla_use_output_gate = true;
    c.routed_scaling_factor = 1.0f;
    c.moe_renormalize = true;
    c.latent_moe_use_norm = true;
    c.activation_situ_beta = 4.0f;
    c.activation_situ_linear_beta = 25.0f;
    return c;
}

// Fills the derived and id fields: kda_layers (the complement of full_attn_layers, ONE-based),
// layer_kind, and the special-token ids.
void finish(ModelConfig& c) {
    c.num_key_value_heads = c.num_attention_heads;
    c.layer_kind.assign(size_t(c.num_hidden_layers), LayerKind::Kda);
    for (int one_based : c.full_attn_layers) c.layer_kind[size_t(one_based - 1)] = LayerKind::Mla;
    c.kda_layers.clear();
    for (int il = 0; il < c.num_hidden_layers; ++il)
        if (!c.is_mla(il)) c.kda_layers.push_back(il + 1);
    c.bos_token_id = synthetic_bos_id(c.vocab_size);
    c.eos_token_id = synthetic_eos_id(c.vocab_size);
    c.pad_token_id = synthetic_pad_id(c.vocab_size);
    K3_CHECK(c.routed_expert_hidden_size % kMxfp4Group == 0 && c.moe_intermediate_size % kMxfp4Group == 0,
             "preset expert widths must be multiples of the MXFP4 group");
}

// A vision tower for a preset (docs/model.md "The vision config and tensors" names the fields). The small presets get a
// small one (two blocks, width 64, two heads of 32, an 8x8 position table, so images of up to
// 112 px a side shrink the table and larger ones stretch it); k3-slice gets K3's real shapes
// (27 blocks of width 1024, 12 heads of 128, a 64x64 table, about 0.9 GB).
VisionConfig preset_vision(const ModelConfig& c, int hidden, int layers, int heads, int head_dim, int pos) {
    VisionConfig v;
    v.present = true;
    v.patch_size = 14;
    v.hidden = hidden;
    v.intermediate = 4 * hidden;
    v.heads = heads;
    v.layers = layers;
    v.qkv_hidden = heads * head_dim;
    v.pos_emb_height = v.pos_emb_width = pos;
    v.merge_h = v.merge_w = 2;
    v.mm_hidden = hidden;
    v.text_hidden = c.hidden_size;
    v.projector_eps = 1e-5f;
    v.media_placeholder_token_id = c.vocab_size - kSpecialSlots + 21;  // <|media_pad|>
    return v;
}

// The tiny test shape of docs/model.md "Configuration", except: vocab 512 instead of 256 (256
// byte ranks + 256 special slots, so the chat specials exist), and moe_intermediate_size 64 instead of 48 (MXFP4 needs the expert input
// widths to be multiples of 32; 48 is not).
ModelConfig tiny() {
    ModelConfig c = k3_family_defaults();
    c.hidden_size = 128;
    c.num_hidden_layers = 13;
    c.vocab_size = 512;
    c.intermediate_size = 96;
    c.first_k_dense_replace = 1;
    c.attn_res_block_size = 3;
    c.max_position_embeddings = 4096;
    c.num_attention_heads = 4;
    c.q_lora_rank = 64;
    c.kv_lora_rank = 32;
    c.qk_nope_head_dim = 24;
    c.qk_rope_head_dim = 8;
    c.v_head_dim = 16;
    c.kda_num_heads = 4;
    c.kda_head_dim = 16;
    c.short_conv_kernel_size = 4;
    c.full_attn_layers = {4, 8, 12, 13};
    c.num_experts = 8;
    c.num_experts_per_token = 2;
    c.num_shared_experts = 2;
    c.routed_expert_hidden_size = 64;
    c.moe_intermediate_size = 64;
    finish(c);
    c.vision = preset_vision(c, 64, 2, 2, 32, 8);
    return c;
}

// Every dimension differs from tiny's (so a kernel or binding that hard-codes one of tiny's
// widths fails here): odd head counts, conv kernel 3, two dense layers, and two complete
// attention-residual blocks of 4 plus one in progress (10 layers: boundaries 0, 4, 8).
ModelConfig tiny_wide() {
    ModelConfig c = k3_family_defaults();
    c.hidden_size = 160;
    c.num_hidden_layers = 10;
    c.vocab_size = 640;
    c.intermediate_size = 192;
    c.first_k_dense_replace = 2;
    c.attn_res_block_size = 4;
    c.max_position_embeddings = 4096;
    c.num_attention_heads = 3;
    c.q_lora_rank = 48;
    c.kv_lora_rank = 40;
    c.qk_nope_head_dim = 16;
    c.qk_rope_head_dim = 8;
    c.v_head_dim = 24;
    c.kda_num_heads = 5;
    c.kda_head_dim = 32;
    c.short_conv_kernel_size = 3;
    c.full_attn_layers = {3, 6, 9, 10};
    c.num_experts = 12;
    c.num_experts_per_token = 3;
    c.num_shared_experts = 1;
    c.routed_expert_hidden_size = 96;
    c.moe_intermediate_size = 64;
    finish(c);
    c.vision = preset_vision(c, 96, 3, 3, 32, 6);
    return c;
}

// Small enough to load and answer instantly on a laptop (about 16 MB), with a 4096-token
// vocabulary so text tokenizes into real multi-byte pieces.
ModelConfig demo() {
    ModelConfig c = k3_family_defaults();
    c.hidden_size = 256;
    c.num_hidden_layers = 8;
    c.vocab_size = 4096;
    c.intermediate_size = 512;
    c.first_k_dense_replace = 1;
    c.attn_res_block_size = 3;
    c.max_position_embeddings = 8192;
    c.num_attention_heads = 4;
    c.q_lora_rank = 128;
    c.kv_lora_rank = 64;
    c.qk_nope_head_dim = 32;
    c.qk_rope_head_dim = 16;
    c.v_head_dim = 32;
    c.kda_num_heads = 4;
    c.kda_head_dim = 64;
    c.short_conv_kernel_size = 4;
    c.full_attn_layers = {4, 7, 8};
    c.num_experts = 16;
    c.num_experts_per_token = 4;
    c.num_shared_experts = 2;
    c.routed_expert_hidden_size = 128;
    c.moe_intermediate_size = 128;
    finish(c);
    c.vision = preset_vision(c, 64, 2, 2, 32, 8);
    return c;
}

// What the coding agents need of a test model (docs/agents.md): a context their first prompts
// fit (12k-41k tokens, plus room to answer), the demo's real vocabulary so those prompts
// tokenize into ~2 bytes a token, and so few and so narrow layers that a 40k-token prompt is
// evaluated in seconds on two cores: one dense KDA layer and one MLA MoE layer (the last layer
// is full attention, as in K3), hidden 64.
ModelConfig agent() {
    ModelConfig c = k3_family_defaults();
    c.hidden_size = 64;
    c.num_hidden_layers = 2;
    c.vocab_size = 4096;
    c.intermediate_size = 64;
    c.first_k_dense_replace = 1;
    c.attn_res_block_size = 2;
    c.max_position_embeddings = 65536;
    c.num_attention_heads = 2;
    c.q_lora_rank = 32;
    c.kv_lora_rank = 32;
    c.qk_nope_head_dim = 16;
    c.qk_rope_head_dim = 8;
    c.v_head_dim = 16;
    c.kda_num_heads = 2;
    c.kda_head_dim = 16;
    c.short_conv_kernel_size = 4;
    c.full_attn_layers = {2};
    c.num_experts = 4;
    c.num_experts_per_token = 2;
    c.num_shared_experts = 1;
    c.routed_expert_hidden_size = 32;
    c.moe_intermediate_size = 32;
    finish(c);
    c.vision = preset_vision(c, 64, 2, 2, 32, 8);
    return c;
}

// The agent preset's lean toward ending (weights.h, AnswerEnding), in logits against ~4500 as
// the softmax's sum over the ordinary tokens at temperature 1 (4096 logits of std ~0.5): a
// free-text step ends the answer with p ~0.93 (so a coding agent's turn finishes after the tool
// result comes back); where the grammar holds <|end_of_msg|> off, <|close|> is taken with p ~0.4
// (a string argument or reasoning closes within a few tokens) and '"' with p ~0.2 (a JSON string
// inside an argument closes).
AnswerEnding agent_ending() { return {.on = true, .end_of_msg = 11.0f, .close = 8.0f, .quote = 7.0f}; }

// The benchmark shape (docs/model.md "Synthetic models"): exactly this shape, so that every engine is
// measured on the same bytes.
ModelConfig k3_mini() {
    ModelConfig c = k3_family_defaults();
    c.hidden_size = 2048;
    c.num_hidden_layers = 24;
    c.vocab_size = 32768;
    c.intermediate_size = 8192;
    c.first_k_dense_replace = 1;
    c.attn_res_block_size = 6;
    c.max_position_embeddings = 32768;
    c.num_attention_heads = 16;
    c.q_lora_rank = 512;
    c.kv_lora_rank = 256;
    c.qk_nope_head_dim = 128;
    c.qk_rope_head_dim = 64;
    c.v_head_dim = 128;
    c.kda_num_heads = 16;
    c.kda_head_dim = 128;
    c.short_conv_kernel_size = 4;
    c.full_attn_layers = {4, 8, 12, 16, 20, 24};
    c.num_experts = 256;
    c.num_experts_per_token = 16;
    c.num_shared_experts = 2;
    c.routed_expert_hidden_size = 1024;
    c.moe_intermediate_size = 768;
    finish(c);
    c.vision = preset_vision(c, 256, 4, 4, 64, 16);
    return c;
}

// Kimi K3's real layer dimensions (hidden 7168, 96 KDA heads of 128, MLA 96 heads with
// q_lora 1536 / kv_lora 512, latent experts 3584 -> 3072 of 17,547,264 bytes, dense
// intermediate 33792) with few layers and experts and a cut vocabulary, so reads and kernels run
// at the real sizes within a small disk (about 5.6 GB): the dense layer 0, a KDA MoE layer and an
// MLA MoE layer (the last layer is full attention, as in K3), 32 experts each, top-16.
ModelConfig k3_slice() {
    ModelConfig c = k3_family_defaults();
    c.hidden_size = 7168;
    c.num_hidden_layers = 3;
    c.vocab_size = 16384;
    c.intermediate_size = 33792;
    c.first_k_dense_replace = 1;
    c.attn_res_block_size = 12;
    c.max_position_embeddings = 32768;
    c.num_attention_heads = 96;
    c.q_lora_rank = 1536;
    c.kv_lora_rank = 512;
    c.qk_nope_head_dim = 128;
    c.qk_rope_head_dim = 64;
    c.v_head_dim = 128;
    c.kda_num_heads = 96;
    c.kda_head_dim = 128;
    c.short_conv_kernel_size = 4;
    c.full_attn_layers = {3};
    c.num_experts = 32;
    c.num_experts_per_token = 16;
    c.num_shared_experts = 2;
    c.routed_expert_hidden_size = 3584;
    c.moe_intermediate_size = 3072;
    finish(c);
    c.vision = preset_vision(c, 1024, 27, 12, 128, 64);
    return c;
}

}  // namespace

const std::vector<ModelPreset>& model_presets() {
    static const std::vector<ModelPreset> presets = {
        {"tiny", "the tiny test shape: 13 layers, hidden 128, 8 experts top-2, vocab 512", tiny(), 2, {}},
        {"tiny-wide", "second small shape: 10 layers, hidden 160, 12 experts top-3, 2 dense layers", tiny_wide(), 3, {}},
        {"demo", "serves instantly: 8 layers, hidden 256, 16 experts top-4, vocab 4096", demo(), 2, {}},
        {"agent",
         "coding-agent test bed: 64k context, 2 layers, hidden 64, vocab 4096 (prefills 40k tokens in seconds); "
         "answers end within a few tokens",
         agent(), 1, agent_ending()},
        {"k3-mini", "the benchmark shape: 24 layers, hidden 2048, 256 experts (~9.3 GB)",
         k3_mini(), 4, {}},
        {"k3-slice", "Kimi K3's real layer sizes, 3 layers, 32 experts top-16, vocab 16384 (~5.6 GB)", k3_slice(), 2, {}},
    };
    return presets;
}

const ModelPreset* find_preset(const std::string& name) {
    for (const auto& p : model_presets())
        if (p.name == name) return &p;
    return nullptr;
}

namespace {

// A float config value as its shortest decimal (1e-5 rather than 9.999999747378752e-06).
double decimal(float f) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.7g", double(f));
    return std::strtod(buf, nullptr);
}

}  // namespace

std::string release_config_json(const ModelConfig& c) {
    using Json = nlohmann::ordered_json;

    Json linear = {
        {"num_heads", c.kda_num_heads},
        {"head_dim", c.kda_head_dim},
        {"short_conv_kernel_size", c.short_conv_kernel_size},
        {"gate_lower_bound", decimal(c.gate_lower_bound)},
        {"use_full_rank_gate", true},
        {"full_attn_layers", c.full_attn_layers},
        {"kda_layers", c.kda_layers},
    };

    Json text = {
        {"architectures", {"KimiLinearForCausalLM"}},
        {"model_type", "kimi_linear"},
        {"dtype", "bfloat16"},
        {"hidden_size", c.hidden_size},
        {"num_hidden_layers", c.num_hidden_layers},
        {"vocab_size", c.vocab_size},
        {"rms_norm_eps", decimal(c.rms_norm_eps)},
        {"intermediate_size", c.intermediate_size},
        {"first_k_dense_replace", c.first_k_dense_replace},
        {"moe_layer_freq", 1},
        {"max_position_embeddings", c.max_position_embeddings},
        {"num_attention_heads", c.num_attention_heads},
        {"num_key_value_heads", c.num_key_value_heads},
        {"q_lora_rank", c.q_lora_rank},
        {"kv_lora_rank", c.kv_lora_rank},
        {"qk_nope_head_dim", c.qk_nope_head_dim},
        {"qk_rope_head_dim", c.qk_rope_head_dim},
        {"v_head_dim", c.v_head_dim},
        {"mla_use_nope", true},
        {"mla_use_output_gate", c.mla_use_output_gate},
        {"linear_attn_config", linear},
        {"num_experts", c.num_experts},
        {"num_experts_per_token", c.num_experts_per_token},
        {"num_shared_experts", c.num_shared_experts},
        {"routed_expert_hidden_size", c.routed_expert_hidden_size},
        {"moe_intermediate_size", c.moe_intermediate_size},
        {"routed_scaling_factor", decimal(c.routed_scaling_factor)},
        {"moe_renormalize", c.moe_renormalize},
        {"latent_moe_use_norm", c.latent_moe_use_norm},
        {"moe_router_activation_func", "sigmoid"},
        {"use_grouped_topk", true},
        {"num_expert_group", 1},
        {"topk_group", 1},
        {"topk_method", "noaux_tc"},
        {"hidden_act", "situ"},
        {"activation_situ_beta", decimal(c.activation_situ_beta)},
        {"activation_situ_linear_beta", decimal(c.activation_situ_linear_beta)},
        {"attn_res_block_size", c.attn_res_block_size},
        {"num_nextn_predict_layers", 0},
        {"tie_word_embeddings", false},
        {"bos_token_id", c.bos_token_id},
        {"eos_token_id", c.eos_token_id},
        {"pad_token_id", c.pad_token_id},
        {"use_cache", true},
    };

    // compressed-tensors description of the MXFP4 routed experts. Informational (readers go by the
    // presence of .weight_packed, docs/model.md "Configuration"); unlike the release's, this ignore
    // list is right.
    Json quant = {
        {"quant_method", "compressed-tensors"},
        {"format", "mxfp4-pack-quantized"},
        {"config_groups",
         {{"group_0",
           {{"targets", {"Linear"}},
            {"weights",
             {{"num_bits", 4},
              {"type", "float"},
              {"group_size", kMxfp4Group},
              {"strategy", "group"},
              {"symmetric", true},
              {"dynamic", false}}},
            {"input_activations", nullptr},
            {"output_activations", nullptr}}}}},
        {"ignore",
         {"language_model.lm_head", "re:.*self_attn.*", "re:.*mlp\\..*", "re:.*shared_experts.*",
          "re:.*block_sparse_moe\\.gate$", "re:.*routed_expert_(down|up)_proj$", "re:vision_tower.*",
          "re:mm_projector.*"}},
    };

    Json root = {
        {"architectures", {"KimiK3ForConditionalGeneration"}},
        {"model_type", "kimi_k3"},
        {"dtype", "bfloat16"},
        {"media_placeholder_token_id", c.vocab_size - kSpecialSlots + 21},  // <|media_pad|>
        {"tie_word_embeddings", false},
        {"text_config", text},
        {"quantization_config", quant},
    };
    if (c.vision.present) write_vision_config(c.vision, root);
    return root.dump(2) + "\n";
}

}  // namespace k3

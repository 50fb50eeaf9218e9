// The layer tensor table (layer_tensors.h). Shapes are [out][in] row-major; E hidden, P the KDA
// width (heads x head_dim), D the KDA head dim, K the short-conv taps, H attention heads,
// F the dense FFN width, L the expert latent width, SI the shared experts' width.
#include "weights/layer_tensors.h"

#include <iterator>

namespace k3 {

namespace {

// One shape, written with the config's widths as int64 (products of widths overflow int).
#define K3_SHAPE(...)                                                                                  \
    [](const ModelConfig& c) -> std::vector<int64_t> {                                                 \
        [[maybe_unused]] const int64_t E = c.hidden_size, P = c.kda_width(), D = c.kda_head_dim,       \
                                       K = c.short_conv_kernel_size, H = c.num_attention_heads,        \
                                       F = c.intermediate_size, L = c.routed_expert_hidden_size,       \
                                       SI = c.shared_intermediate();                                   \
        return {__VA_ARGS__};                                                                          \
    }
#define K3_MATRIX(field) TensorUse::Matrix, [](LayerWeights& w) { return &w.field; }, nullptr
#define K3_VECTOR(field) TensorUse::Vector, nullptr, [](LayerWeights& w) { return &w.field; }
#define K3_SCALES_ABOVE TensorUse::ScalesAbove, nullptr, nullptr
#define K3_EXP_PER_HEAD(field) TensorUse::ExpPerHead, nullptr, [](LayerWeights& w) { return &w.field; }

using enum LayerPart;
using enum DType;

constexpr LayerTensor kLayerTensors[] = {
    // Norms and the attention-residual scoring vectors (docs/model.md "Layer stack"): fold = norm ⊙
    // proj.
    {"input_layernorm.weight", All, BF16, K3_SHAPE(E), K3_VECTOR(input_norm)},
    {"post_attention_layernorm.weight", All, BF16, K3_SHAPE(E), K3_VECTOR(post_norm)},
    {"self_attention_res_norm.weight", All, BF16, K3_SHAPE(E), K3_VECTOR(fold_attn)},
    {"self_attention_res_proj.weight", All, BF16, K3_SHAPE(1, E), K3_SCALES_ABOVE},
    {"mlp_res_norm.weight", All, BF16, K3_SHAPE(E), K3_VECTOR(fold_mlp)},
    {"mlp_res_proj.weight", All, BF16, K3_SHAPE(1, E), K3_SCALES_ABOVE},

    // Gated NoPE MLA (docs/model.md "Gated NoPE MLA").
    {"self_attn.q_a_proj.weight", Mla, BF16, K3_SHAPE(c.q_lora_rank, E), K3_MATRIX(mla.q_a)},
    {"self_attn.q_a_layernorm.weight", Mla, BF16, K3_SHAPE(c.q_lora_rank), K3_VECTOR(mla.q_a_norm)},
    {"self_attn.q_b_proj.weight", Mla, BF16, K3_SHAPE(H * c.mla_q_head_dim(), c.q_lora_rank), K3_MATRIX(mla.q_b)},
    {"self_attn.kv_a_proj_with_mqa.weight", Mla, BF16, K3_SHAPE(c.mla_kv_latent_dim(), E), K3_MATRIX(mla.kv_a)},
    {"self_attn.kv_a_layernorm.weight", Mla, BF16, K3_SHAPE(c.kv_lora_rank), K3_VECTOR(mla.kv_a_norm)},
    {"self_attn.kv_b_proj.weight", Mla, BF16, K3_SHAPE(H * (c.qk_nope_head_dim + c.v_head_dim), c.kv_lora_rank),
     K3_MATRIX(mla.kv_b)},
    {"self_attn.o_proj.weight", Mla, BF16, K3_SHAPE(E, H * c.v_head_dim), K3_MATRIX(mla.o)},
    {"self_attn.g_proj.weight", Mla, BF16, K3_SHAPE(H * c.v_head_dim, E), K3_MATRIX(mla.g)},

    // Kimi Delta Attention (docs/model.md "Kimi Delta Attention").
    {"self_attn.q_proj.weight", Kda, BF16, K3_SHAPE(P, E), K3_MATRIX(kda.q)},
    {"self_attn.k_proj.weight", Kda, BF16, K3_SHAPE(P, E), K3_MATRIX(kda.k)},
    {"self_attn.v_proj.weight", Kda, BF16, K3_SHAPE(P, E), K3_MATRIX(kda.v)},
    {"self_attn.q_conv1d.weight", Kda, F32, K3_SHAPE(P, 1, K), K3_VECTOR(kda.conv_q)},
    {"self_attn.k_conv1d.weight", Kda, F32, K3_SHAPE(P, 1, K), K3_VECTOR(kda.conv_k)},
    {"self_attn.v_conv1d.weight", Kda, F32, K3_SHAPE(P, 1, K), K3_VECTOR(kda.conv_v)},
    {"self_attn.A_log", Kda, F32, K3_SHAPE(c.a_log_len()), K3_EXP_PER_HEAD(kda.decay_rate)},
    {"self_attn.dt_bias", Kda, F32, K3_SHAPE(P), K3_VECTOR(kda.dt_bias)},
    {"self_attn.f_a_proj.weight", Kda, BF16, K3_SHAPE(D, E), K3_MATRIX(kda.f_a)},
    {"self_attn.f_b_proj.weight", Kda, BF16, K3_SHAPE(P, D), K3_MATRIX(kda.f_b)},
    {"self_attn.b_proj.weight", Kda, BF16, K3_SHAPE(c.kda_num_heads, E), K3_MATRIX(kda.b)},
    {"self_attn.g_proj.weight", Kda, BF16, K3_SHAPE(P, E), K3_MATRIX(kda.g)},
    {"self_attn.o_norm.weight", Kda, F32, K3_SHAPE(D), K3_VECTOR(kda.o_norm)},
    {"self_attn.o_proj.weight", Kda, BF16, K3_SHAPE(E, P), K3_MATRIX(kda.o)},

    // Dense SiTU-GLU MLP.
    {"mlp.gate_proj.weight", Dense, BF16, K3_SHAPE(F, E), K3_MATRIX(dense.gate)},
    {"mlp.up_proj.weight", Dense, BF16, K3_SHAPE(F, E), K3_MATRIX(dense.up)},
    {"mlp.down_proj.weight", Dense, BF16, K3_SHAPE(E, F), K3_MATRIX(dense.down)},

    // Latent MoE (docs/model.md "Latent MoE"): router, the latent projections, the shared experts.
    // The routed experts are not layer trunk tensors (model_tensors.h, expert_tensors).
    {"block_sparse_moe.gate.weight", Moe, BF16, K3_SHAPE(c.num_experts, E), K3_MATRIX(moe.router)},
    {"block_sparse_moe.gate.e_score_correction_bias", Moe, F32, K3_SHAPE(c.num_experts), K3_VECTOR(moe.router_bias)},
    {"block_sparse_moe.routed_expert_down_proj.weight", Moe, BF16, K3_SHAPE(L, E), K3_MATRIX(moe.latent_down)},
    {"block_sparse_moe.routed_expert_norm.weight", Moe, BF16, K3_SHAPE(L), K3_VECTOR(moe.latent_norm)},
    {"block_sparse_moe.routed_expert_up_proj.weight", Moe, BF16, K3_SHAPE(E, L), K3_MATRIX(moe.latent_up)},
    {"block_sparse_moe.shared_experts.gate_proj.weight", SharedExpert, BF16, K3_SHAPE(SI, E), K3_MATRIX(moe.shared_gate)},
    {"block_sparse_moe.shared_experts.up_proj.weight", SharedExpert, BF16, K3_SHAPE(SI, E), K3_MATRIX(moe.shared_up)},
    {"block_sparse_moe.shared_experts.down_proj.weight", SharedExpert, BF16, K3_SHAPE(E, SI), K3_MATRIX(moe.shared_down)},
};

// A folded scale multiplies into the vector just above it, in the same layers.
constexpr bool scales_follow_their_vectors() {
    for (size_t r = 0; r < std::size(kLayerTensors); ++r)
        if (kLayerTensors[r].use == TensorUse::ScalesAbove &&
            (r == 0 || kLayerTensors[r - 1].use != TensorUse::Vector || kLayerTensors[r - 1].part != kLayerTensors[r].part))
            return false;
    return true;
}
static_assert(scales_follow_their_vectors(), "a ScalesAbove row must follow the Vector row it scales");

#undef K3_SHAPE
#undef K3_MATRIX
#undef K3_VECTOR
#undef K3_SCALES_ABOVE
#undef K3_EXP_PER_HEAD

}  // namespace

std::span<const LayerTensor> layer_tensor_table() { return kLayerTensors; }

bool layer_holds(const ModelConfig& c, int il, LayerPart part) {
    switch (part) {
        case LayerPart::All: return true;
        case LayerPart::Kda: return !c.is_mla(il);
        case LayerPart::Mla: return c.is_mla(il);
        case LayerPart::Dense: return c.is_dense(il);
        case LayerPart::Moe:
        case LayerPart::SharedExpert: return !c.is_dense(il);
    }
    return false;
}

bool layer_binds(const ModelConfig& c, int il, LayerPart part) {
    if (part == LayerPart::SharedExpert && c.shared_intermediate() <= 0) return false;
    return layer_holds(c, il, part);
}

}  // namespace k3

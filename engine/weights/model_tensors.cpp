// The tensor table (spec section 3.2). Shapes are [out][in] row-major; MXFP4 tensors are
// [rows][in/2] packed bytes and [rows][in/32] E8M0 scales.
#include "weights/model_tensors.h"

#include "util/check.h"

namespace k3 {

const char* dtype_name(DType dt) {
    switch (dt) {
        case DType::BF16: return "BF16";
        case DType::F16: return "F16";
        case DType::F32: return "F32";
        case DType::U8: return "U8";
    }
    return "?";
}

int dtype_size(DType dt) {
    switch (dt) {
        case DType::BF16:
        case DType::F16: return 2;
        case DType::F32: return 4;
        case DType::U8: return 1;
    }
    return 0;
}

int64_t TensorSpec::numel() const {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return n;
}

std::string shape_string(const std::vector<int64_t>& shape) {
    std::string s = "[";
    for (size_t i = 0; i < shape.size(); ++i) {
        if (i) s += ", ";
        s += std::to_string(shape[i]);
    }
    return s + "]";
}

std::string layer_prefix(int il) { return kModelPrefix + "layers." + std::to_string(il) + "."; }

std::string expert_prefix(int il, int ie) {
    return layer_prefix(il) + "block_sparse_moe.experts." + std::to_string(ie) + ".";
}

namespace {

void add(std::vector<TensorSpec>& out, std::string name, DType dt, std::vector<int64_t> shape, TensorRole role,
         int il = -1, int ie = -1) {
    out.push_back(TensorSpec{std::move(name), dt, std::move(shape), role, il, ie});
}

}  // namespace

std::vector<TensorSpec> layer_trunk_tensors(const ModelConfig& c, int il) {
    std::vector<TensorSpec> t;
    const std::string p = layer_prefix(il);
    const int64_t E = c.hidden_size;
    auto trunk = [&](const std::string& name, DType dt, std::vector<int64_t> shape) {
        add(t, p + name, dt, std::move(shape), TensorRole::LayerTrunk, il);
    };

    // Norms and attention-residual vectors.
    trunk("input_layernorm.weight", DType::BF16, {E});
    trunk("post_attention_layernorm.weight", DType::BF16, {E});
    trunk("self_attention_res_norm.weight", DType::BF16, {E});
    trunk("self_attention_res_proj.weight", DType::BF16, {1, E});
    trunk("mlp_res_norm.weight", DType::BF16, {E});
    trunk("mlp_res_proj.weight", DType::BF16, {1, E});

    if (c.is_mla(il)) {
        const int64_t H = c.num_attention_heads;
        trunk("self_attn.q_a_proj.weight", DType::BF16, {c.q_lora_rank, E});
        trunk("self_attn.q_a_layernorm.weight", DType::BF16, {c.q_lora_rank});
        trunk("self_attn.q_b_proj.weight", DType::BF16, {H * c.mla_q_head_dim(), c.q_lora_rank});
        trunk("self_attn.kv_a_proj_with_mqa.weight", DType::BF16, {c.mla_kv_latent_dim(), E});
        trunk("self_attn.kv_a_layernorm.weight", DType::BF16, {c.kv_lora_rank});
        trunk("self_attn.kv_b_proj.weight", DType::BF16, {H * (c.qk_nope_head_dim + c.v_head_dim), c.kv_lora_rank});
        trunk("self_attn.o_proj.weight", DType::BF16, {E, H * c.v_head_dim});
        trunk("self_attn.g_proj.weight", DType::BF16, {H * c.v_head_dim, E});
    } else {
        const int64_t P = c.kda_width(), D = c.kda_head_dim, K = c.short_conv_kernel_size;
        trunk("self_attn.q_proj.weight", DType::BF16, {P, E});
        trunk("self_attn.k_proj.weight", DType::BF16, {P, E});
        trunk("self_attn.v_proj.weight", DType::BF16, {P, E});
        trunk("self_attn.q_conv1d.weight", DType::F32, {P, 1, K});
        trunk("self_attn.k_conv1d.weight", DType::F32, {P, 1, K});
        trunk("self_attn.v_conv1d.weight", DType::F32, {P, 1, K});
        trunk("self_attn.A_log", DType::F32, {c.a_log_len()});
        trunk("self_attn.dt_bias", DType::F32, {P});
        trunk("self_attn.f_a_proj.weight", DType::BF16, {D, E});
        trunk("self_attn.f_b_proj.weight", DType::BF16, {P, D});
        trunk("self_attn.b_proj.weight", DType::BF16, {c.kda_num_heads, E});
        trunk("self_attn.g_proj.weight", DType::BF16, {P, E});
        trunk("self_attn.o_norm.weight", DType::F32, {D});
        trunk("self_attn.o_proj.weight", DType::BF16, {E, P});
    }

    if (c.is_dense(il)) {
        const int64_t F = c.intermediate_size;
        trunk("mlp.gate_proj.weight", DType::BF16, {F, E});
        trunk("mlp.up_proj.weight", DType::BF16, {F, E});
        trunk("mlp.down_proj.weight", DType::BF16, {E, F});
    } else {
        const int64_t L = c.routed_expert_hidden_size, SI = c.shared_intermediate();
        trunk("block_sparse_moe.gate.weight", DType::BF16, {c.num_experts, E});
        trunk("block_sparse_moe.gate.e_score_correction_bias", DType::F32, {c.num_experts});
        trunk("block_sparse_moe.routed_expert_down_proj.weight", DType::BF16, {L, E});
        trunk("block_sparse_moe.routed_expert_norm.weight", DType::BF16, {L});
        trunk("block_sparse_moe.routed_expert_up_proj.weight", DType::BF16, {E, L});
        trunk("block_sparse_moe.shared_experts.gate_proj.weight", DType::BF16, {SI, E});
        trunk("block_sparse_moe.shared_experts.up_proj.weight", DType::BF16, {SI, E});
        trunk("block_sparse_moe.shared_experts.down_proj.weight", DType::BF16, {E, SI});
    }
    return t;
}

std::vector<TensorSpec> expert_tensors(const ModelConfig& c, int il, int ie) {
    K3_CHECK(!c.is_dense(il), "layer %d is dense and has no experts", il);
    std::vector<TensorSpec> t;
    const std::string p = expert_prefix(il, ie);
    const int64_t L = c.routed_expert_hidden_size, I = c.moe_intermediate_size;
    auto mx = [&](const std::string& w, int64_t rows, int64_t in) {
        add(t, p + w + ".weight_packed", DType::U8, {rows, in / 2}, TensorRole::ExpertPacked, il, ie);
        add(t, p + w + ".weight_scale", DType::U8, {rows, in / kMxfp4Group}, TensorRole::ExpertScale, il, ie);
    };
    mx("w1", I, L);  // gate: latent -> intermediate
    mx("w2", L, I);  // down: intermediate -> latent
    mx("w3", I, L);  // up:   latent -> intermediate
    return t;
}

int64_t expert_bytes(const ModelConfig& c) {
    const int64_t L = c.routed_expert_hidden_size, I = c.moe_intermediate_size;
    auto one = [](int64_t rows, int64_t in) { return rows * (in / 2) + rows * (in / kMxfp4Group); };
    return 2 * one(I, L) + one(L, I);
}

std::vector<TensorSpec> model_tensors(const ModelConfig& c) {
    std::vector<TensorSpec> all;
    for (int il = 0; il < c.num_hidden_layers; ++il) {
        for (auto& t : layer_trunk_tensors(c, il)) all.push_back(std::move(t));
        if (c.is_dense(il)) continue;
        for (int ie = 0; ie < c.num_experts; ++ie)
            for (auto& t : expert_tensors(c, il, ie)) all.push_back(std::move(t));
    }
    const int64_t E = c.hidden_size, V = c.vocab_size;
    add(all, kModelPrefix + "embed_tokens.weight", DType::BF16, {V, E}, TensorRole::Embed);
    add(all, kModelPrefix + "norm.weight", DType::BF16, {E}, TensorRole::ModelNorm);
    add(all, kModelPrefix + "output_attn_res_norm.weight", DType::BF16, {E}, TensorRole::ModelNorm);
    add(all, kModelPrefix + "output_attn_res_proj.weight", DType::BF16, {1, E}, TensorRole::ModelNorm);
    add(all, kLmHeadName, DType::BF16, {V, E}, TensorRole::LmHead);
    return all;
}

}  // namespace k3

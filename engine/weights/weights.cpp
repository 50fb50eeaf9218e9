// Weight binding (weights.h): tensor names come from the one tensor list's spelling via
// layer_prefix(); offsets from the checkpoint's layer runs.
#include "weights/weights.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/kernels.h"
#include "k3/error.h"

namespace k3 {

void widen_to_f32(const uint8_t* src, DType dt, int64_t n, float* dst) {
    switch (dt) {
        case DType::F32: std::memcpy(dst, src, size_t(n) * 4); break;
        case DType::BF16:
            for (int64_t i = 0; i < n; ++i) {
                uint16_t h;
                std::memcpy(&h, src + 2 * i, 2);
                dst[i] = bf16_to_f32(h);
            }
            break;
        case DType::F16:
            for (int64_t i = 0; i < n; ++i) {
                uint16_t h;
                std::memcpy(&h, src + 2 * i, 2);
                // IEEE half -> float, exact (subnormals, inf and NaN included).
                const uint32_t sign = uint32_t(h >> 15) << 31;
                const int exp = (h >> 10) & 0x1f;
                const uint32_t man = h & 0x3ff;
                float v;
                if (exp == 0) v = std::ldexp(float(man), -24);
                else if (exp == 31) v = man ? NAN : INFINITY;
                else v = std::ldexp(float(man | 0x400), exp - 25);
                uint32_t bits;
                std::memcpy(&bits, &v, 4);
                bits |= sign;
                std::memcpy(dst + i, &bits, 4);
            }
            break;
        case DType::U8:
            for (int64_t i = 0; i < n; ++i) dst[i] = float(src[i]);
            break;
    }
}

namespace {

class Binder {
public:
    Binder(const Checkpoint& ckpt, int il) : ckpt_(ckpt), il_(il), prefix_(layer_prefix(il)) {}

    int64_t matrix(const std::string& suffix) {
        const std::string name = prefix_ + suffix;
        const TensorInfo* t = find(name);
        if (t->dtype != DType::BF16)
            throw Error(ErrorKind::Checkpoint, name + ": expected dtype BF16 for a matrix, got " + dtype_name(t->dtype));
        const int64_t off = ckpt_.offset_in_layer(name, il_);
        if (off % 2 != 0)
            throw Error(ErrorKind::Checkpoint,
                        name + ": bf16 data at odd offset " + std::to_string(off) + " inside layer " +
                            std::to_string(il_) + "'s run; it cannot be used in place");
        return off;
    }
    SmallTensor vector(const std::string& suffix) {
        const std::string name = prefix_ + suffix;
        const TensorInfo* t = find(name);
        int64_t n = 1;
        for (int64_t d : t->shape) n *= d;
        return SmallTensor{ckpt_.offset_in_layer(name, il_), t->dtype, n};
    }

private:
    const TensorInfo* find(const std::string& name) {
        const TensorInfo* t = ckpt_.directory.find(name);
        if (!t) throw Error(ErrorKind::Checkpoint, "tensor " + name + " is missing from " + ckpt_.dir.string());
        return t;
    }
    const Checkpoint& ckpt_;
    int il_;
    std::string prefix_;
};

}  // namespace

std::vector<LayerLayout> layout_layers(const Checkpoint& ckpt) {
    const ModelConfig& c = ckpt.config;
    std::vector<LayerLayout> out(size_t(c.num_hidden_layers));
    for (int il = 0; il < c.num_hidden_layers; ++il) {
        LayerLayout& L = out[size_t(il)];
        Binder b(ckpt, il);
        L.il = il;
        L.run_bytes = ckpt.layer_runs[size_t(il)].nbytes;
        L.input_norm = b.vector("input_layernorm.weight");
        L.post_norm = b.vector("post_attention_layernorm.weight");
        L.attn_res_norm = b.vector("self_attention_res_norm.weight");
        L.attn_res_proj = b.vector("self_attention_res_proj.weight");
        L.mlp_res_norm = b.vector("mlp_res_norm.weight");
        L.mlp_res_proj = b.vector("mlp_res_proj.weight");
        if (c.is_mla(il)) {
            L.q_a = b.matrix("self_attn.q_a_proj.weight");
            L.q_a_norm = b.vector("self_attn.q_a_layernorm.weight");
            L.q_b = b.matrix("self_attn.q_b_proj.weight");
            L.kv_a = b.matrix("self_attn.kv_a_proj_with_mqa.weight");
            L.kv_a_norm = b.vector("self_attn.kv_a_layernorm.weight");
            L.kv_b = b.matrix("self_attn.kv_b_proj.weight");
            L.o = b.matrix("self_attn.o_proj.weight");
            L.g = b.matrix("self_attn.g_proj.weight");
        } else {
            L.q = b.matrix("self_attn.q_proj.weight");
            L.k = b.matrix("self_attn.k_proj.weight");
            L.v = b.matrix("self_attn.v_proj.weight");
            L.conv_q = b.vector("self_attn.q_conv1d.weight");
            L.conv_k = b.vector("self_attn.k_conv1d.weight");
            L.conv_v = b.vector("self_attn.v_conv1d.weight");
            L.a_log = b.vector("self_attn.A_log");
            L.dt_bias = b.vector("self_attn.dt_bias");
            L.f_a = b.matrix("self_attn.f_a_proj.weight");
            L.f_b = b.matrix("self_attn.f_b_proj.weight");
            L.b = b.matrix("self_attn.b_proj.weight");
            L.g = b.matrix("self_attn.g_proj.weight");
            L.o_norm = b.vector("self_attn.o_norm.weight");
            L.o = b.matrix("self_attn.o_proj.weight");
        }
        if (c.is_dense(il)) {
            L.dense_gate = b.matrix("mlp.gate_proj.weight");
            L.dense_up = b.matrix("mlp.up_proj.weight");
            L.dense_down = b.matrix("mlp.down_proj.weight");
        } else {
            L.router = b.matrix("block_sparse_moe.gate.weight");
            L.router_bias = b.vector("block_sparse_moe.gate.e_score_correction_bias");
            L.latent_down = b.matrix("block_sparse_moe.routed_expert_down_proj.weight");
            L.latent_norm = b.vector("block_sparse_moe.routed_expert_norm.weight");
            L.latent_up = b.matrix("block_sparse_moe.routed_expert_up_proj.weight");
            if (c.shared_intermediate() > 0) {
                L.shared_gate = b.matrix("block_sparse_moe.shared_experts.gate_proj.weight");
                L.shared_up = b.matrix("block_sparse_moe.shared_experts.up_proj.weight");
                L.shared_down = b.matrix("block_sparse_moe.shared_experts.down_proj.weight");
            }
        }
    }
    return out;
}

namespace {

// Widens t into v; with run == nullptr only sizes v (so the token loop never allocates).
void widen(const uint8_t* run, const SmallTensor& t, std::vector<float>& v) {
    v.resize(size_t(t.numel));
    if (run) widen_to_f32(run + t.offset, t.dtype, t.numel, v.data());
}

// fold = norm.weight ⊙ proj.weight: the attention-residual scoring vector (spec 2.3).
void fold(const uint8_t* run, const SmallTensor& norm, const SmallTensor& proj, std::vector<float>& out,
          std::vector<float>& tmp) {
    widen(run, norm, out);
    widen(run, proj, tmp);
    for (size_t i = 0; i < out.size(); ++i) out[i] = out[i] * tmp[i];
}

void fill(const ModelConfig& c, const LayerLayout& L, const uint8_t* run, LayerVectors& v) {
    widen(run, L.input_norm, v.input_norm);
    widen(run, L.post_norm, v.post_norm);
    fold(run, L.attn_res_norm, L.attn_res_proj, v.fold_attn, v.scratch);
    fold(run, L.mlp_res_norm, L.mlp_res_proj, v.fold_mlp, v.scratch);
    if (c.is_mla(L.il)) {
        widen(run, L.q_a_norm, v.q_a_norm);
        widen(run, L.kv_a_norm, v.kv_a_norm);
    } else {
        widen(run, L.conv_q, v.conv_q);
        widen(run, L.conv_k, v.conv_k);
        widen(run, L.conv_v, v.conv_v);
        // A_log is per head (the first n_head of a zero-padded vector); keep exp(A_log[h]).
        widen(run, L.a_log, v.scratch);
        v.decay_rate.resize(size_t(c.kda_num_heads));
        for (int h = 0; h < c.kda_num_heads; ++h) v.decay_rate[size_t(h)] = std::exp(v.scratch[size_t(h)]);
        widen(run, L.dt_bias, v.dt_bias);
        widen(run, L.o_norm, v.o_norm);
    }
    if (!c.is_dense(L.il)) {
        widen(run, L.router_bias, v.router_bias);
        widen(run, L.latent_norm, v.latent_norm);
    }
}

}  // namespace

void size_layer_vectors(const ModelConfig& c, const LayerLayout& L, LayerVectors& v) {
    v.scratch.reserve(size_t(std::max({L.attn_res_proj.numel, L.mlp_res_proj.numel, L.a_log.numel})));
    fill(c, L, nullptr, v);
}

void widen_layer_vectors(const ModelConfig& c, const LayerLayout& L, const uint8_t* run, LayerVectors& v) {
    if (v.ready) return;
    fill(c, L, run, v);
    v.ready = true;
}

LayerWeights bind_layer(const LayerLayout& L, const uint8_t* run, const LayerVectors& v) {
    auto m = [run](int64_t off) -> const uint16_t* {
        return off < 0 ? nullptr : reinterpret_cast<const uint16_t*>(run + off);
    };
    LayerWeights w;
    w.input_norm = v.input_norm.data();
    w.post_norm = v.post_norm.data();
    w.fold_attn = v.fold_attn.data();
    w.fold_mlp = v.fold_mlp.data();
    w.kda = KdaWeights{m(L.q), m(L.k), m(L.v), m(L.f_a), m(L.f_b), m(L.b), m(L.g), m(L.o),
                       v.conv_q.data(), v.conv_k.data(), v.conv_v.data(), v.decay_rate.data(),
                       v.dt_bias.data(), v.o_norm.data()};
    w.mla = MlaWeights{m(L.q_a), m(L.q_b), m(L.kv_a), m(L.kv_b), m(L.o), m(L.g), v.q_a_norm.data(),
                       v.kv_a_norm.data()};
    w.dense = DenseWeights{m(L.dense_gate), m(L.dense_up), m(L.dense_down)};
    w.moe = MoeWeights{m(L.router), m(L.latent_down), m(L.latent_up), m(L.shared_gate), m(L.shared_up),
                       m(L.shared_down), v.router_bias.data(), v.latent_norm.data()};
    return w;
}

ExpertWeights bind_expert(const ExpertRun& e, const uint8_t* run) {
    return ExpertWeights{run + e.part_offset[kW1Packed], run + e.part_offset[kW1Scale],
                         run + e.part_offset[kW2Packed], run + e.part_offset[kW2Scale],
                         run + e.part_offset[kW3Packed], run + e.part_offset[kW3Scale]};
}

}  // namespace k3

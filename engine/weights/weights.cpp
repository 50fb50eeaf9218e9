// Weight binding (weights.h): every step walks the layer tensor table (layer_tensors.h); names
// come from layer_prefix() + the row's suffix, offsets from the checkpoint's layer runs.
#include "weights/weights.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/kernels.h"
#include "weights/layer_tensors.h"
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

// Where row `row` of layer il sits: a matrix must be bf16 at an even offset (it is used in place).
PlacedTensor place(const Checkpoint& ckpt, int il, const LayerTensor& row) {
    const std::string name = layer_prefix(il) + row.suffix;
    const TensorInfo* t = ckpt.directory.find(name);
    if (!t) throw Error(ErrorKind::Checkpoint, "tensor " + name + " is missing from " + ckpt.dir.string());
    const int64_t off = ckpt.offset_in_layer(name, il);
    if (row.use == TensorUse::Matrix) {
        if (t->dtype != DType::BF16)
            throw Error(ErrorKind::Checkpoint, name + ": expected dtype BF16 for a matrix, got " + dtype_name(t->dtype));
        if (off % 2 != 0)
            throw Error(ErrorKind::Checkpoint,
                        name + ": bf16 data at odd offset " + std::to_string(off) + " inside layer " +
                            std::to_string(il) + "'s run; it cannot be used in place");
    }
    int64_t n = 1;
    for (int64_t d : t->shape) n *= d;
    return PlacedTensor{off, t->dtype, n};
}

}  // namespace

std::vector<LayerLayout> layout_layers(const Checkpoint& ckpt) {
    const ModelConfig& c = ckpt.config;
    const auto table = layer_tensor_table();
    std::vector<LayerLayout> out(size_t(c.num_hidden_layers));
    for (int il = 0; il < c.num_hidden_layers; ++il) {
        LayerLayout& L = out[size_t(il)];
        L.il = il;
        L.run_bytes = ckpt.layer_runs[size_t(il)].nbytes;
        L.rows.resize(table.size());
        for (size_t r = 0; r < table.size(); ++r)
            if (layer_binds(c, il, table[r].part)) L.rows[r] = place(ckpt, il, table[r]);
    }
    return out;
}

namespace {

// Widens t into v; with run == nullptr only sizes v (so the token loop never allocates).
void widen(const uint8_t* run, const PlacedTensor& t, std::vector<float>& v) {
    v.resize(size_t(t.numel));
    if (run) widen_to_f32(run + t.offset, t.dtype, t.numel, v.data());
}

// Every fp32 copy of the layer, row by row of the table; with run == nullptr only sizes them.
void fill(const ModelConfig& c, const LayerLayout& L, const uint8_t* run, LayerVectors& v) {
    const auto table = layer_tensor_table();
    v.rows.resize(table.size());
    for (size_t r = 0; r < table.size(); ++r) {
        const PlacedTensor& t = L.rows[r];
        if (t.offset < 0) continue;
        switch (table[r].use) {
            case TensorUse::Matrix: break;
            case TensorUse::Vector: widen(run, t, v.rows[r]); break;
            case TensorUse::ScalesAbove: {
                // fold = norm.weight ⊙ proj.weight: the attention-residual scoring vector
                // (docs/model.md "Layer stack").
                std::vector<float>& out = v.rows[r - 1];
                widen(run, t, v.scratch);
                for (size_t i = 0; i < out.size(); ++i) out[i] = out[i] * v.scratch[i];
                break;
            }
            case TensorUse::ExpPerHead: {
                // A_log is per head (the first n_head of a zero-padded vector); keep exp(A_log[h]).
                widen(run, t, v.scratch);
                std::vector<float>& out = v.rows[r];
                out.resize(size_t(c.kda_num_heads));
                for (int h = 0; h < c.kda_num_heads; ++h) out[size_t(h)] = std::exp(v.scratch[size_t(h)]);
                break;
            }
        }
    }
}

}  // namespace

void size_layer_vectors(const ModelConfig& c, const LayerLayout& L, LayerVectors& v) {
    const auto table = layer_tensor_table();
    int64_t scratch = 0;
    for (size_t r = 0; r < table.size(); ++r)
        if (table[r].use == TensorUse::ScalesAbove || table[r].use == TensorUse::ExpPerHead)
            scratch = std::max(scratch, L.rows[r].numel);
    v.scratch.reserve(size_t(scratch));
    fill(c, L, nullptr, v);
}

void widen_layer_vectors(const ModelConfig& c, const LayerLayout& L, const uint8_t* run, LayerVectors& v) {
    if (v.ready) return;
    fill(c, L, run, v);
    v.ready = true;
}

LayerWeights bind_layer(const LayerLayout& L, const uint8_t* run, const LayerVectors& v) {
    const auto table = layer_tensor_table();
    LayerWeights w{};
    for (size_t r = 0; r < table.size(); ++r) {
        if (L.rows[r].offset < 0) continue;
        const LayerTensor& row = table[r];
        if (row.matrix_view) *row.matrix_view(w) = reinterpret_cast<const uint16_t*>(run + L.rows[r].offset);
        if (row.vector_view) *row.vector_view(w) = v.rows[r].data();
    }
    return w;
}

ExpertWeights bind_expert(const ExpertRun& e, const uint8_t* run) {
    return ExpertWeights{run + e.part_offset[kW1Packed], run + e.part_offset[kW1Scale],
                         run + e.part_offset[kW2Packed], run + e.part_offset[kW2Scale],
                         run + e.part_offset[kW3Packed], run + e.part_offset[kW3Scale]};
}

}  // namespace k3

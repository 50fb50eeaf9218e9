// The tensor list (docs/model.md "Tensor names"): the layer trunk tensors come from the layer
// tensor table
// (layer_tensors.cpp); the experts and model-level tensors are here. Shapes are [out][in]
// row-major; MXFP4 tensors are [rows][in/2] packed bytes and [rows][in/32] E8M0 scales.
#include "weights/model_tensors.h"

#include "util/check.h"
#include "weights/layer_tensors.h"

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
    for (const LayerTensor& row : layer_tensor_table())
        if (layer_holds(c, il, row.part)) add(t, p + row.suffix, row.dtype, row.shape(c), TensorRole::LayerTrunk, il);
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

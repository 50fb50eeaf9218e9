// One function per block of the decoder layer (spec 2.3-2.7), each over a chunk of T tokens
// laid out [T][width]. They own the math glue between kernel calls; model.cpp's forward()
// calls them in order.
#pragma once
#include <cstdint>

#include "model/model.h"

namespace k3 {

// Attention residual (spec 2.3): out = sum_s softmax_s(fold . rmsnorm(v_s)) v_s over the
// sources v_0..v_{n-1}, each a vector of width E.
void attn_res_mix(const float* const* sources, int n_sources, const float* fold, float eps, int64_t E,
                  float* out);

// Kimi Delta Attention (spec 2.5): x [T][E] -> out [T][E]; state = the layer's recurrent
// matrices and conv history, advanced by T tokens.
void kda_block(Model& m, const KdaWeights& w, float* state, const float* x, float* out, int T);

// Gated NoPE MLA with a latent KV cache (spec 2.6): x [T][E] -> out [T][E]; writes latent rows
// pos0..pos0+T-1 of `rows` [n_ctx][kv_lora + rope] and attends causally over them.
void mla_block(Model& m, const MlaWeights& w, float* rows, int pos0, const float* x, float* out, int T,
               float* attn_scratch, int64_t scratch_stride);

// Dense SiTU-GLU MLP of layers il < first_k_dense_replace: x [T][E] -> out [T][E].
void dense_mlp(Model& m, const DenseWeights& w, const float* x, float* out, int T);

// Latent MoE (spec 2.7): x [T][E] -> out [T][E]. Fails (IoError) if the store cannot supply
// an expert; nothing is written to out then.
Status moe_ffn(Model& m, const MoeWeights& w, int il, const float* x, float* out, int T);

}  // namespace k3

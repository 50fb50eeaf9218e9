// The dense SiTU-GLU MLP of the first first_k_dense_replace layers: down(situ(gate x, up x)).
#include "model/blocks.h"

namespace k3 {

void dense_mlp(Model& m, const DenseWeights& w, const float* x, float* out, int T) {
    const ModelConfig& c = m.cfg;
    Activations& a = m.act;
    const int64_t E = c.hidden_size, F = c.intermediate_size;
    const float b1 = c.activation_situ_beta, b2 = c.activation_situ_linear_beta;
    const StageClock clock(m.stage_seconds, ForwardStage::DenseMlp);
    // gate, up  [T][F]
    m.compute.matmul_bf16_many({{w.gate, x, a.dgate.data(), F, E}, {w.up, x, a.dup.data(), F, E}}, T);
    // SiTU-GLU in place
    parallel_situ_glu(m.compute, a.dgate.data(), a.dup.data(), T * F, b1, b2);
    // out = W_down act  [T][E]
    m.compute.matmul_bf16(w.down, a.dgate.data(), out, E, F, T);
}

}  // namespace k3

// The stages a forward pass spends its wall time in, as the run report lists them
// (`forward_stage_seconds`, docs/performance.md "Time to first token"): the measured side of what
// `plan --prompt-tokens` models per stage (cli/projection.h), so a gap between the two names the
// stage it comes from.
#pragma once
#include <array>

namespace k3 {

enum class ForwardStage : int {
    Embed,         // embedding rows read and widened
    TrunkWait,     // a layer's trunk run acquired (the ring's reads waited for)
    ResidualMix,   // attention-residual mixes and the residual adds
    Norms,         // the layers' input RMSNorms
    KdaProducts,   // KDA's weight products
    KdaHeads,      // KDA per head and token: conv, L2 norms, decay, delta-rule step, head norm, gate
    MlaProducts,   // MLA's weight products and its cached latent rows
    MlaAttention,  // absorbed queries, blocked attention, value projections and gates
    DenseMlp,      // the dense layers' MLP
    MoeProducts,   // router, latent down/up, shared experts, the weighted sum of the routed experts
    Routing,       // router sigmoid, top-k, tokens sorted by expert
    ExpertWait,    // routed experts acquired (reads waited for)
    Experts,       // the routed experts' MXFP4 products and SiTU-GLU
    Output,        // model-level mix, final norm and lm_head
    Count
};
inline constexpr int kForwardStages = int(ForwardStage::Count);

// "kda_heads": the run report's key for a stage.
const char* forward_stage_name(ForwardStage s);

using ForwardStageSeconds = std::array<double, kForwardStages>;

class Engine;
// The forward pass's wall seconds by stage since `engine` was loaded (zeros for an engine that
// does not time them, such as a test's fake).
ForwardStageSeconds forward_stage_seconds(const Engine& engine);

}  // namespace k3

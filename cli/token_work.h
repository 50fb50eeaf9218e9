// The work of a prefill that is not a weight product, timed on the engine's own functions at one
// model's widths (docs/performance.md, "Time to first token"): the attention-residual mixes, the
// RMSNorms, KDA's per-head conv, norms, decay and delta-rule step, the router's top-k, MLA's
// absorbed queries and value rows, SiTU-GLU, the residual adds and the thread pool's fork and
// join. `plan --prompt-tokens` charges a chunk these per token, head or call (chunk_compute.h),
// so the estimate follows from the model's shapes and this machine's rates, stage by stage,
// where it used to count only the weight products' FLOPs.
#pragma once
#include "weights/config.h"

namespace k3::cli {

// Seconds per unit on one thread (the forward pass spreads most of these over its threads:
// chunk_compute.h divides by them and charges a join per parallel region).
struct TokenWork {
    double mix_source_seconds = 0;  // attn_res_mix, one source of one token
    double norm_seconds = 0;        // rmsnorm of one hidden-wide row
    double kda_head_seconds = 0;    // kda_head_token, head norm and gate: one head, one token
    double route_seconds = 0;       // one token's router sigmoid, top-k and latent rows sorted by expert (serial)
    double mla_head_seconds = 0;    // one (token, head): the absorbed query, value row and gate
    double combine_seconds = 0;     // one token's weighted sum of its experts' rows and latent norm
    double situ_seconds = 0;        // SiTU-GLU, one element
    double add_seconds = 0;         // one element of a residual add or row copy (serial)
    double join_seconds = 0;        // one parallel region's fork and join over `threads`, empty items
    int threads = 1;                // the threads the forward pass has (join_seconds was timed with them)
    // How many threads' worth of work a parallel region gets done at this moment: 1 to `threads`
    // (a region's one-thread time over its time on the threads, its join aside). On a machine whose
    // other jobs hold the cores it is near 1: at load 12 on 2 cores, demo-64k's 2k prefill took
    // 2.86 s on 2 threads and 1.76 s on one.
    double parallel_speedup = 1;
};

// One empty parallel region on `threads` threads: seconds.
double measure_join_seconds(int threads, double seconds);

TokenWork measure_token_work(const ModelConfig& c, int threads, double seconds);

}  // namespace k3::cli

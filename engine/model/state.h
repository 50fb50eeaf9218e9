// SequenceState: everything one sequence carries from token to token. Only two things do:
// KDA layers (the per-head recurrent matrices and the causal conv history) and MLA layers (one
// compressed latent row per position: the normed kv_lora latent and the shared rope slot, from
// which keys and values are recovered by weight absorption, docs/model.md "Gated NoPE MLA"). Norms,
// attention residuals, router and experts are per token. The KDA part is one contiguous buffer so a
// snapshot (for prefix reuse) is a single copy; MLA rows need no snapshot because a row depends
// only on the tokens up to its position.
#pragma once
#include <cstdint>
#include <vector>

#include "util/zeroed_pages.h"
#include "weights/config.h"

namespace k3 {

struct SequenceState {
    SequenceState(const ModelConfig& cfg, int n_ctx);

    int n_ctx = 0;
    int n_past = 0;                 // positions evaluated (KDA state and latent rows valid up to here)

    // [n_kda_layers] x { S [H][D][D] | q hist [P][K-1] | k hist [P][K-1] | v hist [P][K-1] }
    std::vector<float> kda;
    int64_t kda_layer_floats = 0;
    std::vector<int> kda_slot;      // [n_layer] index into kda, -1 for MLA layers

    // [n_mla_layers][n_ctx][kv_lora + rope]
    ZeroedArray<float> mla_rows;    // pages taken as positions are written
    int64_t mla_row_floats = 0;
    std::vector<int> mla_slot;      // [n_layer] index into mla_rows, -1 for KDA layers

    // Speculative verification: while `capture` is on, each KDA layer keeps the inputs of its
    // recurrence for the step's tokens ([n_kda][capture_tokens][4P + H]: raw q, k, v, z rows
    // and beta logits), and kda_at_step holds the KDA state the step started from, so rejected
    // drafts are undone by restoring it and replaying only the accepted tokens (kda_replay).
    bool capture = false;
    int capture_tokens = 0;
    std::vector<float> captured;
    std::vector<float> kda_at_step;
    int64_t capture_row_floats = 0;
    float* captured_inputs(int il) {
        return captured.data() + size_t(kda_slot[size_t(il)]) * size_t(capture_tokens) * size_t(capture_row_floats);
    }
    // Starts a captured step of n tokens (copies the KDA state, sizes the capture).
    void begin_capture(int n);

    float* kda_state(int il) { return kda.data() + kda_slot[size_t(il)] * kda_layer_floats; }
    float* latent_rows(int il) { return mla_rows.data() + size_t(mla_slot[size_t(il)]) * size_t(n_ctx) * size_t(mla_row_floats); }
    void reset_recurrent();          // zero every KDA state and conv history (a fresh sequence)
    int64_t bytes() const;
};

// Bytes of MLA cache one position costs across all MLA layers (ModelInfo::kv_bytes_per_position).
int64_t kv_bytes_per_position(const ModelConfig& cfg);

}  // namespace k3

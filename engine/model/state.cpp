// SequenceState allocation (state.h).
#include "model/state.h"

#include <algorithm>

namespace k3 {

SequenceState::SequenceState(const ModelConfig& c, int n_ctx_) : n_ctx(n_ctx_) {
    const int64_t H = c.kda_num_heads, D = c.kda_head_dim, P = c.kda_width();
    const int64_t hist = std::max(0, c.short_conv_kernel_size - 1);
    kda_layer_floats = H * D * D + 3 * P * hist;
    mla_row_floats = c.mla_kv_latent_dim();
    int n_kda = 0, n_mla = 0;
    for (int il = 0; il < c.num_hidden_layers; ++il) {
        kda_slot.push_back(c.is_mla(il) ? -1 : n_kda++);
        mla_slot.push_back(c.is_mla(il) ? n_mla++ : -1);
    }
    kda.assign(size_t(n_kda * kda_layer_floats), 0.0f);
    mla_rows = ZeroedArray<float>(size_t(n_mla) * size_t(n_ctx) * size_t(mla_row_floats));
    capture_row_floats = 4 * P + H;
}

void SequenceState::begin_capture(int n) {
    capture = true;
    capture_tokens = n;
    const size_t n_kda = size_t(std::count_if(kda_slot.begin(), kda_slot.end(), [](int s) { return s >= 0; }));
    captured.resize(n_kda * size_t(n) * size_t(capture_row_floats));
    kda_at_step = kda;
}

void SequenceState::reset_recurrent() {
    std::fill(kda.begin(), kda.end(), 0.0f);
    n_past = 0;
}

int64_t SequenceState::bytes() const {
    return int64_t(sizeof(float)) * int64_t(kda.size() + mla_rows.size());
}

int64_t kv_bytes_per_position(const ModelConfig& c) {
    int n_mla = 0;
    for (int il = 0; il < c.num_hidden_layers; ++il) n_mla += c.is_mla(il) ? 1 : 0;
    return int64_t(n_mla) * c.mla_kv_latent_dim() * int64_t(sizeof(float));
}

}  // namespace k3

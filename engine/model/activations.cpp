// Activations allocation (activations.h): every buffer sized from the config once.
#include "model/activations.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>

namespace k3 {

namespace {

ZeroedArray<float> zeros(int64_t n) { return ZeroedArray<float>(size_t(std::max<int64_t>(n, 0))); }

// Gives back the whole pages of `a` from element `from` on (they read as zeros afterwards).
template <class T>
void release_from(ZeroedArray<T>& a, size_t from) {
    const size_t bytes = a.size() * sizeof(T);
    if (bytes < ZeroedPages<T>::kMmapFrom) return;  // calloc'd: not ours to advise
    const uintptr_t page = uintptr_t(sysconf(_SC_PAGESIZE));
    const uintptr_t begin = (reinterpret_cast<uintptr_t>(a.data()) + from * sizeof(T) + page - 1) / page * page;
    const uintptr_t end = reinterpret_cast<uintptr_t>(a.data()) + bytes;
    if (end > begin) madvise(reinterpret_cast<void*>(begin), end - begin, MADV_DONTNEED);
}

}  // namespace

Activations::Activations(const ModelConfig& c, int T) : max_tokens(T) {
    const int64_t E = c.hidden_size, P = c.kda_width(), D = c.kda_head_dim, H = c.kda_num_heads;
    const int64_t MH = c.num_attention_heads, QK = c.mla_q_head_dim(), KV = c.mla_kv_latent_dim();
    const int64_t L = c.routed_expert_hidden_size, I = c.moe_intermediate_size, K = c.num_experts_per_token;
    n_blocks_max = (c.num_hidden_layers + c.attn_res_block_size - 1) / c.attn_res_block_size;
    const PassCost cost = pass_cost(c);
    tile_tokens = cost.tile_tokens(T);
    expert_rows = cost.expert_rows(T);
    product_tokens = std::max<int64_t>(tile_tokens, expert_rows);
    const int64_t Tt = tile_tokens, R = expert_rows;

    pref = zeros(T * E);
    blocks = zeros(T * n_blocks_max * E);
    lat = zeros(T * L);
    ex_out = zeros(T * K * L);
    sel = ZeroedArray<int32_t>(size_t(T * K));
    sel_w = zeros(T * K);
    slot_of = ZeroedArray<int32_t>(size_t(T * K));
    slot_token = ZeroedArray<int32_t>(size_t(T * K));

    h = zeros(Tt * E);
    x = zeros(Tt * E);
    out = zeros(Tt * E);

    kq = zeros(Tt * P), kk = zeros(Tt * P), kv = zeros(Tt * P), kg = zeros(Tt * P), kz = zeros(Tt * P);
    kf = zeros(Tt * D);
    kb = zeros(Tt * H);
    ko = zeros(Tt * P);
    kda_head = zeros(H * 5 * D);

    mq_a = zeros(Tt * c.q_lora_rank);
    mq = zeros(Tt * MH * QK);
    mkv = zeros(Tt * KV);
    mg = zeros(Tt * MH * c.v_head_dim);
    mo = zeros(Tt * MH * c.v_head_dim);
    mq_abs = zeros(Tt * MH * KV);
    mctx = zeros(Tt * MH * c.kv_lora_rank);
    seq_of.assign(size_t(Tt), 0);

    dgate = zeros(Tt * c.intermediate_size);
    dup = zeros(Tt * c.intermediate_size);

    router = zeros(Tt * c.num_experts);
    lat_acc = zeros(Tt * L);
    sgate = zeros(Tt * c.shared_intermediate());
    sup = zeros(Tt * c.shared_intermediate());
    sout = zeros(Tt * E);
    n_assigned.assign(size_t(c.num_experts), 0);
    first_slot.assign(size_t(c.num_experts), 0);
    union_ids.assign(size_t(c.num_experts), 0);
    cursor.assign(size_t(c.num_experts), 0);
    ex_in = zeros(R * L);
    ex_gate = zeros(R * I);
    ex_up = zeros(R * I);
    expert_runs.assign(size_t(c.num_experts), nullptr);
    router_c = zeros(c.num_experts);

    ahead_scores = zeros(int64_t(kLookaheadRows) * c.num_experts);
    ahead_sel.assign(size_t(kLookaheadRows) * size_t(K), 0);
    ahead_w = zeros(int64_t(kLookaheadRows) * K);
    ahead_union.assign(size_t(c.num_experts), 0);
    prefetch_ids.assign(size_t(c.num_experts), 0);

    final_h = zeros(Tt * E);
}

void Activations::narrow_tiles(int tile, int64_t rows) {
    tile_tokens = std::clamp(tile, 1, tile_tokens);
    expert_rows = std::clamp<int64_t>(rows, 1, expert_rows);
}

void Activations::release_pass(int tokens) {
    if (tokens <= tile_tokens) return;  // a decode step or a short prompt: keep its few pages
    const size_t keep = size_t(tile_tokens);
    const size_t K = sel.size() / size_t(std::max(1, max_tokens));
    release_from(pref, keep * (pref.size() / size_t(max_tokens)));
    release_from(blocks, keep * (blocks.size() / size_t(max_tokens)));
    release_from(lat, keep * (lat.size() / size_t(max_tokens)));
    release_from(ex_out, keep * (ex_out.size() / size_t(max_tokens)));
    release_from(sel, keep * K);
    release_from(sel_w, keep * K);
    release_from(slot_of, keep * K);
    release_from(slot_token, keep * K);
}

}  // namespace k3

// The tensor table against the counts and sizes of the real Kimi K3's checkpoint (docs/model.md
// "Sizes", "Tensor names").
#include <doctest/doctest.h>

#include <set>

#include "weights/model_tensors.h"

using namespace k3;

namespace {

// Kimi K3's shape, built by hand (the config reader has its own fixture test).
ModelConfig k3_shape() {
    ModelConfig c;
    c.hidden_size = 7168;
    c.num_hidden_layers = 93;
    c.vocab_size = 163840;
    c.intermediate_size = 33792;
    c.first_k_dense_replace = 1;
    c.num_attention_heads = 96;
    c.q_lora_rank = 1536;
    c.kv_lora_rank = 512;
    c.qk_nope_head_dim = 128;
    c.qk_rope_head_dim = 64;
    c.v_head_dim = 128;
    c.kda_num_heads = 96;
    c.kda_head_dim = 128;
    c.short_conv_kernel_size = 4;
    c.num_experts = 896;
    c.num_experts_per_token = 16;
    c.num_shared_experts = 2;
    c.routed_expert_hidden_size = 3584;
    c.moe_intermediate_size = 3072;
    c.layer_kind.assign(93, LayerKind::Kda);
    for (int one_based = 4; one_based <= 92; one_based += 4) c.layer_kind[one_based - 1] = LayerKind::Mla;
    c.layer_kind[92] = LayerKind::Mla;
    return c;
}

}  // namespace

TEST_CASE("K3 trunk tensor counts per layer kind match the release") {
    ModelConfig c = k3_shape();
    CHECK(layer_trunk_tensors(c, 0).size() == 23);  // KDA + dense MLP
    CHECK(layer_trunk_tensors(c, 1).size() == 28);  // KDA + MoE
    CHECK(layer_trunk_tensors(c, 3).size() == 22);  // MLA + MoE
}

TEST_CASE("K3 routed expert is 17,547,264 bytes in six tensors") {
    ModelConfig c = k3_shape();
    CHECK(expert_bytes(c) == 17547264);
    int64_t sum = 0;
    for (const auto& t : expert_tensors(c, 1, 0)) sum += t.nbytes();
    CHECK(sum == 17547264);
    CHECK(expert_tensors(c, 1, 0).size() == 6);
}

TEST_CASE("K3 trunk is about 108.8 GB and names are unique") {
    ModelConfig c = k3_shape();
    auto all = model_tensors(c);
    int64_t trunk = 0;
    std::set<std::string> names;
    for (const auto& t : all) {
        if (t.role == TensorRole::LayerTrunk) trunk += t.nbytes();
        names.insert(t.name);
    }
    CHECK(names.size() == all.size());
    // 108.81 GB of layer runs (docs/model.md "Sizes"); the release's 497,220 tensors include vision
    // ones.
    CHECK(trunk > 108.70e9);
    CHECK(trunk < 108.90e9);
    CHECK(all.size() == 23 + 68 * 28 + 24 * 22 + 92 * 896 * 6 + 5);
}

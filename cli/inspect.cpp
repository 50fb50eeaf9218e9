// `k3serve inspect MODEL_DIR`: what a checkpoint is and what serving it costs. Shape, tensor
// counts and bytes by kind (embed, lm_head, trunk per layer kind, one expert, the expert pool),
// bytes touched per token with nothing cached, recurrent state and KV sizes, and the memory
// needed at a few trunk budgets. Figures come from the one tensor list (model_tensors.h), so
// a bare config.json (MODEL_DIR may also name the .json file) is enough; when shards are
// present the checkpoint is validated first (as `verify`) and the byte runs are read from it.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <functional>
#include <map>
#include <numeric>
#include <string>

#include "weights/checkpoint.h"
#include "k3/cli.h"
#include "cli/subcommand.h"
#include "cli/byte_format.h"
#include "k3/error.h"
#include "store/memory_plan.h"
#include "weights/chunk_size.h"

namespace k3::cli {

namespace {

constexpr const char* kUsage =
    "usage: k3serve inspect MODEL_DIR | CONFIG.json\n"
    "\n"
    "Prints a Kimi K3 checkpoint's shape, tensor counts and bytes by kind (embed, lm_head,\n"
    "trunk per layer, one routed expert, the expert pool), the bytes one token touches with\n"
    "nothing cached, the KDA state and MLA KV sizes, and the memory needed at a few trunk\n"
    "budgets. A config.json alone is enough; when shards are present they are validated\n"
    "first, as 'k3serve verify' does.\n"
    "\n"
    "Exit status: 0 ok, 2 config or checkpoint refused, 1 other failure.\n";

bool has_shards(const std::filesystem::path& dir) {
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator(dir, ec))
        if (e.path().extension() == ".safetensors") return true;
    return false;
}

// Trunk bytes per layer from the tensor list (what the runs hold in a sound checkpoint).
std::vector<int64_t> layer_bytes_from_config(const ModelConfig& c) {
    std::vector<int64_t> out;
    for (int il = 0; il < c.num_hidden_layers; ++il) {
        int64_t b = 0;
        for (const auto& t : layer_trunk_tensors(c, il)) b += t.nbytes();
        out.push_back(b);
    }
    return out;
}

struct Row {
    std::string plan;
    int pinned = 0;
    int64_t ring = 0, resident = 0, read_per_token = 0;
};

void report(const ModelConfig& c, const std::vector<int64_t>& layer_bytes, const std::string& source) {
    const int n = c.num_hidden_layers;
    const int moe_layers = n - c.first_k_dense_replace;
    std::printf("source:  %s\n", source.c_str());
    std::printf("shape:   %s\n", describe(c).c_str());
    std::string mla;
    for (int il = 0; il < n; ++il)
        if (c.is_mla(il)) {
            if (!mla.empty()) mla += ',';
            mla += std::to_string(il);
        }
    std::printf("layers:  %d (%d dense, %d MoE); MLA at zero-based %s; KDA %d heads x %d, MLA %d heads\n", n,
                c.first_k_dense_replace, moe_layers, mla.c_str(), c.kda_num_heads, c.kda_head_dim,
                c.num_attention_heads);

    // ---- tensors and bytes by kind ----
    int64_t embed = 0, lm_head = 0, norms = 0, trunk = 0, n_trunk = 0, n_expert_tensors = 0, n_model = 0;
    std::vector<int64_t> embed_shape;
    for (const auto& t : model_tensors(c)) {
        switch (t.role) {
            case TensorRole::Embed: embed += t.nbytes(), embed_shape = t.shape, ++n_model; break;
            case TensorRole::LmHead: lm_head += t.nbytes(), ++n_model; break;
            case TensorRole::ModelNorm: norms += t.nbytes(), ++n_model; break;
            case TensorRole::LayerTrunk: trunk += t.nbytes(), ++n_trunk; break;
            case TensorRole::Vision: break;  // not in model_tensors()
            default: ++n_expert_tensors;
        }
    }
    const int64_t one_expert = expert_bytes(c);
    const int64_t pool = one_expert * moe_layers * c.num_experts;
    std::printf("\ntensors: %s required = %s trunk + %s routed-expert + %s model-level\n",
                grouped(n_trunk + n_expert_tensors + n_model).c_str(), grouped(n_trunk).c_str(),
                grouped(n_expert_tensors).c_str(), grouped(n_model).c_str());
    std::printf("\nbytes by kind\n");
    std::printf("  %-50s %12s\n", ("embed_tokens BF16 " + shape_string(embed_shape)).c_str(), human_bytes(double(embed)).c_str());
    std::printf("  %-50s %12s\n", "lm_head (separate, untied)", human_bytes(double(lm_head)).c_str());
    std::printf("  %-50s %12s\n", "model-level norms (3 tensors)", human_bytes(double(norms)).c_str());
    // Trunk per layer, grouped by kind (attention x FFN), from the actual runs when available.
    struct Kind {
        int count = 0;
        int64_t bytes = 0;
        size_t tensors = 0;
    };
    std::map<std::string, Kind> kinds;
    for (int il = 0; il < n; ++il) {
        std::string k = std::string(c.is_mla(il) ? "MLA" : "KDA") + (c.is_dense(il) ? " + dense MLP" : " + MoE");
        Kind& kind = kinds[k];
        ++kind.count;
        kind.bytes = layer_bytes[size_t(il)];
        kind.tensors = layer_trunk_tensors(c, il).size();
    }
    for (const auto& [name, k] : kinds) {
        char label[96];
        std::snprintf(label, sizeof label, "trunk, one %s layer (x%d, %zu tensors)", name.c_str(), k.count, k.tensors);
        std::printf("  %-50s %12s\n", label, human_bytes(double(k.bytes)).c_str());
    }
    const int64_t largest_layer = *std::max_element(layer_bytes.begin(), layer_bytes.end());
    const int64_t trunk_runs = std::accumulate(layer_bytes.begin(), layer_bytes.end(), int64_t(0));
    std::printf("  %-50s %12s\n", ("trunk, all " + std::to_string(n) + " layers").c_str(), human_bytes(double(trunk_runs)).c_str());
    std::printf("  %-50s %12s  (%s B, six MXFP4 tensors)\n", "one routed expert", human_bytes(double(one_expert)).c_str(),
                grouped(one_expert).c_str());
    std::printf("  %-50s %12s  (%d layers x %d experts)\n", "routed expert pool", human_bytes(double(pool)).c_str(), moe_layers,
                c.num_experts);
    int64_t vision = 0;
    const std::vector<TensorSpec> vt = vision_tensors(c);
    for (const auto& t : vt) vision += t.nbytes();
    if (c.vision.present) {
        char label[96];
        std::snprintf(label, sizeof label, "vision tower + projector (%zu tensors, %d blocks)", vt.size(), c.vision.layers);
        std::printf("  %-50s %12s\n", label, human_bytes(double(vision)).c_str());
    }
    std::printf("  %-50s %12s\n", "total", human_bytes(double(embed + lm_head + norms + trunk_runs + pool + vision)).c_str());

    // ---- per token ----
    const int64_t experts_per_token = int64_t(c.num_experts_per_token) * moe_layers * one_expert;
    const int64_t embed_row = int64_t(c.hidden_size) * 2;
    const int64_t touched = trunk_runs + experts_per_token + lm_head + embed_row + norms;
    std::printf("\nper token, nothing cached: %s touched = trunk %s + experts %d x %d layers x %s = %s + lm_head %s "
                "+ one embedding row %s\n",
                human_bytes(double(touched)).c_str(), human_bytes(double(trunk_runs)).c_str(), c.num_experts_per_token,
                moe_layers, human_bytes(double(one_expert)).c_str(), human_bytes(double(experts_per_token)).c_str(),
                human_bytes(double(lm_head)).c_str(), human_bytes(double(embed_row)).c_str());

    // ---- state ----
    int n_kda = 0;
    for (LayerKind k : c.layer_kind) n_kda += k == LayerKind::Kda;
    const int n_mla = n - n_kda;
    const int64_t kda_state = (int64_t(c.kda_num_heads) * c.kda_head_dim * c.kda_head_dim +
                               3 * int64_t(c.kda_width()) * (c.short_conv_kernel_size - 1)) * 4;
    const int64_t kv_latent = int64_t(c.mla_kv_latent_dim()) * 4 * n_mla;
    const int64_t kv_expanded =
        (int64_t(c.num_attention_heads) * (c.qk_nope_head_dim + c.v_head_dim) + c.qk_rope_head_dim) * 4 * n_mla;
    std::printf("state:   KDA recurrent state + conv history %s per sequence (%d layers x %s, fp32); MLA KV per "
                "position %s as the fp32 latent, %s expanded per head\n",
                human_bytes(double(kda_state) * n_kda).c_str(), n_kda, human_bytes(double(kda_state)).c_str(),
                human_bytes(double(kv_latent)).c_str(), human_bytes(double(kv_expanded)).c_str());
    // a prefill pass (weights/chunk_size.h; docs/performance.md "Prefill passes")
    const PassCost pass = pass_cost(c);
    const int64_t per_token = pass.per_token;
    std::printf("prefill: a prompt token costs %s in a pass (residual stream and %d block snapshots %s, routed "
                "experts' input and outputs %s) + its MLA rows %s; a pass's tiles and expert rows %s\n",
                human_bytes(double(per_token)).c_str(), (c.num_hidden_layers + c.attn_res_block_size - 1) / c.attn_res_block_size,
                human_bytes(double(int64_t(c.hidden_size) * 4 * (1 + (c.num_hidden_layers + c.attn_res_block_size - 1) / c.attn_res_block_size))).c_str(),
                human_bytes(double(int64_t(c.routed_expert_hidden_size) * 4 * (1 + c.num_experts_per_token))).c_str(),
                human_bytes(double(kv_latent)).c_str(), human_bytes(double(pass.fixed_bytes(pass.max_tokens))).c_str());

    // ---- memory at a few trunk budgets ----
    // Model-level tensors are always resident. The trunk is planned as the engine plans it
    // (io::plan_trunk: pinned layers, the rest of the budget a read ring that holds at least the
    // largest streamed layer). Streamed plans keep the smallest useful expert cache (top-k + 1
    // slots) and read every routed expert per token (K3's router is near-flat, so small caches
    // hit almost never, docs/model.md "Memory presets").
    const int64_t model_level = embed + lm_head + norms;
    const int64_t min_cache = int64_t(c.num_experts_per_token + 1) * one_expert;
    auto plan_for_budget = [&](const std::string& name, int64_t budget) {
        Row r{name};
        const io::TrunkPlan t = io::plan_trunk(layer_bytes, std::max(budget, io::smallest_trunk_budget(layer_bytes)));
        r.pinned = t.n_pinned, r.ring = t.ring_bytes;
        r.resident = model_level + t.total_bytes() + min_cache;
        r.read_per_token = trunk_runs - t.pinned_bytes - t.ring_kept_bytes + experts_per_token;  // kept: read once
        return r;
    };
    std::vector<Row> rows;
    rows.push_back(plan_for_budget("streaming floor (nothing pinned)", 0));
    for (int pct : {25, 50, 75})
        rows.push_back(plan_for_budget("trunk budget " + std::to_string(pct) + "% (" +
                                           human_bytes(double(trunk_runs) * pct / 100) + ")",
                                       trunk_runs * pct / 100));
    rows.push_back(plan_for_budget("trunk resident, experts streamed", trunk_runs));
    rows.push_back(Row{"everything resident", n, 0, model_level + trunk_runs + pool, 0});
    std::printf("\nmemory for weights at a few budgets (estimate: model-level tensors resident, a read ring of at "
                "least the largest streamed layer (up to %s), expert cache of top-k+1 = %d slots when streaming; activations, "
                "state and KV come on top):\n",
                human_bytes(double(largest_layer)).c_str(), c.num_experts_per_token + 1);
    std::printf("  %-42s %8s %12s %14s %16s\n", "plan", "pinned", "ring", "resident", "read per token");
    for (const Row& r : rows)
        std::printf("  %-42s %5d/%-3d %12s %14s %16s\n", r.plan.c_str(), r.pinned, n, human_bytes(double(r.ring)).c_str(),
                    human_bytes(double(r.resident)).c_str(), human_bytes(double(r.read_per_token)).c_str());
}

}  // namespace

int inspect_main(int argc, char** argv) {
    return run_subcommand({"inspect", kUsage}, argc, argv, [](ArgList& args) {
        std::string target;
        while (args.next()) args.positional({&target});
        if (target.empty()) throw Error(ErrorKind::Usage, "MODEL_DIR or CONFIG.json is required");
        std::filesystem::path path(target);
        std::error_code ec;
        if (!std::filesystem::is_directory(path, ec)) {
            ModelConfig c = load_config(path);
            report(c, layer_bytes_from_config(c), path.string() + " (config only)");
        } else if (!has_shards(path)) {
            ModelConfig c = load_config(path / "config.json");
            report(c, layer_bytes_from_config(c), (path / "config.json").string() + " (no shards: figures from the config alone)");
        } else {
            Checkpoint ck = open_checkpoint(path);
            std::vector<int64_t> layer_bytes;
            for (const auto& r : ck.layer_runs) layer_bytes.push_back(r.nbytes);
            report(ck.config, layer_bytes,
                   path.string() + " (" + std::to_string(ck.directory.shards().size()) + " shards, verified)");
        }
        return 0;
    });
}

}  // namespace k3::cli

// `k3serve verify MODEL_DIR`: everything open_checkpoint() checks (config, every shard header,
// the index json, every required tensor's dtype and shape, MXFP4 pairs, the per-layer and
// per-expert byte runs), then a summary of the layout facts the engine relies on. Reads headers
// only, never tensor data. Exit 0 when sound, 2 when the checkpoint or config is refused
// (README, "Exit codes"), 1 on an unexpected failure.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <map>
#include <set>
#include <string>

#include "weights/checkpoint.h"
#include "k3/cli.h"
#include "cli/subcommand.h"
#include "cli/byte_format.h"
#include "k3/error.h"

namespace k3::cli {

namespace {

constexpr const char* kUsage =
    "usage: k3serve verify MODEL_DIR\n"
    "\n"
    "Checks a Kimi K3 checkpoint completely before it is served: config.json (refusing\n"
    "anything k3serve does not implement), every safetensors header (length bound, JSON,\n"
    "dtypes, offsets inside the file and not overlapping, sizes), the shards against each\n"
    "other and against model.safetensors.index.json, every tensor the config requires\n"
    "(dtype and shape), MXFP4 packed/scale pairs, each layer's trunk tensors contiguous in\n"
    "one shard, each routed expert's six tensors back to back, and the vision tower's and\n"
    "projector's tensors when config.json has a vision_config. Reads headers only.\n"
    "\n"
    "Exit status: 0 sound, 2 refused (the message names the file and tensor), 1 other failure.\n";

// "vision_tower.encoder.blocks.3.attn.weight" -> "vision_tower.*"
std::string family(const std::string& name) {
    auto dot = name.find('.');
    return (dot == std::string::npos ? name : name.substr(0, dot)) + ".*";
}

void print_summary(const Checkpoint& ck) {
    const ModelConfig& c = ck.config;
    const TensorDirectory& td = ck.directory;
    std::printf("config:   %s\n", describe(c).c_str());

    int64_t file_bytes = 0;
    for (const auto& s : td.shards()) file_bytes += s.file_size;
    bool have_index = std::filesystem::exists(ck.dir / "model.safetensors.index.json");
    std::printf("shards:   %zu files, %s; every header checked%s\n", td.shards().size(), human_bytes(double(file_bytes)).c_str(),
                have_index ? "; model.safetensors.index.json agrees with them" : "; no index json (not required)");

    std::set<std::string> required;
    size_t packed_pairs = 0;
    for (const auto& t : model_tensors(c)) {
        required.insert(t.name);
        packed_pairs += t.role == TensorRole::ExpertPacked;
    }
    int64_t vision_bytes = 0;
    const std::vector<TensorSpec> vision = vision_tensors(c);
    for (const auto& t : vision) required.insert(t.name), vision_bytes += t.nbytes();
    std::map<std::string, int> ignored;
    for (const auto& t : td.tensors())
        if (!required.count(t.name)) ++ignored[family(t.name)];
    std::string ignored_str;
    for (const auto& [fam, n] : ignored) {
        if (!ignored_str.empty()) ignored_str += ", ";
        ignored_str += fam + " " + std::to_string(n);
    }
    const size_t others = td.tensors().size() - required.size();
    std::printf("tensors:  %zu required, all present with the right dtype and shape", required.size());
    if (others) std::printf("; %zu not in the tensor list, ignored (%s)", others, ignored_str.c_str());
    std::printf("\n");

    int64_t trunk = 0, smallest = INT64_MAX, largest = 0;
    int largest_layer = 0;
    for (size_t il = 0; il < ck.layer_runs.size(); ++il) {
        const ByteRun& r = ck.layer_runs[il];
        trunk += r.nbytes;
        smallest = std::min(smallest, r.nbytes);
        if (r.nbytes > largest) largest = r.nbytes, largest_layer = int(il);
    }
    std::printf("layers:   %zu trunk runs, each contiguous in one shard: %s total, %s to %s (largest: layer %d)\n",
                ck.layer_runs.size(), human_bytes(double(trunk)).c_str(), human_bytes(double(smallest)).c_str(),
                human_bytes(double(largest)).c_str(), largest_layer);

    int moe_layers = c.num_hidden_layers - c.first_k_dense_replace;
    std::printf("experts:  %d MoE layers x %d = %s routed experts, each six MXFP4 tensors back to back, %s B each "
                "(%s pool); %s packed/scale pairs consistent\n",
                moe_layers, c.num_experts, grouped(int64_t(moe_layers) * c.num_experts).c_str(),
                grouped(expert_bytes(c)).c_str(), human_bytes(double(expert_bytes(c)) * moe_layers * c.num_experts).c_str(),
                grouped(int64_t(packed_pairs)).c_str());
    if (c.vision.present)
        std::printf("vision:   %zu tensors (tower %d blocks of width %d, projector to %d), %s, all present\n",
                    vision.size(), c.vision.layers, c.vision.hidden, c.vision.text_hidden,
                    human_bytes(double(vision_bytes)).c_str());
    else
        std::printf("vision:   none (config.json has no vision_config with vt_hidden_size; text only)\n");
}

}  // namespace

int verify_main(int argc, char** argv) {
    return run_subcommand({"verify", kUsage, "FAILED: the checkpoint cannot be served"}, argc, argv, [](ArgList& args) {
        std::string model_dir;
        while (args.next()) args.positional({&model_dir});
        if (model_dir.empty()) throw Error(ErrorKind::Usage, "MODEL_DIR is required");
        Checkpoint ck = open_checkpoint(model_dir);
        check_vision_tensors(ck);
        std::printf("verify %s\n", model_dir.c_str());
        print_summary(ck);
        std::printf("OK: the checkpoint is sound\n");
        return 0;
    });
}

}  // namespace k3::cli

// load_vision_weights (vision_weights.h): one read per tensor, through the page cache.
#include "vision/vision_weights.h"

#include "io/file.h"
#include "k3/error.h"
#include "weights/model_tensors.h"
#include "weights/weights.h"

namespace k3 {

namespace {

AlignedBytes read_tensor(const Checkpoint& ckpt, const std::string& name) {
    const TensorInfo* t = ckpt.directory.find(name);
    if (!t) throw Error(ErrorKind::Checkpoint, "missing vision tensor " + name + " in " + ckpt.dir.string());
    AlignedBytes b(size_t(t->nbytes));
    io::File::open(ckpt.directory.shards()[size_t(t->shard)].path, /*try_direct=*/false)
        .read_exact(b.data(), t->nbytes, t->offset, name);
    return b;
}

std::vector<float> read_f32(const Checkpoint& ckpt, const std::string& name) {
    const AlignedBytes b = read_tensor(ckpt, name);
    const DType dt = ckpt.directory.find(name)->dtype;
    std::vector<float> v(b.size() / dtype_size(dt));
    widen_to_f32(b.data(), dt, int64_t(v.size()), v.data());
    return v;
}

}  // namespace

VisionWeights load_vision_weights(const Checkpoint& ckpt) {
    const VisionConfig& c = ckpt.config.vision;
    if (!c.present) throw Error(ErrorKind::Usage, "this checkpoint has no vision tower (config.json has no vision_config)");
    VisionWeights w;
    w.cfg = c;
    const std::string& tp = kVisionTowerPrefix;
    w.patch_embed = read_tensor(ckpt, tp + "patch_embed.proj.weight");
    w.pos_table = read_f32(ckpt, tp + "patch_embed.pos_emb.weight");
    w.blocks.resize(size_t(c.layers));
    for (int b = 0; b < c.layers; ++b) {
        const std::string p = tp + "encoder.blocks." + std::to_string(b) + ".";
        VisionBlockWeights& blk = w.blocks[size_t(b)];
        blk.norm0 = read_f32(ckpt, p + "norm0.weight");
        blk.wqkv = read_tensor(ckpt, p + "wqkv.weight");
        blk.wo = read_tensor(ckpt, p + "wo.weight");
        blk.norm1 = read_f32(ckpt, p + "norm1.weight");
        blk.fc0 = read_tensor(ckpt, p + "mlp.fc0.weight");
        blk.fc1 = read_tensor(ckpt, p + "mlp.fc1.weight");
    }
    w.final_norm = read_f32(ckpt, tp + "encoder.final_layernorm.weight");
    w.proj0 = read_tensor(ckpt, kProjectorPrefix + "proj.0.weight");
    w.proj2 = read_tensor(ckpt, kProjectorPrefix + "proj.2.weight");
    w.post_norm = read_f32(ckpt, kProjectorPrefix + "post_norm.weight");
    return w;
}

}  // namespace k3

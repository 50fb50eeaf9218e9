// vision_config -> VisionConfig (docs/model.md "The vision config and tensors"). Every value the
// tower's maths depends on is read and checked; the keys that only name the one variant k3serve
// implements (RMSNorm, no biases, mlp2, bilinear table, sd2_tpool merge, patchmergerv2) are checked
// when present, since the release always writes them and a K2.5-style config must be refused, not
// misread.
#include "weights/vision_config.h"

#include <nlohmann/json.hpp>

namespace k3 {

namespace {

using json = nlohmann::json;

class VisionReader {
public:
    VisionReader(const json& v, std::vector<std::string>& problems) : v_(v), problems_(problems) {}

    void positive_int(int& out, const char* key, int max = 1 << 20) {
        auto it = v_.find(key);
        if (it == v_.end()) return problems_.push_back("vision_config." + std::string(key) + " is missing");
        if (!it->is_number_integer() || it->get<int64_t>() < 1 || it->get<int64_t>() > max)
            return problems_.push_back("vision_config." + std::string(key) + " must be an integer in 1.." +
                                       std::to_string(max) + ", got " + it->dump());
        out = it->get<int>();
    }
    void string_is(const char* key, const char* want, const char* why) {
        auto it = v_.find(key);
        if (it == v_.end()) return;
        if (!it->is_string() || it->get<std::string>() != want)
            problems_.push_back("vision_config." + std::string(key) + " is " + it->dump() + "; k3serve implements only \"" +
                                want + "\" (" + why + ")");
    }
    void false_if_present(const char* key) {
        auto it = v_.find(key);
        if (it == v_.end()) return;
        if (!it->is_boolean() || it->get<bool>())
            problems_.push_back("vision_config." + std::string(key) + " is " + it->dump() +
                                "; the K3 vision tower has no biases and k3serve implements none");
    }

private:
    const json& v_;
    std::vector<std::string>& problems_;
};

}  // namespace

VisionConfig parse_vision_config(const json& root, int text_hidden, int vocab_size,
                                 std::vector<std::string>& problems) {
    VisionConfig c;
    auto it = root.find("vision_config");
    if (it == root.end() || !it->is_object() || !it->contains("vt_hidden_size")) return c;  // text only
    const json& v = *it;
    VisionReader r(v, problems);
    const size_t before = problems.size();
    r.positive_int(c.patch_size, "patch_size", 64);
    r.positive_int(c.hidden, "vt_hidden_size", 1 << 16);
    r.positive_int(c.intermediate, "vt_intermediate_size", 1 << 18);
    r.positive_int(c.heads, "vt_num_attention_heads", 1024);
    r.positive_int(c.layers, "vt_num_hidden_layers", 1024);
    r.positive_int(c.qkv_hidden, "qkv_hidden_size", 1 << 16);
    r.positive_int(c.pos_emb_height, "init_pos_emb_height", 1024);
    r.positive_int(c.pos_emb_width, "init_pos_emb_width", 1024);
    r.positive_int(c.mm_hidden, "mm_hidden_size", 1 << 16);
    r.positive_int(c.text_hidden, "text_hidden_size", 1 << 22);
    r.string_is("norm_type", "rmsnorm", "K2.5's LayerNorm tower is a different model");
    r.string_is("mlp_type", "mlp2", "fc0 -> GELU-tanh -> fc1");
    r.string_is("pos_emb_type", "divided_fixed", "the learned 2-D table");
    r.string_is("pos_emb_interpolation_mode", "bilinear", "docs/model.md, The tower");
    r.string_is("merge_type", "sd2_tpool", "the 2x2 space-to-depth merge");
    r.string_is("mm_projector_type", "patchmergerv2", "Linear, GELU, Linear, post-RMSNorm");
    r.false_if_present("attn_bias");
    r.false_if_present("linear_bias");
    r.false_if_present("patch_embed_proj_bias");
    if (auto m = v.find("merge_kernel_size"); m == v.end()) {
        problems.push_back("vision_config.merge_kernel_size is missing");
    } else if (!m->is_array() || m->size() != 2 || !(*m)[0].is_number_integer() || !(*m)[1].is_number_integer() ||
               (*m)[0].get<int>() != 2 || (*m)[1].get<int>() != 2) {
        problems.push_back("vision_config.merge_kernel_size is " + m->dump() + "; k3serve implements the 2x2 merge only");
    } else {
        c.merge_h = c.merge_w = 2;
    }
    c.projector_eps = 1e-5f;
    if (auto e = v.find("projector_ln_eps"); e != v.end()) {
        if (!e->is_number() || !(e->get<double>() > 0))
            problems.push_back("vision_config.projector_ln_eps must be a positive number, got " + e->dump());
        else
            c.projector_eps = e->get<float>();
    }
    if (auto p = root.find("media_placeholder_token_id"); p == root.end()) {
        problems.push_back("media_placeholder_token_id is missing (needed with a vision_config)");
    } else if (!p->is_number_integer() || p->get<int64_t>() < 0 || p->get<int64_t>() >= vocab_size) {
        problems.push_back("media_placeholder_token_id is " + p->dump() + ", not a token id below vocab_size " +
                           std::to_string(vocab_size));
    } else {
        c.media_placeholder_token_id = p->get<int>();
    }
    if (problems.size() != before) return c;
    // The tower's arithmetic: 2-D RoPE rotates pairs, half by column and half by row, so the head
    // width is a multiple of 4; the projector takes the four merged slots of mm_hidden each.
    if (c.qkv_hidden % c.heads || (c.qkv_hidden / c.heads) % 4)
        problems.push_back("vision_config.qkv_hidden_size " + std::to_string(c.qkv_hidden) + " / vt_num_attention_heads " +
                           std::to_string(c.heads) + " must be a whole head width divisible by 4 (2-D RoPE)");
    if (c.mm_hidden != c.hidden)
        problems.push_back("vision_config.mm_hidden_size " + std::to_string(c.mm_hidden) + " differs from vt_hidden_size " +
                           std::to_string(c.hidden) + "; the projector reads the tower's rows");
    if (c.text_hidden != text_hidden)
        problems.push_back("vision_config.text_hidden_size " + std::to_string(c.text_hidden) +
                           " differs from the language model's hidden_size " + std::to_string(text_hidden));
    c.present = problems.size() == before;
    return c;
}

void write_vision_config(const VisionConfig& c, nlohmann::ordered_json& root) {
    root["media_placeholder_token_id"] = c.media_placeholder_token_id;
    root["vision_config"] = {
        {"model_type", "moonvit_v2"},
        {"patch_size", c.patch_size},
        {"vt_hidden_size", c.hidden},
        {"vt_intermediate_size", c.intermediate},
        {"vt_num_attention_heads", c.heads},
        {"vt_num_hidden_layers", c.layers},
        {"qkv_hidden_size", c.qkv_hidden},
        {"norm_type", "rmsnorm"},
        {"attn_bias", false},
        {"linear_bias", false},
        {"patch_embed_proj_bias", false},
        {"mlp_type", "mlp2"},
        {"activation_func", "gelu_pytorch_tanh"},
        {"pos_emb_type", "divided_fixed"},
        {"init_pos_emb_height", c.pos_emb_height},
        {"init_pos_emb_width", c.pos_emb_width},
        {"init_pos_emb_time", 4},
        {"pos_emb_interpolation_mode", "bilinear"},
        {"merge_kernel_size", {c.merge_h, c.merge_w}},
        {"merge_type", "sd2_tpool"},
        {"mm_projector_type", "patchmergerv2"},
        {"mm_hidden_size", c.mm_hidden},
        {"text_hidden_size", c.text_hidden},
        {"projector_hidden_act", "gelu"},
        {"projector_ln_eps", double(c.projector_eps) == 1e-5f ? 1e-5 : double(c.projector_eps)},
    };
}

}  // namespace k3

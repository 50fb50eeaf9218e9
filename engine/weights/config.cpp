// config.json -> ModelConfig (docs/model.md "Configuration"). Two passes, each reporting everything
// it finds in one message: first every key is read (missing required keys and wrongly typed values
// are collected), then the shape is checked against what k3serve implements. Nothing is defaulted
// except the three booleans the release format defaults (mla_use_output_gate, moe_renormalize,
// latent_moe_use_norm), and nothing unusual is approximated: it is refused by name.
#include "weights/config.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "k3/error.h"
#include "util/strict_json.h"

namespace k3 {

namespace {

using json = nlohmann::json;

// Bounds that keep every derived size (products of two of these, times 4 bytes) far inside
// int64, and reject configs that would make the tensor list itself absurd. K3's largest
// single dimension is vocab 163840; its widest derived one is 96*256 = 24576.
constexpr int64_t kMaxDim = 1 << 22;          // any single width, vocab included
constexpr int64_t kMaxDerivedWidth = 1 << 24; // heads * head width, shared width
constexpr int kMaxLayers = 4096;
constexpr int kMaxExperts = 1 << 16;

std::string type_name(const json& v) {
    if (v.is_number_integer()) return "integer";
    if (v.is_number_float()) return "number";
    return v.type_name();
}

bool fits_int(const json& v) {
    if (!v.is_number_integer()) return false;
    if (v.is_number_unsigned()) return v.get<uint64_t>() <= uint64_t(std::numeric_limits<int>::max());
    int64_t i = v.get<int64_t>();
    return i >= std::numeric_limits<int>::min() && i <= std::numeric_limits<int>::max();
}

std::string join(const std::vector<std::string>& items, const char* sep) {
    std::string out;
    for (size_t i = 0; i < items.size(); ++i) {
        if (i) out += sep;
        out += items[i];
    }
    return out;
}

// Looks keys up in text_config, then text_config.linear_attn_config (or a top-level
// linear_attn_config, as Kimi-Linear's flat config has it), then the top level; the primary
// spelling everywhere before the alias. Records missing and wrongly typed keys instead of
// throwing, so one message can list them all.
class ConfigReader {
public:
    ConfigReader(const json& root, std::string origin) : root_(root), origin_(std::move(origin)) {
        if (auto it = root.find("text_config"); it != root.end()) {
            if (it->is_object()) text_ = &*it;
            else bad_type_.push_back("text_config must be an object, got " + type_name(*it));
        }
        const json* holders[] = {text_, &root_};
        for (const json* h : holders) {
            if (!h) continue;
            auto it = h->find("linear_attn_config");
            if (it == h->end()) continue;
            if (it->is_object()) {
                linear_ = &*it;
                linear_path_ = (h == text_ ? "text_config." : "") + std::string("linear_attn_config");
                break;
            }
            bad_type_.push_back(std::string(h == text_ ? "text_config." : "") +
                                "linear_attn_config must be an object, got " + type_name(*it));
        }
    }

    bool is_release_form() const { return text_ != nullptr; }

    // Where a key may live. KDA dims use kLinearOnly for their primary spelling so that an
    // unrelated top-level "num_heads"/"head_dim" is never taken for them.
    enum Scope { kAnywhere, kLinearOnly };

    struct Spelling {
        const char* name;
        Scope scope = kAnywhere;
    };

    // The value and the dotted path it was found at, or nullptr. A JSON null counts as absent.
    const json* find(std::initializer_list<Spelling> spellings, std::string* path = nullptr) const {
        for (const Spelling& s : spellings) {
            struct Place {
                const json* obj;
                std::string prefix;
            };
            std::vector<Place> places;
            if (s.scope == kAnywhere && text_) places.push_back({text_, "text_config."});
            if (linear_) places.push_back({linear_, linear_path_ + "."});
            if (s.scope == kAnywhere) places.push_back({&root_, ""});
            for (const Place& p : places) {
                auto it = p.obj->find(s.name);
                if (it != p.obj->end() && !it->is_null()) {
                    if (path) *path = p.prefix + s.name;
                    return &*it;
                }
            }
        }
        return nullptr;
    }

    void read_int(int& out, std::initializer_list<Spelling> spellings, bool required = true) {
        std::string path;
        const json* v = find(spellings, &path);
        if (!v) return note_missing(spellings, required);
        if (!v->is_number_integer()) return note_type(path, "an integer", *v);
        if (!fits_int(*v)) return note_type(path, "an integer that fits in 32 bits", *v);
        out = v->get<int>();
        paths_[spellings.begin()->name] = path;
    }

    void read_float(float& out, std::initializer_list<Spelling> spellings, bool required = true) {
        std::string path;
        const json* v = find(spellings, &path);
        if (!v) return note_missing(spellings, required);
        if (!v->is_number()) return note_type(path, "a number", *v);
        double d = v->get<double>();
        if (!std::isfinite(d) || std::fabs(d) > std::numeric_limits<float>::max())
            return note_type(path, "a finite number", *v);
        out = float(d);
        paths_[spellings.begin()->name] = path;
    }

    void read_bool(bool& out, std::initializer_list<Spelling> spellings, bool required = true) {
        std::string path;
        const json* v = find(spellings, &path);
        if (!v) return note_missing(spellings, required);
        if (!v->is_boolean()) return note_type(path, "true or false", *v);
        out = v->get<bool>();
        paths_[spellings.begin()->name] = path;
    }

    // Returns true when present (and well typed).
    bool read_string(std::string& out, std::initializer_list<Spelling> spellings, bool required) {
        std::string path;
        const json* v = find(spellings, &path);
        if (!v) return note_missing(spellings, required), false;
        if (!v->is_string()) return note_type(path, "a string", *v), false;
        out = v->get<std::string>();
        paths_[spellings.begin()->name] = path;
        return true;
    }

    bool read_int_list(std::vector<int>& out, std::initializer_list<Spelling> spellings, bool required) {
        std::string path;
        const json* v = find(spellings, &path);
        if (!v) return note_missing(spellings, required), false;
        if (!v->is_array()) return note_type(path, "an array of integers", *v), false;
        out.clear();
        for (const json& e : *v) {
            if (!fits_int(e)) {
                note_type(path, "an array of integers", e);
                return false;
            }
            out.push_back(e.get<int>());
        }
        paths_[spellings.begin()->name] = path;
        return true;
    }

    // The dotted path a key was read from (for messages), or its primary name.
    std::string path_of(const char* name) const {
        auto it = paths_.find(name);
        return it == paths_.end() ? name : it->second;
    }

    // Throws one Config error listing every missing and wrongly typed key.
    void throw_if_incomplete() const {
        if (missing_.empty() && bad_type_.empty()) return;
        std::string msg = origin_ + ": cannot read the model config:";
        if (!missing_.empty())
            msg += "\n  missing required keys (looked up in text_config, linear_attn_config, then the top level): " +
                   join(missing_, ", ");
        for (const auto& b : bad_type_) msg += "\n  " + b;
        throw Error(ErrorKind::Config, msg);
    }

private:
    void note_missing(std::initializer_list<Spelling> spellings, bool required) {
        if (!required) return;
        std::string name = spellings.begin()->name;
        if (spellings.size() > 1) {
            std::vector<std::string> aliases;
            for (auto it = spellings.begin() + 1; it != spellings.end(); ++it) aliases.push_back(it->name);
            name += " (or " + join(aliases, ", ") + ")";
        }
        missing_.push_back(name);
    }

    void note_type(const std::string& path, const char* expected, const json& got) {
        std::string shown = got.dump();
        if (shown.size() > 60) shown = shown.substr(0, 57) + "...";
        bad_type_.push_back(path + " must be " + expected + ", got " + type_name(got) + " " + shown);
    }

    const json& root_;
    std::string origin_;
    const json* text_ = nullptr;
    const json* linear_ = nullptr;
    std::string linear_path_;
    std::vector<std::string> missing_, bad_type_;
    std::map<std::string, std::string> paths_;
};

// Collects structural problems; each names the key (as found in the file) and the rule.
class ShapeChecker {
public:
    ShapeChecker(const ConfigReader& reader, std::string origin) : r_(reader), origin_(std::move(origin)) {}

    void refuse(const std::string& message) { problems_.push_back(message); }

    void size(int value, const char* name, int64_t max = kMaxDim) {
        if (value <= 0) refuse(r_.path_of(name) + " must be positive, got " + std::to_string(value));
        else if (value > max)
            refuse(r_.path_of(name) + " = " + std::to_string(value) + " is larger than k3serve accepts (" +
                   std::to_string(max) + ")");
    }

    void derived_width(int64_t value, const std::string& what) {
        if (value > kMaxDerivedWidth)
            refuse(what + " = " + std::to_string(value) + " is larger than k3serve accepts (" +
                   std::to_string(kMaxDerivedWidth) + ")");
    }

    const ConfigReader& reader() const { return r_; }

    void throw_if_any() const {
        if (problems_.empty()) return;
        std::string msg = origin_ + ": model config refused:";
        for (const auto& p : problems_) msg += "\n  " + p;
        throw Error(ErrorKind::Config, msg);
    }

private:
    const ConfigReader& r_;
    std::string origin_;
    std::vector<std::string> problems_;
};

std::string list_str(const std::vector<int>& v) {
    std::string s = "[";
    for (size_t i = 0; i < v.size(); ++i) {
        if (i) s += ",";
        s += std::to_string(v[i]);
    }
    return s + "]";
}

// The layer map: full_attn_layers (one-based) are MLA, the rest KDA. When kda_layers is also
// given, the two must partition 1..n exactly (the C engine reads only the first list,
// first-party code only the second; a file where they disagree cannot be trusted).
void derive_layer_kinds(ModelConfig& c, ShapeChecker& check) {
    const int n = c.num_hidden_layers;
    if (n <= 0 || n > kMaxLayers) return;  // already refused
    const std::string full_key = check.reader().path_of("full_attn_layers");
    const std::string kda_key = check.reader().path_of("kda_layers");
    c.layer_kind.assign(size_t(n), LayerKind::Kda);
    std::vector<int> seen(size_t(n) + 1, 0);  // 0 unseen, 1 full, 2 kda
    bool ok = true;
    for (int one_based : c.full_attn_layers) {
        if (one_based < 1 || one_based > n) {
            check.refuse(full_key + " holds " + std::to_string(one_based) + ", outside 1.." + std::to_string(n) +
                         " (the list is ONE-based)");
            ok = false;
            continue;
        }
        if (seen[size_t(one_based)]) {
            check.refuse(full_key + " lists layer " + std::to_string(one_based) + " twice");
            ok = false;
        }
        seen[size_t(one_based)] = 1;
        c.layer_kind[size_t(one_based - 1)] = LayerKind::Mla;
    }
    if (int(c.full_attn_layers.size()) >= n)
        check.refuse(full_key + " names " + std::to_string(c.full_attn_layers.size()) + " layers of " +
                     std::to_string(n) + "; at least one layer must be KDA");
    if (c.kda_layers.empty()) return;
    for (int one_based : c.kda_layers) {
        if (one_based < 1 || one_based > n) {
            check.refuse(kda_key + " holds " + std::to_string(one_based) + ", outside 1.." + std::to_string(n) +
                         " (the list is ONE-based)");
            ok = false;
            continue;
        }
        if (seen[size_t(one_based)] == 1) {
            check.refuse("layer " + std::to_string(one_based) + " (one-based) is in both " + full_key + " and " +
                         kda_key);
            ok = false;
        } else if (seen[size_t(one_based)] == 2) {
            check.refuse(kda_key + " lists layer " + std::to_string(one_based) + " twice");
            ok = false;
        }
        seen[size_t(one_based)] = 2;
    }
    if (!ok) return;
    std::vector<int> uncovered;
    for (int l = 1; l <= n; ++l)
        if (!seen[size_t(l)]) uncovered.push_back(l);
    if (!uncovered.empty())
        check.refuse(kda_key + " and " + full_key + " do not cover every layer: missing (one-based) " +
                     list_str(uncovered));
}

// quantization_config, when present, must describe MXFP4 with 32-input groups (the format the
// expert kernels implement). compressed-tensors nests the numbers under config_groups, so every
// group_size / num_bits found anywhere inside is checked.
void check_quantization(const json* q, const std::string& path, ShapeChecker& check) {
    if (!q) return;
    if (!q->is_object()) {
        check.refuse(path + " must be an object, got " + type_name(*q));
        return;
    }
    std::vector<std::string> formats;
    std::vector<int64_t> group_sizes, bits;
    bool bad_types = false;
    // Iterative walk; the file was parsed with a nesting bound, so the stack stays small.
    std::vector<const json*> stack{q};
    while (!stack.empty()) {
        const json* node = stack.back();
        stack.pop_back();
        if (node->is_array()) {
            for (const json& e : *node) stack.push_back(&e);
            continue;
        }
        if (!node->is_object()) continue;
        for (auto it = node->begin(); it != node->end(); ++it) {
            const std::string& k = it.key();
            if (k == "format" || k == "quant_method") {
                if (it->is_string()) formats.push_back(it->get<std::string>());
            } else if (k == "group_size") {
                if (it->is_number_integer()) group_sizes.push_back(it->get<int64_t>());
                else if (!it->is_null()) bad_types = true;
            } else if (k == "num_bits") {
                if (it->is_number_integer()) bits.push_back(it->get<int64_t>());
                else if (!it->is_null()) bad_types = true;
            } else if (k != "ignore") {
                stack.push_back(&*it);
            }
        }
    }
    bool mxfp4 = std::any_of(formats.begin(), formats.end(),
                             [](const std::string& f) { return f.find("mxfp4") != std::string::npos; });
    if (!mxfp4)
        check.refuse(path + " does not describe MXFP4 (format/quant_method: " +
                     (formats.empty() ? std::string("none") : join(formats, ", ")) +
                     "); k3serve implements only MXFP4 routed experts");
    if (bad_types) check.refuse(path + ": group_size and num_bits must be integers");
    if (group_sizes.empty()) check.refuse(path + " gives no group_size (MXFP4 needs 32)");
    for (int64_t g : group_sizes)
        if (g != kMxfp4Group)
            check.refuse(path + " group_size is " + std::to_string(g) + "; k3serve implements MXFP4 with group 32");
    for (int64_t b : bits)
        if (b != 4) check.refuse(path + " num_bits is " + std::to_string(b) + "; MXFP4 is 4-bit");
}

}  // namespace

ModelConfig parse_config(const std::string& json_text, const std::string& origin) {
    json root = parse_strict_json(json_text, origin, ErrorKind::Config);
    if (!root.is_object()) throw Error(ErrorKind::Config, origin + ": top level must be a JSON object");

    ConfigReader r(root, origin);
    ModelConfig c;
    using S = ConfigReader::Spelling;

    // ---- read every key (missing / mistyped ones are collected) ----
    r.read_int(c.hidden_size, {{"hidden_size"}});
    r.read_int(c.num_hidden_layers, {{"num_hidden_layers"}});
    r.read_int(c.vocab_size, {{"vocab_size"}});
    r.read_float(c.rms_norm_eps, {{"rms_norm_eps"}});
    r.read_int(c.intermediate_size, {{"intermediate_size"}});
    r.read_int(c.first_k_dense_replace, {{"first_k_dense_replace"}});
    r.read_int(c.attn_res_block_size, {{"attn_res_block_size"}});
    r.read_int(c.max_position_embeddings, {{"max_position_embeddings"}}, false);
    r.read_int(c.bos_token_id, {{"bos_token_id"}}, false);
    r.read_int(c.eos_token_id, {{"eos_token_id"}}, false);
    r.read_int(c.pad_token_id, {{"pad_token_id"}}, false);

    r.read_int(c.num_attention_heads, {{"num_attention_heads"}});
    c.num_key_value_heads = -1;
    r.read_int(c.num_key_value_heads, {{"num_key_value_heads"}}, false);
    r.read_int(c.q_lora_rank, {{"q_lora_rank"}});
    r.read_int(c.kv_lora_rank, {{"kv_lora_rank"}});
    r.read_int(c.qk_nope_head_dim, {{"qk_nope_head_dim"}});
    r.read_int(c.qk_rope_head_dim, {{"qk_rope_head_dim"}});
    r.read_int(c.v_head_dim, {{"v_head_dim"}});
    r.read_bool(c.mla_use_output_gate, {{"mla_use_output_gate"}}, false);

    r.read_int(c.kda_num_heads, {S{"num_heads", ConfigReader::kLinearOnly}, S{"kda_num_heads"}});
    r.read_int(c.kda_head_dim, {S{"head_dim", ConfigReader::kLinearOnly}, S{"kda_head_dim"}});
    r.read_int(c.short_conv_kernel_size, {{"short_conv_kernel_size"}});
    r.read_float(c.gate_lower_bound, {{"gate_lower_bound"}});
    r.read_int_list(c.full_attn_layers, {{"full_attn_layers"}}, true);
    r.read_int_list(c.kda_layers, {{"kda_layers"}}, false);

    r.read_int(c.num_experts, {{"num_experts"}});
    r.read_int(c.num_experts_per_token, {{"num_experts_per_token"}});
    r.read_int(c.num_shared_experts, {{"num_shared_experts"}});
    r.read_int(c.routed_expert_hidden_size, {{"routed_expert_hidden_size"}});
    r.read_int(c.moe_intermediate_size, {{"moe_intermediate_size"}});
    r.read_float(c.routed_scaling_factor, {{"routed_scaling_factor"}});
    r.read_bool(c.moe_renormalize, {{"moe_renormalize"}}, false);
    r.read_bool(c.latent_moe_use_norm, {{"latent_moe_use_norm"}}, false);
    r.read_float(c.activation_situ_beta, {{"activation_situ_beta"}, {"situ_beta"}});
    r.read_float(c.activation_situ_linear_beta, {{"activation_situ_linear_beta"}, {"situ_linear_beta"}});

    // Keys that only state semantics k3serve hard-codes. The released (nested) form always carries
    // them, so there they are required; the flat test form (docs/model.md "Configuration") omits
    // them.
    const bool release = r.is_release_form();
    std::string hidden_act, router_act, topk_method;
    bool have_hidden_act = r.read_string(hidden_act, {{"hidden_act"}}, release);
    bool have_router_act = r.read_string(router_act, {{"moe_router_activation_func"}}, release);
    bool have_topk_method = r.read_string(topk_method, {{"topk_method"}}, false);
    int nextn = 0, expert_group = 1, topk_group = 1, moe_layer_freq = 1;
    r.read_int(nextn, {{"num_nextn_predict_layers"}}, release);
    r.read_int(expert_group, {{"num_expert_group"}}, false);
    r.read_int(topk_group, {{"topk_group"}}, false);
    r.read_int(moe_layer_freq, {{"moe_layer_freq"}}, false);
    bool tie = false, mla_use_nope = true, full_rank_gate = true;
    r.read_bool(tie, {{"tie_word_embeddings"}}, release);
    r.read_bool(mla_use_nope, {{"mla_use_nope"}}, false);
    r.read_bool(full_rank_gate, {{"use_full_rank_gate"}}, false);
    std::string quant_path;
    const json* quant = r.find({{"quantization_config"}}, &quant_path);

    r.throw_if_incomplete();

    // ---- structural checks (all problems collected) ----
    ShapeChecker check(r, origin);
    check.size(c.hidden_size, "hidden_size");
    check.size(c.num_hidden_layers, "num_hidden_layers", kMaxLayers);
    check.size(c.vocab_size, "vocab_size");
    check.size(c.intermediate_size, "intermediate_size");
    check.size(c.attn_res_block_size, "attn_res_block_size");
    check.size(c.num_attention_heads, "num_attention_heads");
    check.size(c.q_lora_rank, "q_lora_rank");
    check.size(c.kv_lora_rank, "kv_lora_rank");
    check.size(c.qk_nope_head_dim, "qk_nope_head_dim");
    check.size(c.qk_rope_head_dim, "qk_rope_head_dim");
    check.size(c.v_head_dim, "v_head_dim");
    check.size(c.kda_num_heads, "num_heads");
    check.size(c.kda_head_dim, "head_dim");
    check.size(c.short_conv_kernel_size, "short_conv_kernel_size", 64);
    check.size(c.num_experts, "num_experts", kMaxExperts);
    check.size(c.num_experts_per_token, "num_experts_per_token", kMaxExperts);
    check.size(c.num_shared_experts, "num_shared_experts", 64);
    check.size(c.routed_expert_hidden_size, "routed_expert_hidden_size");
    check.size(c.moe_intermediate_size, "moe_intermediate_size");
    check.derived_width(int64_t(c.kda_num_heads) * c.kda_head_dim, "KDA width num_heads * head_dim");
    check.derived_width(int64_t(c.num_attention_heads) * (c.qk_nope_head_dim + c.qk_rope_head_dim),
                        "MLA query width num_attention_heads * (qk_nope_head_dim + qk_rope_head_dim)");
    check.derived_width(int64_t(c.num_attention_heads) * (c.qk_nope_head_dim + c.v_head_dim),
                        "MLA key/value width num_attention_heads * (qk_nope_head_dim + v_head_dim)");
    check.derived_width(int64_t(c.moe_intermediate_size) * c.num_shared_experts,
                        "shared expert width moe_intermediate_size * num_shared_experts");
    if (!(c.rms_norm_eps > 0)) check.refuse(r.path_of("rms_norm_eps") + " must be positive");
    if (c.first_k_dense_replace < 0 || c.first_k_dense_replace > c.num_hidden_layers)
        check.refuse(r.path_of("first_k_dense_replace") + " = " + std::to_string(c.first_k_dense_replace) +
                     " must be within 0..num_hidden_layers (" + std::to_string(c.num_hidden_layers) + ")");
    if (c.max_position_embeddings < 0)
        check.refuse(r.path_of("max_position_embeddings") + " must not be negative");
    if (c.num_experts_per_token > c.num_experts)
        check.refuse(r.path_of("num_experts_per_token") + " = " + std::to_string(c.num_experts_per_token) +
                     " exceeds " + r.path_of("num_experts") + " = " + std::to_string(c.num_experts));
    if (c.num_key_value_heads == -1) c.num_key_value_heads = c.num_attention_heads;
    else if (c.num_key_value_heads != c.num_attention_heads)
        check.refuse(r.path_of("num_key_value_heads") + " = " + std::to_string(c.num_key_value_heads) +
                     " differs from num_attention_heads = " + std::to_string(c.num_attention_heads) +
                     "; grouped KV heads are not part of Kimi K3 and not implemented");

    // MXFP4: the packed and scale tensors divide every expert input width by 2 and by 32.
    if (c.routed_expert_hidden_size > 0 && c.routed_expert_hidden_size % kMxfp4Group)
        check.refuse(r.path_of("routed_expert_hidden_size") + " = " + std::to_string(c.routed_expert_hidden_size) +
                     " is not a multiple of the MXFP4 group (32); w1/w3 read this many inputs");
    if (c.moe_intermediate_size > 0 && c.moe_intermediate_size % kMxfp4Group)
        check.refuse(r.path_of("moe_intermediate_size") + " = " + std::to_string(c.moe_intermediate_size) +
                     " is not a multiple of the MXFP4 group (32); w2 reads this many inputs");
    check_quantization(quant, quant_path, check);

    // Semantics k3serve implements exactly one way.
    if (have_hidden_act && hidden_act != "situ")
        check.refuse(r.path_of("hidden_act") + " is \"" + hidden_act + "\"; k3serve implements only \"situ\"");
    if (have_router_act && router_act != "sigmoid")
        check.refuse(r.path_of("moe_router_activation_func") + " is \"" + router_act +
                     "\"; k3serve implements only the \"sigmoid\" router");
    if (have_topk_method && topk_method != "noaux_tc")
        check.refuse(r.path_of("topk_method") + " is \"" + topk_method +
                     "\"; k3serve implements only \"noaux_tc\" (bias on selection only)");
    if (expert_group != 1)
        check.refuse(r.path_of("num_expert_group") + " = " + std::to_string(expert_group) +
                     "; grouped routing is not implemented (K3 has one group)");
    if (topk_group != 1)
        check.refuse(r.path_of("topk_group") + " = " + std::to_string(topk_group) +
                     "; grouped routing is not implemented (K3 has one group)");
    if (moe_layer_freq != 1)
        check.refuse(r.path_of("moe_layer_freq") + " = " + std::to_string(moe_layer_freq) +
                     "; k3serve implements MoE on every layer from first_k_dense_replace on");
    if (nextn != 0)
        check.refuse(r.path_of("num_nextn_predict_layers") + " = " + std::to_string(nextn) +
                     "; multi-token-prediction heads are not part of Kimi K3 and not implemented");
    if (tie)
        check.refuse(r.path_of("tie_word_embeddings") +
                     " is true; Kimi K3 ships a separate lm_head and tied embeddings are not implemented");
    if (!mla_use_nope)
        check.refuse(r.path_of("mla_use_nope") + " is false; k3serve implements NoPE MLA only (no rotary embedding)");
    if (!full_rank_gate)
        check.refuse(r.path_of("use_full_rank_gate") + " is false; k3serve implements the full-rank KDA output gate only");
    if (!c.mla_use_output_gate)
        check.refuse(r.path_of("mla_use_output_gate") + " is false; k3serve implements gated MLA only");
    if (!c.latent_moe_use_norm)
        check.refuse(r.path_of("latent_moe_use_norm") + " is false; k3serve implements the normed latent MoE only");

    std::vector<std::string> vision_problems;
    c.vision = parse_vision_config(root, c.hidden_size, c.vocab_size, vision_problems);
    for (auto& p : vision_problems) check.refuse(p);

    derive_layer_kinds(c, check);
    check.throw_if_any();
    return c;
}

ModelConfig load_config(const std::filesystem::path& path) {
    std::error_code ec;
    if (!std::filesystem::is_regular_file(path, ec))
        throw Error(ErrorKind::Config, path.string() + ": no such config file");
    auto size = std::filesystem::file_size(path, ec);
    if (ec) throw Error(ErrorKind::Config, path.string() + ": cannot read: " + ec.message());
    if (size > (16u << 20)) throw Error(ErrorKind::Config, path.string() + ": larger than 16 MiB, not a config.json");
    std::ifstream in(path, std::ios::binary);
    std::ostringstream text;
    text << in.rdbuf();
    if (!in && !in.eof()) throw Error(ErrorKind::Config, path.string() + ": read failed");
    return parse_config(text.str(), path.string());
}

std::string describe(const ModelConfig& c) {
    int mla = 0;
    for (LayerKind k : c.layer_kind) mla += k == LayerKind::Mla;
    int kda = int(c.layer_kind.size()) - mla;
    std::ostringstream s;
    s << "hidden=" << c.hidden_size << " layers=" << c.num_hidden_layers << " vocab=" << c.vocab_size << " | " << mla
      << " MLA + " << kda << " KDA | experts " << c.num_experts << " top" << c.num_experts_per_token << " shared"
      << c.num_shared_experts << " | latent=" << c.routed_expert_hidden_size;
    return s.str();
}

}  // namespace k3

// Named model shapes for `k3serve make-model --preset NAME` (README, "Synthetic models"), and
// the released-format config.json written for any shape. A preset is a complete ModelConfig
// (derived layer map included), the number of shards it is written in by default, and whether
// its weights lean toward ending answers (synthetic/weights.h, AnswerEnding).
#pragma once
#include <string>
#include <vector>

#include "weights/config.h"
#include "synthetic/vocab.h"
#include "synthetic/weights.h"

namespace k3 {

struct ModelPreset {
    std::string name;
    std::string summary;     // one line for --help and the README
    ModelConfig config;      // complete, layer_kind filled in
    int default_shards = 1;
    AnswerEnding ending;     // off but for `agent`
};

// All presets, smallest first: tiny, tiny-wide, demo, agent, k3-mini; then k3-slice (K3's layer
// sizes).
const std::vector<ModelPreset>& model_presets();
// The preset called `name`, or nullptr.
const ModelPreset* find_preset(const std::string& name);

// The config.json text k3serve writes for `cfg`, in the release's nested form: a
// KimiK3ForConditionalGeneration wrapper with its vision_config (when cfg.vision.present), and
// text_config holding every key of the release's (docs/model.md "Configuration")
// (linear_attn_config with ONE-based layer lists, quantization_config).
std::string release_config_json(const ModelConfig& cfg);

}  // namespace k3

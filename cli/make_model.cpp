// `k3serve make-model OUT_DIR --preset NAME [--seed N] [--shards N] [--force]`: writes a
// synthetic Kimi K3 checkpoint (synthetic_checkpoint.h) of one of the presets (model_presets.h).
#include <cerrno>
#include <cstdio>
#include <algorithm>
#include <cstdlib>
#include <string>
#include <string_view>

#include "k3/cli.h"
#include "cli/subcommand.h"
#include "synthetic/model_presets.h"
#include "synthetic/checkpoint.h"
#include "k3/error.h"

namespace k3::cli {

namespace {

std::string usage() {
    std::string s =
        "usage: k3serve make-model OUT_DIR --preset NAME [--seed N] [--shards N] [--force]\n"
        "\n"
        "Writes a random-weight checkpoint in Kimi K3's released layout (nested config.json,\n"
        "safetensors shards + index, MXFP4 experts, tiktoken.model, tokenizer_config.json).\n"
        "The same preset and seed always give byte-identical files.\n"
        "\n"
        "  --preset NAME  one of:\n";
    for (const auto& p : model_presets()) {
        int64_t bytes = 0;
        for (const auto& t : model_tensors(p.config)) bytes += t.nbytes();
        char line[512];
        std::snprintf(line, sizeof line, "                   %-10s %s; %.1f MB, %d shards\n", p.name.c_str(), p.summary.c_str(),
                      double(bytes) / 1e6, p.default_shards);
        s += line;
    }
    s +=
        "  --seed N       random seed (unsigned 64-bit, default 0)\n"
        "  --shards N     number of safetensors files (default: the preset's)\n"
        "  --force        replace a model make-model wrote earlier in OUT_DIR\n"
        "\n"
        "config.json is written last: its presence means the model is complete.\n";
    return s;
}

bool parse_u64(const char* s, uint64_t* out) {
    if (!s || !*s || *s == '-') return false;
    errno = 0;
    char* end = nullptr;
    const unsigned long long v = std::strtoull(s, &end, 10);
    if (errno != 0 || *end != '\0') return false;
    *out = v;
    return true;
}

}  // namespace

int make_model_main(int argc, char** argv) {
    return run_subcommand({"make-model", usage()}, argc, argv, [](ArgList& args) {
        std::string out_dir, preset_name;
        uint64_t seed = 0;
        int shards = 0;
        bool force = false;
        while (args.next()) {
            if (args.is("--preset")) {
                preset_name = args.value();
            } else if (args.is("--seed")) {
                const char* v = args.value();
                if (!parse_u64(v, &seed))
                    throw Error(ErrorKind::Usage, std::string("--seed '") + v + "': expected an unsigned integer");
            } else if (args.is("--shards")) {
                const char* v = args.value();
                uint64_t n = 0;
                if (!parse_u64(v, &n) || n == 0 || n > 99999)
                    throw Error(ErrorKind::Usage, std::string("--shards '") + v + "': expected an integer >= 1");
                shards = int(n);
            } else if (args.is("--force")) {
                force = true;
            } else {
                args.positional({&out_dir});
            }
        }
        if (out_dir.empty()) throw Error(ErrorKind::Usage, "missing OUT_DIR");
        if (preset_name.empty()) throw Error(ErrorKind::Usage, "missing --preset NAME");
        const ModelPreset* preset = find_preset(preset_name);
        if (!preset) {
            std::string names;
            for (const auto& p : model_presets()) names += (names.empty() ? "" : ", ") + p.name;
            throw Error(ErrorKind::Usage, "unknown preset '" + preset_name + "' (presets: " + names + ")");
        }
        if (shards == 0) shards = preset->default_shards;

        std::fprintf(stderr, "make-model: preset %s, seed %llu, %d shards -> %s\n", preset->name.c_str(),
                     static_cast<unsigned long long>(seed), shards, out_dir.c_str());
        const auto stats = write_synthetic_model(preset->config, out_dir, seed, shards, force,
                                                 [](const std::string& line) { std::fprintf(stderr, "  %s\n", line.c_str()); },
                                                 preset->ending);
        std::printf("make-model: wrote %s (%s): %lld tensors, %.3f GB in %d shards, %.1f s (%.0f MB/s)\n",
                    out_dir.c_str(), preset->name.c_str(), static_cast<long long>(stats.tensors),
                    double(stats.file_bytes) / 1e9, stats.shards, stats.seconds,
                    double(stats.file_bytes) / 1e6 / std::max(stats.seconds, 1e-9));
        return 0;
    });
}

}  // namespace k3::cli

// k3serve embed-image MODEL_DIR IMAGE --out ROWS.f32: the rows an image puts into the language
// model (the vision tower, the 2x2 merge and the projector), written as float32 little-endian
// [N][hidden], so the tower can be compared with an independent reference (tests/reference,
// docs/model.md "Image input").
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "cli/subcommand.h"
#include "k3/cli.h"
#include "k3/engine.h"
#include "k3/error.h"
#include "k3/image.h"
#include "k3/kernel_set_names.h"

namespace k3::cli {

namespace {

constexpr const char* kUsageHead =
    "usage: k3serve embed-image MODEL_DIR IMAGE (--out ROWS.f32 | --patches PATCHES.f32) [options]\n"
    "\n"
    "Decodes and preprocesses IMAGE (PNG or JPEG) as the release's processor does, runs the\n"
    "model's vision tower, 2x2 merge and projector, writes the N projected rows as float32\n"
    "little-endian [N][hidden] and prints N, the patch grid and the sizes.\n"
    "  --out PATH           where to write the rows\n"
    "  --patches PATH       also write the preprocessed patches, float32 [L][3][14][14] (with\n"
    "                       only --patches the model is not loaded)\n"
    "  --vision-eps X       the tower's RMSNorm epsilon (default 1.1920929e-7, PyTorch >= 2.7;\n"
    "                       0.0078125 is what PyTorch 2.4-2.6 used)\n"
    "  --threads N          compute threads (default: physical cores)\n"
    "  --kernels NAME       force a kernel set: ";
// then the kernel-set table's names (k3/kernel_set_names.h) and
constexpr const char* kUsageTail =
    "\n"
    "\n"
    "Exit codes: 0 ok, 1 runtime failure, 2 usage, an unreadable image or checkpoint, a model without a vision tower.\n";

std::string usage() { return kUsageHead + kernel_set_list() + kUsageTail; }

void write_floats(const std::string& path, const std::vector<float>& v, const char* flag) {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(v.data()), std::streamsize(v.size() * sizeof(float)));
    out.close();
    if (!out) throw Error(ErrorKind::Io, std::string("cannot write ") + flag + " " + path);
}

}  // namespace

int embed_image_main(int argc, char** argv) {
    return run_subcommand({"embed-image", usage()}, argc, argv, [](ArgList& args) {
        std::string model_dir, image_path, out_path, patches_path;
        EngineOptions opt;
        while (args.next()) {
            if (args.is("--out")) out_path = args.value();
            else if (args.is("--patches")) patches_path = args.value();
            else if (args.is("--vision-eps")) opt.vision_norm_eps = args.number();
            else if (args.is("--threads")) opt.threads = int(args.integer());
            else if (args.is("--kernels")) opt.kernels = args.value();
            else args.positional({&model_dir, &image_path});
        }
        if (model_dir.empty() || image_path.empty()) throw Error(ErrorKind::Usage, "MODEL_DIR and IMAGE are required");
        if (out_path.empty() && patches_path.empty()) throw Error(ErrorKind::Usage, "--out ROWS.f32 or --patches PATH is required");
        if (!(opt.vision_norm_eps > 0)) throw Error(ErrorKind::Usage, "--vision-eps must be a positive number");
        std::ifstream in(image_path, std::ios::binary);
        if (!in) throw Error(ErrorKind::Usage, "cannot read IMAGE " + image_path);
        const std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
        const PreparedImage image = prepare_image(bytes);
        const ImageGeometry& g = image.geometry;
        if (!patches_path.empty()) write_floats(patches_path, image.patches, "--patches");
        if (out_path.empty()) {
            std::printf("rows: %lld\nimage: %dx%d\nresized: %dx%d\npadded: %dx%d\ngrid: %dx%d (%lld patches)\n",
                        (long long)g.rows(), g.width, g.height, g.resized_width, g.resized_height, g.padded_width,
                        g.padded_height, g.grid_h, g.grid_w, (long long)g.patches());
            return std::fflush(stdout) == 0 ? 0 : 1;
        }

        opt.model_dir = model_dir;
        auto engine = Engine::load(opt, [](const std::string& s) { std::fprintf(stderr, "k3serve: %s\n", s.c_str()); });
        if (!engine->info().vision) throw Error(ErrorKind::Usage, model_dir + " has no vision tower (config.json has no vision_config)");
        const auto t0 = std::chrono::steady_clock::now();
        const std::vector<float> rows = engine->encode_image(image);
        const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

        write_floats(out_path, rows, "--out");
        std::printf("rows: %lld\nhidden: %d\nimage: %dx%d\nresized: %dx%d\npadded: %dx%d\ngrid: %dx%d (%lld patches)\nseconds: %.3f\n",
                    (long long)g.rows(), engine->info().n_embd, g.width, g.height, g.resized_width, g.resized_height,
                    g.padded_width, g.padded_height, g.grid_h, g.grid_w, (long long)g.patches(), seconds);
        return std::fflush(stdout) == 0 ? 0 : 1;
    });
}

}  // namespace k3::cli

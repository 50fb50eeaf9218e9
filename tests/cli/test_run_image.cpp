// `k3serve run --image PATH` (docs/operations.md): the prompt becomes one user chat turn with the
// image's framing and rows before the text, and the generation prompt; the report's prompt ids
// are that expansion (the chat renderer's ids with the pad replaced by the image's row ids), and
// the generated ids are what the engine gives for that prompt with the image's rows in it.
// Usage errors (no text, --ids, a missing or undecodable file, --no-vision) exit 2.
#include <doctest/doctest.h>
#include <sys/wait.h>

#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>

#include "cli/run_command.h"
#include "common/png_file.h"
#include "common/scratch.h"
#include "k3/chat.h"
#include "k3/tokenizer.h"
#include "k3/xtml.h"
#include "model/model_test_util.h"

using namespace k3;
using namespace k3::test;

namespace {

int run(const std::string& args, std::string* out = nullptr) {
    const RunResult r = run_k3serve(args, /*with_stderr=*/true);
    if (out) *out = r.out;
    return r.code;
}

}  // namespace

TEST_CASE("k3serve run --image: the image's rows in a user turn, as the engine evaluates them") {
    const std::string model = cached_model("tiny");
    const std::filesystem::path dir = scratch_dir("run_image");
    const std::string file = png_file(64, 48, [](int x, int y) {
        return std::array<uint8_t, 4>{uint8_t(x * 4), uint8_t(y * 5), uint8_t(x ^ y), 255};
    });
    const std::string path = (dir / "picture.png").string();
    std::ofstream(path, std::ios::binary) << file;
    const std::string report = (dir / "report.json").string();

    std::string out;
    REQUIRE_MESSAGE(run(model + " --prompt 'What is this?' --image " + path + " --gen 4 --report " + report, &out) == 0, out);
    CHECK_MESSAGE(out.find("image " + path + ": 64x48, 6 rows") != std::string::npos, out);
    nlohmann::json r;
    std::ifstream(report) >> r;
    const std::vector<int32_t> prompt = r["prompt_ids"].get<std::vector<int32_t>>();
    const std::vector<int32_t> generated = r["generated_ids"].get<std::vector<int32_t>>();

    // the expected prompt: the chat with the image, its pad expanded
    const auto tok = Tokenizer::load(model);
    auto image = std::make_shared<const PreparedImage>(
        prepare_image(std::span(reinterpret_cast<const uint8_t*>(file.data()), file.size())));
    ChatMessage user;
    user.role = "user";
    user.content = "What is this?";
    user.images = {{0, 64, 48}};
    const std::vector<ChatMessage> messages = {user};
    auto engine = load_engine(model, 2, "", 0);
    const std::vector<std::shared_ptr<const PreparedImage>> images = {image};
    const ExpandedPrompt expected = expand_image_pads(render_chat(*tok, messages, ChatOptions{}),
                                                      *tok->special_id(xtml::kMediaPad), images, engine->info().n_vocab);
    CHECK(prompt == expected.ids);

    // greedy from there, with the image's rows
    auto s = engine->new_session(int(prompt.size()) + 8);
    s->set_prompt_images(expected.images);
    CancelFlag cancel{false};
    REQUIRE(s->sync(expected.ids, cancel).ok());
    std::vector<int32_t> want;
    for (int i = 0; i < 4; ++i) {
        want.push_back(argmax(s->logits()));
        if (i < 3) REQUIRE(s->append(want.back(), cancel).ok());
    }
    CHECK(generated == want);
}

TEST_CASE("k3serve run --image: usage errors exit 2") {
    const std::string model = cached_model("tiny");
    const std::filesystem::path dir = scratch_dir("run_image_errors");
    const std::string junk = (dir / "junk.png").string();
    std::ofstream(junk, std::ios::binary) << "not an image at all";
    std::string out;
    CHECK(run(model + " --ids 1,2 --image " + junk, &out) == 2);
    CHECK(out.find("--image needs --prompt") != std::string::npos);
    CHECK(run(model + " --prompt hi --image " + (dir / "missing.png").string(), &out) == 2);
    CHECK(out.find("cannot read --image") != std::string::npos);
    CHECK(run(model + " --prompt hi --image " + junk, &out) == 2);
    CHECK_MESSAGE(out.find("neither PNG nor JPEG") != std::string::npos, out);
    CHECK(run(model + " --prompt hi --no-vision --image " + junk, &out) == 2);
}

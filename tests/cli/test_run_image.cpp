// `k3serve run --image PATH` (docs/operations.md): the prompt becomes one user chat turn with the
// image's framing and rows before the text, and the generation prompt; the report's prompt ids
// are that expansion (the chat renderer's ids with the pad replaced by the image's row ids), and
// the generated ids are what the engine gives for that prompt with the image's rows in it.
// Thinking follows the API's rule for a request that says nothing (xtml-tools.md, "Request
// fields to encoder inputs"): on, effort max, so the effort message comes first and the
// generation prompt opens the think channel; --no-thinking and --thinking-effort change it.
// Usage errors (no text, --ids, a missing or undecodable file, --no-vision, thinking flags
// without a chat turn, an effort K3 does not render) exit 2.
#include <doctest/doctest.h>
#include <sys/wait.h>

#include <algorithm>
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

// A small picture written to `dir`; its path.
std::string write_picture(const std::filesystem::path& dir) {
    const std::string path = (dir / "picture.png").string();
    std::ofstream(path, std::ios::binary) << png_file(64, 48, [](int x, int y) {
        return std::array<uint8_t, 4>{uint8_t(x * 4), uint8_t(y * 5), uint8_t(x ^ y), 255};
    });
    return path;
}

// The text of a chat prompt around its image: what comes before the first <|media_begin|> and
// after the last <|media_end|> (the rows between are not the tokenizer's ids).
struct AroundImage {
    std::string before, after;
};

AroundImage around_image(const Tokenizer& tok, const std::vector<int32_t>& prompt) {
    const int32_t begin = *tok.special_id(xtml::kMediaBegin), end = *tok.special_id(xtml::kMediaEnd);
    const auto first = std::find(prompt.begin(), prompt.end(), begin);
    const auto last = std::find(prompt.rbegin(), prompt.rend(), end).base();
    REQUIRE(first != prompt.end());
    REQUIRE(last != prompt.begin());
    return {tok.decode(std::span(prompt.data(), size_t(first - prompt.begin()))),
            tok.decode(std::span(&*last, size_t(prompt.end() - last)))};
}

// The report's prompt ids of `k3serve run MODEL --prompt 'What is this?' --image PICTURE FLAGS`.
std::vector<int32_t> chat_prompt_ids(const std::string& model, const std::filesystem::path& dir, const std::string& flags) {
    const std::string report = (dir / "report.json").string();
    std::string out;
    REQUIRE_MESSAGE(run(model + " --prompt 'What is this?' --image " + write_picture(dir) + " --gen 1 --report " +
                            report + " " + flags,
                        &out) == 0,
                    out);
    nlohmann::json r;
    std::ifstream(report) >> r;
    return r["prompt_ids"].get<std::vector<int32_t>>();
}

// The thinking-effort message's body (xtml-tools.md, "Internal system messages").
std::string effort_body(const std::string& effort) {
    return "`thinking_effort` guides on how much to think in your thinking channel (not including the response "
           "channel), supported values include `low`, `medium`, `high`, and `max`.\nNow the system is invoked with "
           "`thinking_effort=" + effort + "`.";
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
    // thinking as an API request that says nothing gets it: on, effort max
    ChatOptions thinking;
    thinking.thinking = true;
    thinking.thinking_effort = "max";
    const ExpandedPrompt expected = expand_image_pads(render_chat(*tok, messages, thinking),
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

TEST_CASE("k3serve run --image: thinking on with effort max unless --no-thinking; --thinking-effort sets the effort") {
    const std::string model = cached_model("tiny");
    const std::filesystem::path dir = scratch_dir("run_image_thinking");
    const auto tok = Tokenizer::load(model);

    // Nothing said: the effort message (max) opens the prompt, the generation prompt opens think.
    const AroundImage plain = around_image(*tok, chat_prompt_ids(model, dir, ""));
    CHECK(plain.before.find("<|open|>message role=\"system\" type=\"thinking-effort\"<|sep|>" + effort_body("max") +
                            "<|close|>message<|sep|><|end_of_msg|>") != std::string::npos);
    CHECK(plain.after.ends_with("<|open|>message role=\"assistant\"<|sep|><|open|>think<|sep|>"));

    // --no-thinking: no effort message, the response channel opened at once.
    const AroundImage off = around_image(*tok, chat_prompt_ids(model, dir, "--no-thinking"));
    CHECK(off.before.find("thinking_effort") == std::string::npos);
    CHECK(off.after.ends_with("<|open|>message role=\"assistant\"<|sep|><|open|>response<|sep|>"));

    // --thinking-effort low: the same shape as the default, with low.
    const AroundImage low = around_image(*tok, chat_prompt_ids(model, dir, "--thinking-effort low"));
    CHECK(low.before.find(effort_body("low")) != std::string::npos);
    CHECK(low.before.find("thinking_effort=max") == std::string::npos);
    CHECK(low.after.ends_with("<|open|>think<|sep|>"));
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
    // thinking flags need a chat turn; the effort is one K3's encoder renders
    CHECK(run(model + " --prompt hi --no-thinking", &out) == 2);
    CHECK_MESSAGE(out.find("--no-thinking and --thinking-effort apply to a chat turn (--image)") != std::string::npos, out);
    CHECK(run(model + " --ids 1,2 --thinking-effort low", &out) == 2);
    CHECK(out.find("apply to a chat turn") != std::string::npos);
    CHECK(run(model + " --prompt hi --image " + junk + " --thinking-effort medium", &out) == 2);
    CHECK_MESSAGE(out.find("--thinking-effort must be low, high or max, got 'medium'") != std::string::npos, out);
}

// Images through the real daemon (docs/api.md "Images"), `k3serve serve` on the tiny model (its
// synthetic vision tower) over loopback: an OpenAI chat image_url part, a Responses input_image
// and an Anthropic base64 image block reach the model as the same prompt (the same token count,
// which counts each image's rows); the same image again resumes from the prompt cache past it,
// another one of the same size does not; every refusal (remote URL, file path, not base64,
// undecodable data, each limit, an image outside a user turn, a model without a tower) is a 400
// naming it, and the daemon goes on serving.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include "common/daemon.h"
#include "common/model_cache.h"
#include "common/png_file.h"
#include "wire/base64.h"
#include "post_json.h"

using namespace k3::test;
using nlohmann::json;

namespace {

// A w x h PNG whose colours depend on `salt`.
std::string png(int w, int h, int salt) {
    return png_file(w, h, [&](int x, int y) {
        return std::array<uint8_t, 4>{uint8_t(x * 3 + salt), uint8_t(y * 5 + salt * 7), uint8_t((x + y) * salt), 255};
    });
}
std::string data_url(const std::string& file) { return "data:image/png;base64," + k3::server::base64_encode(file); }

json chat_with(const std::vector<std::string>& urls, const std::string& text = "What is in the picture?") {
    json parts = json::array({{{"type", "text"}, {"text", text}}});
    for (const auto& u : urls) parts.push_back({{"type", "image_url"}, {"image_url", {{"url", u}, {"detail", "auto"}}}});
    return {{"messages", json::array({{{"role", "user"}, {"content", parts}}})}, {"max_tokens", 4}, {"temperature", 0}};
}

// The 400's error object, checked to name `needle` (message) and `code`.
void refused(httplib::Client& c, const std::string& path, const json& body, const std::string& needle,
             const std::string& code) {
    const json e = post(c, path, body, 400)["error"];
    INFO(e.dump());
    CHECK(e["message"].get<std::string>().find(needle) != std::string::npos);
    if (!code.empty()) CHECK(e["code"] == code);
}

}  // namespace

TEST_CASE("images: the three APIs, the prompt cache, the prompt's length") {
    DaemonProcess d({cached_model("tiny"), "--port", "0", "--threads", "1"});
    auto c = d.client();
    const std::string image = png(100, 60, 1);  // padded to 112x84: 8x6 patches, 12 rows

    // the chat API: the image counts its rows, its framing and its size text
    const json text_only = post(c, "/v1/chat/completions",
                                {{"messages", json::array({{{"role", "user"}, {"content", "What is in the picture?"}}})},
                                 {"max_tokens", 4}, {"temperature", 0}});
    const json first = post(c, "/v1/chat/completions", chat_with({data_url(image)}));
    const int size_text = post(c, "/tokenize", {{"content", "image 100x60"}})["count"];
    const int prompt_tokens = first["usage"]["prompt_tokens"];
    CHECK(prompt_tokens == text_only["usage"]["prompt_tokens"].get<int>() + 12 + 3 + size_text);

    // the same image again, and a longer conversation with it: resumed past it
    const json again = post(c, "/v1/chat/completions", chat_with({data_url(image)}));
    CHECK(again["usage"]["prompt_tokens_details"]["cached_tokens"].get<int>() >= prompt_tokens - 1);
    CHECK(again["choices"][0]["message"]["content"] == first["choices"][0]["message"]["content"]);
    json longer = chat_with({data_url(image)});
    longer["messages"].push_back({{"role", "assistant"}, {"content", first["choices"][0]["message"]["content"]}});
    longer["messages"].push_back({{"role", "user"}, {"content", "And the colours?"}});
    const json turn2 = post(c, "/v1/chat/completions", longer);
    CHECK(turn2["usage"]["prompt_tokens_details"]["cached_tokens"].get<int>() >= prompt_tokens - 1);

    // /tokenize of the chat: the same count, and where the rows are
    const json tokenized = post(c, "/tokenize", chat_with({data_url(image)}));
    CHECK(tokenized["count"] == prompt_tokens);
    REQUIRE(tokenized["images"].size() == 1);
    CHECK(tokenized["images"][0]["rows"] == 12);
    const int image_at = tokenized["images"][0]["position"];
    CHECK(tokenized["tokens"][size_t(image_at)] == tokenized["tokens"][size_t(image_at + 11)]);  // <|media_pad|> x 12

    // another image of the same size: nothing after it comes from the cache
    const json other = post(c, "/v1/chat/completions", chat_with({data_url(png(100, 60, 2))}));
    CHECK(other["usage"]["prompt_tokens"] == prompt_tokens);
    CHECK(other["usage"]["prompt_tokens_details"]["cached_tokens"].get<int>() <= image_at);

    // Responses input_image and the Messages API's base64 image: the same prompt
    const json responses = post(c, "/v1/responses",
                                {{"input", json::array({{{"role", "user"},
                                                         {"content", json::array({{{"type", "input_text"}, {"text", "What is in the picture?"}},
                                                                                  {{"type", "input_image"}, {"image_url", data_url(image)}}})}}})},
                                 {"max_output_tokens", 4}, {"temperature", 0}});
    CHECK(responses["usage"]["input_tokens"] == prompt_tokens);
    CHECK(responses["usage"]["input_tokens_details"]["cached_tokens"].get<int>() >= prompt_tokens - 1);
    const json block = {{"type", "image"},
                        {"source", {{"type", "base64"}, {"media_type", "image/png"}, {"data", k3::server::base64_encode(image)}}}};
    const json messages = post(c, "/v1/messages",
                               {{"max_tokens", 4},
                                {"messages", json::array({{{"role", "user"},
                                                           {"content", json::array({{{"type", "text"}, {"text", "What is in the picture?"}}, block})}}})}});
    CHECK(messages["usage"]["input_tokens"].get<int>() + messages["usage"]["cache_read_input_tokens"].get<int>() ==
          prompt_tokens);
    CHECK(messages["usage"]["cache_read_input_tokens"].get<int>() >= prompt_tokens - 1);
}

TEST_CASE("images: refusals are 400s naming what is wrong, and the daemon goes on serving") {
    DaemonProcess d({cached_model("tiny"), "--port", "0", "--threads", "1", "--images-per-request", "2",
                     "--image-max-pixels", "20000", "--image-max-bytes", "30000"});
    auto c = d.client();
    const std::string ok = data_url(png(100, 60, 1));
    const char* chat = "/v1/chat/completions";

    refused(c, chat, chat_with({"https://example.com/cat.png"}), "fetches nothing", "image_url_not_supported");
    refused(c, chat, chat_with({"http://127.0.0.1/cat.png"}), "fetches nothing", "image_url_not_supported");
    refused(c, chat, chat_with({"/etc/passwd"}), "file paths", "image_url_not_supported");
    refused(c, chat, chat_with({"file:///etc/passwd"}), "file paths", "image_url_not_supported");
    refused(c, chat, chat_with({"data:image/png,rawbytes"}), "base64", "invalid_image");
    refused(c, chat, chat_with({"data:image/png;base64,@@@@"}), "malformed", "invalid_image");
    refused(c, chat, chat_with({"data:image/png;base64," + k3::server::base64_encode("hello, world")}),
            "neither PNG nor JPEG", "invalid_image");
    refused(c, chat, chat_with({"data:image/webp;base64,UklGRg=="}), "unsupported image type", "invalid_image");
    refused(c, chat, chat_with({data_url(png(100, 60, 1).substr(0, 300))}), "not a decodable PNG", "invalid_image");
    refused(c, chat, chat_with({ok, ok, ok}), "more than 2 images", "too_many_images");
    // (the pixel limit is checked on the header, before any pixel is decoded: a truncated file)
    refused(c, chat, chat_with({data_url(png(200, 150, 1).substr(0, 300))}), "30000 pixels, more than the limit of 20000",
            "invalid_image");
    refused(c, chat, chat_with({data_url(png(150, 88, 1))}), "more than the limit of 30000", "");
    // images belong to user turns
    json assistant = chat_with({});
    assistant["messages"].push_back(
        {{"role", "assistant"}, {"content", json::array({{{"type", "image_url"}, {"image_url", {{"url", ok}}}}})}});
    refused(c, chat, assistant, "only accepted in user messages", "unsupported_content");
    refused(c, "/v1/responses",
            {{"input", json::array({{{"role", "user"}, {"content", json::array({{{"type", "input_image"}, {"file_id", "file-1"}}})}}})}},
            "Files API", "unsupported_parameter");
    refused(c, "/v1/messages",
            {{"max_tokens", 4},
             {"messages", json::array({{{"role", "user"},
                                        {"content", json::array({{{"type", "image"},
                                                                  {"source", {{"type", "url"}, {"url", "https://example.com/a.png"}}}}})}}})}},
            "fetches nothing", "");

    // two images within the limits pass, and so does text
    const json two = post(c, chat, chat_with({ok, data_url(png(56, 28, 3))}));
    CHECK(two["usage"]["prompt_tokens"].get<int>() > 12 + 2);
    post(c, chat, {{"messages", json::array({{{"role", "user"}, {"content", "hi"}}})}, {"max_tokens", 2}});
}

TEST_CASE("images: a daemon with --no-vision says it takes none") {
    DaemonProcess d({cached_model("tiny"), "--port", "0", "--threads", "1", "--no-vision"});
    auto c = d.client();
    refused(c, "/v1/chat/completions", chat_with({data_url(png(100, 60, 1))}), "no vision tower", "images_not_supported");
    post(c, "/v1/chat/completions", {{"messages", json::array({{{"role", "user"}, {"content", "hi"}}})}, {"max_tokens", 2}});
}

#include "wire/image_input.h"

#include "k3/error.h"
#include "k3/xtml.h"
#include "wire/base64.h"
#include "wire/error.h"

namespace k3::server {

namespace {

bool starts_with(std::string_view s, std::string_view prefix) {
    if (s.size() < prefix.size()) return false;
    for (size_t i = 0; i < prefix.size(); ++i)
        if (std::tolower((unsigned char)s[i]) != prefix[i]) return false;
    return true;
}

}  // namespace

void check_image_allowed(const ImageRequestLimits& limits, size_t images_so_far, const std::string& param) {
    if (!limits.vision)
        throw bad_request(param,
                          "this model has no vision tower loaded (a text-only checkpoint, or the daemon was started "
                          "with --no-vision): images are not accepted",
                          "images_not_supported");
    if (images_so_far >= size_t(limits.max_images))
        throw bad_request(param, "more than " + std::to_string(limits.max_images) +
                                     " images in one request (the limit on images per request, counting every turn)",
                          "too_many_images");
}

std::shared_ptr<const PreparedImage> image_from_url(std::string_view url, const std::string& param,
                                                    const ImageRequestLimits& limits) {
    if (starts_with(url, "http://") || starts_with(url, "https://"))
        throw bad_request(param,
                          "remote image URLs are not fetched (the daemon fetches nothing): send the image inline "
                          "as a data: URL, e.g. data:image/png;base64,...",
                          "image_url_not_supported");
    if (!starts_with(url, "data:"))
        throw bad_request(param,
                          "the image must be a data: URL with base64 data (data:image/png;base64,...); file paths "
                          "and other URLs are not read",
                          "image_url_not_supported");
    const size_t comma = url.find(',');
    if (comma == std::string_view::npos)
        throw bad_request(param, "the data: URL has no ',' before its data", "invalid_image");
    const std::string_view header = url.substr(5, comma - 5);  // MEDIA[;param]*;base64
    if (header.size() < 7 || !starts_with(header.substr(header.size() - 7), ";base64"))
        throw bad_request(param, "the data: URL must be base64 encoded (data:image/png;base64,...)", "invalid_image");
    const std::string_view media = header.substr(0, header.find(';'));
    if (!media.empty() && !starts_with(media, "image/png") && !starts_with(media, "image/jpeg") &&
        !starts_with(media, "image/jpg"))
        throw bad_request(param, "unsupported image type '" + std::string(media) + "' (PNG and JPEG are decoded)",
                          "invalid_image");
    const std::string_view data = url.substr(comma + 1);
    // base64 holds 3 bytes per 4 characters: refuse what cannot fit before decoding it
    if (int64_t(data.size() / 4 * 3) > limits.per_image.max_bytes + 3)
        throw bad_request(param,
                          "the image is about " + std::to_string(data.size() / 4 * 3) + " bytes, more than the limit of " +
                              std::to_string(limits.per_image.max_bytes) + " bytes per image",
                          "image_too_large");
    const std::optional<std::string> bytes = base64_decode(data);
    if (!bytes) throw bad_request(param, "the image's base64 data is malformed", "invalid_image");
    try {
        return std::make_shared<const PreparedImage>(
            prepare_image(std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(bytes->data()), bytes->size()),
                          limits.per_image));
    } catch (const Error& e) {
        throw bad_request(param, e.what(), "invalid_image");
    }
}

ExpandedPrompt expand_prompt_images(std::vector<int32_t> prompt, std::vector<std::shared_ptr<const PreparedImage>> images,
                                    const Tokenizer& tok, int n_vocab) {
    if (images.empty()) return {std::move(prompt), {}};
    const auto pad = tok.special_id(xtml::kMediaPad);
    if (!pad) throw bad_request("messages", "the tokenizer has no <|media_pad|> token: images are not accepted", "images_not_supported");
    try {
        return expand_image_pads(prompt, *pad, images, n_vocab);
    } catch (const Error& e) {
        throw bad_request("messages", e.what());
    }
}

}  // namespace k3::server

// Images in requests (docs/api.md "Images"): the OpenAI chat API's image_url parts (and what the
// Responses and Messages APIs translate into them) carry an image inline as a data: URL with
// base64; this decodes and preprocesses it (k3/image.h) on the HTTP thread, within the limits,
// and puts the request's images into its prompt. The daemon fetches nothing: remote URLs and
// file paths are refused. Every refusal is a 400 that names the part and the limit.
#pragma once
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "k3/image.h"
#include "k3/image_prompt.h"
#include "k3/tokenizer.h"

namespace k3::server {

struct ImageRequestLimits {
    bool vision = false;  // the model has a vision tower loaded (not text-only, not --no-vision)
    ImageLimits per_image;
    int max_images = 8;   // per request, counting every earlier turn's
};

// A data: URL -> the prepared image. `param` names the part in errors.
std::shared_ptr<const PreparedImage> image_from_url(std::string_view url, const std::string& param,
                                                    const ImageRequestLimits& limits);

// Checked before an image is decoded: the model reads images, and this one is within the count.
void check_image_allowed(const ImageRequestLimits& limits, size_t images_so_far, const std::string& param);

// The rendered prompt (one <|media_pad|> per image) with each pad replaced by its image's row
// ids (k3/image_prompt.h); the positions counted with the expansion.
ExpandedPrompt expand_prompt_images(std::vector<int32_t> prompt, std::vector<std::shared_ptr<const PreparedImage>> images,
                                    const Tokenizer& tok, int n_vocab);

}  // namespace k3::server

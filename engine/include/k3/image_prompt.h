// Images inside a prompt (docs/model.md "Image input", "Images in the prompt"). The chat
// renderer writes one <|media_pad|> per image; expand_image_pads() gives each image N positions
// (its projected rows), so the prompt's length, usage and context checks count what the model
// evaluates. Those positions hold ids at or above the vocabulary, drawn from the image's content
// key: token ids no longer say what an image was, these do, so the prompt cache (which keys
// states by ids, on disk too) resumes after the same image and never after another one. At
// prefill the session embeds such a position from the image's rows instead of the table.
#pragma once
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "k3/image.h"

namespace k3 {

// One image of a prompt: it fills positions [position, position + rows).
struct PromptImage {
    size_t position = 0;
    int64_t rows = 0;
    // The image; the session runs the tower on it only when a prompt evaluates its positions
    // (a prompt resumed from the cache past the image never pays for it).
    std::shared_ptr<const PreparedImage> image;
    // Or its rows [rows][n_embd] given directly (tests that put known embeddings in; the image
    // is then not needed).
    std::shared_ptr<const std::vector<float>> embeddings;
};

// The ids of an image's rows: n_vocab + a hash of (content key, row index) below 2^31 - 1, so
// two different images share a prefix of the prompt only if a 31-bit draw matches at every
// row (a one-row image, at most 28x28 pixels, is the weakest: 1 in 2^31 per pair of the same
// size, whose prompts also carry the same "image WxH" text).
std::vector<int32_t> image_row_ids(uint64_t content_key, int64_t rows, int n_vocab);
inline bool is_image_row_id(int32_t id, int n_vocab) { return id >= n_vocab; }

struct ExpandedPrompt {
    std::vector<int32_t> ids;
    std::vector<PromptImage> images;  // in prompt order
};

// Replaces the i-th `pad_id` of `ids` by images[i]'s row ids (image_row_ids of its content
// hash). Throws k3::Error(Usage) when the counts differ.
ExpandedPrompt expand_image_pads(std::span<const int32_t> ids, int32_t pad_id,
                                 std::span<const std::shared_ptr<const PreparedImage>> images, int n_vocab);

}  // namespace k3

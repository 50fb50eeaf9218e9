// expand_image_pads and the ids of image rows (k3/image_prompt.h).
#include "k3/image_prompt.h"

#include <string>

#include "k3/error.h"

namespace k3 {

namespace {

uint64_t splitmix64(uint64_t x) {
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

}  // namespace

std::vector<int32_t> image_row_ids(uint64_t content_key, int64_t rows, int n_vocab) {
    // ids in [n_vocab, INT32_MAX): never a token, never negative
    const uint64_t span = uint64_t(INT32_MAX) - uint64_t(n_vocab);
    std::vector<int32_t> ids(static_cast<size_t>(rows));
    for (int64_t i = 0; i < rows; ++i)
        ids[size_t(i)] = int32_t(uint64_t(n_vocab) + splitmix64(content_key ^ splitmix64(uint64_t(i))) % span);
    return ids;
}

ExpandedPrompt expand_image_pads(std::span<const int32_t> ids, int32_t pad_id,
                                 std::span<const std::shared_ptr<const PreparedImage>> images, int n_vocab) {
    ExpandedPrompt out;
    size_t next = 0;
    for (int32_t id : ids) {
        if (id != pad_id) {
            out.ids.push_back(id);
            continue;
        }
        if (next == images.size())
            throw Error(ErrorKind::Usage, "the prompt has more image placeholders than images (" +
                                              std::to_string(images.size()) + ")");
        const auto& image = images[next++];
        PromptImage p;
        p.position = out.ids.size();
        p.rows = image->geometry.rows();
        p.image = image;
        const std::vector<int32_t> rows = image_row_ids(image->content_hash, p.rows, n_vocab);
        out.ids.insert(out.ids.end(), rows.begin(), rows.end());
        out.images.push_back(std::move(p));
    }
    if (next != images.size())
        throw Error(ErrorKind::Usage, "the prompt has " + std::to_string(next) + " image placeholders for " +
                                          std::to_string(images.size()) + " images");
    return out;
}

}  // namespace k3

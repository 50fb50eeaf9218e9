// Images in the prompt (docs/model.md "Images in the prompt"): the rows an image puts at its
// positions are the model's input there, so rows equal to known token embeddings give exactly
// the text's logits and tokens (docs/model.md "Images in the prompt": the boundary check); the prompt cache resumes
// after the same image and never after another one of the same size; the image row ids are
// checked against the images given.
#include <doctest/doctest.h>

#include <random>

#include "io/file.h"
#include "kernels/kernels.h"
#include "model/model_test_util.h"
#include "weights/checkpoint.h"
#include "weights/model_tensors.h"

using namespace k3;
using namespace k3::test;

namespace {

constexpr int kSeed = 5;

// The embedding table's rows of `ids`, widened as the forward pass widens them.
std::vector<float> embedding_rows(const std::string& dir, std::span<const int32_t> ids) {
    const Checkpoint ck = open_checkpoint(dir);
    const TensorInfo* t = ck.directory.find(kModelPrefix + "embed_tokens.weight");
    REQUIRE(t);
    const int64_t E = t->shape[1];
    const io::File f = io::File::open(ck.directory.shards()[size_t(t->shard)].path, false);
    std::vector<uint16_t> row(static_cast<size_t>(E));
    std::vector<float> out;
    for (int32_t id : ids) {
        f.read_exact(row.data(), E * 2, t->offset + id * E * 2, "embedding row");
        for (uint16_t h : row) out.push_back(bf16_to_f32(h));
    }
    return out;
}

// A prepared image of 56x28 pixels (2 rows) with random patches: what the tower sees.
std::shared_ptr<const PreparedImage> random_image(uint32_t seed) {
    auto im = std::make_shared<PreparedImage>();
    im->geometry = image_geometry(56, 28);
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    im->patches.resize(size_t(im->geometry.patches()) * 3 * 14 * 14);
    for (float& v : im->patches) v = u(rng);
    im->content_hash = 0x1234567ull * seed + 99;
    return im;
}

std::vector<int32_t> with_image(const std::vector<int32_t>& before, const PreparedImage& im,
                                const std::vector<int32_t>& after, int V) {
    std::vector<int32_t> ids = before;
    const std::vector<int32_t> rows = image_row_ids(im.content_hash, im.geometry.rows(), V);
    ids.insert(ids.end(), rows.begin(), rows.end());
    ids.insert(ids.end(), after.begin(), after.end());
    return ids;
}

}  // namespace

TEST_CASE("image prompt: rows equal to token embeddings give the text's logits and tokens") {
    const std::string dir = cached_model("tiny", kSeed);
    auto e = load_engine(dir, 2, "", 0);
    const int V = e->info().n_vocab;
    const std::vector<int32_t> text = test_prompt(14, V, 4);
    CancelFlag cancel{false};

    // the text, all logits, then 6 greedy tokens
    auto plain = e->new_session(64);
    std::vector<float> text_logits;
    REQUIRE(plain->prefill_all_logits(text, text_logits).ok());
    std::vector<int32_t> text_out;
    for (int i = 0; i < 6; ++i) {
        text_out.push_back(argmax(plain->logits()));
        REQUIRE(plain->append(text_out.back(), cancel).ok());
    }

    // positions 4..9 as an "image" whose rows are those tokens' embeddings
    const size_t at = 4, n = 6;
    PromptImage im;
    im.position = at;
    im.rows = int64_t(n);
    im.embeddings = std::make_shared<const std::vector<float>>(
        embedding_rows(dir, std::span<const int32_t>(text).subspan(at, n)));
    std::vector<int32_t> ids = text;
    const std::vector<int32_t> row_ids = image_row_ids(77, int64_t(n), V);
    std::copy(row_ids.begin(), row_ids.end(), ids.begin() + std::ptrdiff_t(at));
    for (int32_t id : row_ids) CHECK(is_image_row_id(id, V));

    auto framed = e->new_session(64);
    framed->set_prompt_images({im});
    std::vector<float> image_logits;
    REQUIRE(framed->prefill_all_logits(ids, image_logits).ok());
    CHECK(same_bits(image_logits, text_logits));
    // the same through sync (the worker's chunked path) and decoding on from there
    auto synced = e->new_session(64);
    synced->set_prompt_images({im});
    REQUIRE(synced->sync(ids, cancel).ok());
    std::vector<int32_t> image_out;
    for (int i = 0; i < 6; ++i) {
        image_out.push_back(argmax(synced->logits()));
        REQUIRE(synced->append(image_out.back(), cancel).ok());
    }
    CHECK(image_out == text_out);

    // the control: other rows there change the logits
    std::vector<float> other(im.embeddings->size(), 0.25f);
    im.embeddings = std::make_shared<const std::vector<float>>(other);
    auto changed = e->new_session(64);
    changed->set_prompt_images({im});
    std::vector<float> changed_logits;
    REQUIRE(changed->prefill_all_logits(ids, changed_logits).ok());
    CHECK_FALSE(same_bits(changed_logits, text_logits));
}

TEST_CASE("image prompt: the prompt cache resumes after the same image, never after another") {
    const std::string dir = cached_model("tiny", kSeed);
    auto e = load_engine(dir, 2);
    REQUIRE(e->info().vision);
    const int V = e->info().n_vocab;
    const auto before = test_prompt(9, V, 1), after = test_prompt(5, V, 2), more = test_prompt(4, V, 3);
    const auto a = random_image(1), b = random_image(2);
    CancelFlag cancel{false};
    auto images_of = [&](const std::shared_ptr<const PreparedImage>& im) {
        return std::vector<PromptImage>{{before.size(), im->geometry.rows(), im, nullptr}};
    };

    const std::vector<int32_t> pa = with_image(before, *a, after, V);
    auto first = e->new_session(64);
    first->set_prompt_images(images_of(a));
    int reused = -1;
    REQUIRE(first->sync(pa, cancel, &reused).ok());
    CHECK(reused == 0);

    // the same image again, in a longer conversation: resumed after all of the first prompt
    std::vector<int32_t> pa_more = pa;
    pa_more.insert(pa_more.end(), more.begin(), more.end());
    auto again = e->new_session(64);
    again->set_prompt_images(images_of(a));
    REQUIRE(again->sync(pa_more, cancel, &reused).ok());
    CHECK(reused == int(pa.size()));
    CHECK(same_bits(again->logits(), [&] {
        auto cold = load_engine(dir, 2, "", 0);
        auto s = cold->new_session(64);
        s->set_prompt_images(images_of(a));
        REQUIRE(s->sync(pa_more, cancel).ok());
        return std::vector<float>(s->logits().begin(), s->logits().end());
    }()));

    // another image of the same size at the same place: resumed at most up to the image
    std::vector<int32_t> pb_more = with_image(before, *b, after, V);
    pb_more.insert(pb_more.end(), more.begin(), more.end());
    auto other = e->new_session(64);
    other->set_prompt_images(images_of(b));
    REQUIRE(other->sync(pb_more, cancel, &reused).ok());
    CHECK(reused <= int(before.size()));
    auto cold = load_engine(dir, 2, "", 0);
    auto s = cold->new_session(64);
    s->set_prompt_images(images_of(b));
    REQUIRE(s->sync(pb_more, cancel).ok());
    CHECK(same_bits(other->logits(), s->logits()));
    CHECK_FALSE(same_bits(other->logits(), again->logits()));
}

TEST_CASE("image prompt: row ids need their image") {
    auto e = load_engine(cached_model("tiny", kSeed), 2, "", 0);
    const int V = e->info().n_vocab;
    const auto before = test_prompt(3, V, 1), after = test_prompt(2, V, 2);
    const auto a = random_image(1), b = random_image(2);
    const std::vector<int32_t> pa = with_image(before, *a, after, V);
    CancelFlag cancel{false};
    auto s = e->new_session(64);
    // no image given: the row ids are out of the vocabulary
    Status st = s->sync(pa, cancel);
    CHECK(st.code == StatusCode::InvalidArgument);
    CHECK(st.message.find("no image") != std::string::npos);
    // an image whose content does not match the ids
    s->set_prompt_images({{before.size(), b->geometry.rows(), b, nullptr}});
    st = s->sync(pa, cancel);
    CHECK(st.code == StatusCode::InvalidArgument);
    CHECK(st.message.find("row ids") != std::string::npos);
    // an image past the prompt's end
    s->set_prompt_images({{pa.size() - 1, a->geometry.rows(), a, nullptr}});
    CHECK(s->sync(pa, cancel).code == StatusCode::InvalidArgument);
    // the matching image
    s->set_prompt_images({{before.size(), a->geometry.rows(), a, nullptr}});
    CHECK(s->sync(pa, cancel).ok());
}

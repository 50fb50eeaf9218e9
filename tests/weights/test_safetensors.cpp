// safetensors headers and the tensor directory: a valid file parses to the right offsets; every
// refusal is provoked with a hand-built file and its message must name the file and tensor;
// and a fuzz loop feeds random and mutated headers that must only ever produce a clean
// k3::Error (run it under the `dev` sanitizer preset to catch out-of-bounds reads).
#include <doctest/doctest.h>

#include <fstream>
#include <functional>
#include <map>
#include <random>

#include "weights/safetensors.h"
#include "weights/safetensors_builder.h"
#include "k3/error.h"

using namespace k3;
using k3::test::ShardBuilder;
using nlohmann::json;

namespace {

std::vector<TensorInfo> parse(const std::string& file_bytes, const std::string& name = "a.safetensors") {
    int64_t data_start = -1;
    return parse_safetensors_header(file_bytes, int64_t(file_bytes.size()), 0, name, &data_start);
}

// Expects a Checkpoint refusal containing every needle.
template <typename F>
void expect_refusal(F&& f, std::initializer_list<std::string> needles) {
    try {
        f();
        FAIL("accepted input that must be refused");
    } catch (const Error& e) {
        CHECK(e.kind() == ErrorKind::Checkpoint);
        CHECK(exit_code_for(e.kind()) == 2);
        const std::string msg = e.what();
        for (const auto& n : needles) CHECK_MESSAGE(msg.find(n) != std::string::npos, "want '", n, "' in: ", msg);
    }
}

ShardBuilder two_tensors() {
    ShardBuilder b;
    b.add("w.weight", "BF16", {4, 8}).add("bias", "F32", {3});
    return b;
}

}  // namespace

TEST_CASE("a valid header parses to absolute offsets, dtypes and shapes") {
    ShardBuilder b;
    b.add("x.bf16", "BF16", {3, 5})
        .add("x.f16_odd", "F16", {7})
        .add("x.u8", "U8", {2, 3})
        .add("scalar", "F32", {})
        .add("empty", "F32", {0, 4})
        .add("odd \"name\" \\ with escapes \xc3\xa9", "F32", {2});
    b.header["__metadata__"] = {{"format", "pt"}};
    const std::string file = b.bytes();
    int64_t data_start = -1;
    auto tensors = parse_safetensors_header(file, int64_t(file.size()), 3, "s.safetensors", &data_start);
    REQUIRE(tensors.size() == 6);
    CHECK(data_start == 8 + int64_t(b.header.dump().size()));
    std::map<std::string, TensorInfo> by_name;
    for (auto& t : tensors) by_name[t.name] = t;
    CHECK(by_name["x.bf16"].dtype == DType::BF16);
    CHECK(by_name["x.bf16"].shape == std::vector<int64_t>{3, 5});
    CHECK(by_name["x.bf16"].offset == data_start);
    CHECK(by_name["x.bf16"].nbytes == 30);
    CHECK(by_name["x.bf16"].shard == 3);
    CHECK(by_name["x.f16_odd"].offset == data_start + 30);
    CHECK(by_name["x.f16_odd"].nbytes == 14);
    CHECK(by_name["x.u8"].dtype == DType::U8);
    CHECK(by_name["x.u8"].offset == data_start + 44);
    CHECK(by_name["scalar"].shape.empty());
    CHECK(by_name["scalar"].nbytes == 4);
    CHECK(by_name["empty"].nbytes == 0);
    CHECK(by_name.count("odd \"name\" \\ with escapes \xc3\xa9") == 1);
}

TEST_CASE("refused: header length beyond the bound, before allocating") {
    std::string file(16, '\0');
    uint64_t n = uint64_t(kMaxSafetensorsHeader) + 1;
    for (int i = 0; i < 8; ++i) file[size_t(i)] = char((n >> (8 * i)) & 0xff);
    // file_size claims the file is big enough, so only the bound can refuse it.
    expect_refusal([&] { parse_safetensors_header(file, int64_t(1) << 40, 0, "big.safetensors", nullptr); },
                   {"big.safetensors", "header length", "exceeds the limit"});
    for (int i = 0; i < 8; ++i) file[size_t(i)] = char(0xff);  // 2^64-1
    expect_refusal([&] { parse_safetensors_header(file, int64_t(1) << 40, 0, "big.safetensors", nullptr); },
                   {"big.safetensors", "exceeds the limit"});
}

TEST_CASE("refused: header longer than the file (truncated download)") {
    std::string file = two_tensors().bytes();
    std::string cut = file.substr(0, 20);
    expect_refusal([&] { parse(cut, "cut.safetensors"); }, {"cut.safetensors", "truncated"});
    expect_refusal([&] { parse(std::string(5, '\0'), "tiny.safetensors"); },
                   {"tiny.safetensors", "shorter than the 8-byte header length"});
}

TEST_CASE("refused: malformed JSON and non-object headers") {
    ShardBuilder b = two_tensors();
    std::string text = b.header.dump();
    text.pop_back();  // drop the closing brace
    expect_refusal([&] { parse(b.bytes_with_header(text), "m.safetensors"); }, {"m.safetensors", "malformed JSON"});
    expect_refusal([&] { parse(b.bytes_with_header("[1,2,3]"), "m.safetensors"); }, {"not a JSON object"});
    expect_refusal([&] { parse(b.bytes_with_header(std::string(200, '[') + std::string(200, ']')), "m.safetensors"); },
                   {"nested deeper"});
}

TEST_CASE("refused: a tensor name repeated inside one header") {
    ShardBuilder b = two_tensors();
    std::string text = b.header.dump();
    text.insert(1, "\"bias\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[64,76]},");
    expect_refusal([&] { parse(b.bytes_with_header(text), "d.safetensors"); },
                   {"d.safetensors", "\"bias\" appears twice"});
}

TEST_CASE("refused: unknown dtype") {
    ShardBuilder b = two_tensors();
    b.header["bias"]["dtype"] = "I64";
    expect_refusal([&] { parse(b.bytes(), "t.safetensors"); }, {"t.safetensors", "tensor bias", "\"I64\"", "BF16, F16, F32, U8"});
}

TEST_CASE("refused: byte size different from numel x dtype size") {
    ShardBuilder b = two_tensors();
    b.header["w.weight"]["shape"] = {4, 9};
    expect_refusal([&] { parse(b.bytes(), "s.safetensors"); },
                   {"s.safetensors", "tensor w.weight", "needs 72 bytes", "span 64"});
}

TEST_CASE("refused: data offsets outside the file") {
    ShardBuilder b = two_tensors();
    b.header["bias"]["data_offsets"] = {64 + 100, 76 + 100};
    expect_refusal([&] { parse(b.bytes(), "o.safetensors"); }, {"o.safetensors", "tensor bias", "but the file is only"});
    // A shard that lost its tail: the header is intact, the last tensor is cut short.
    std::string file = two_tensors().bytes();
    file.resize(file.size() - 5);
    expect_refusal([&] { parse(file, "cut.safetensors"); }, {"cut.safetensors", "tensor bias", "truncated"});
    // Cut inside the first tensor (by offset): it is the one named, whatever the JSON order.
    std::string deeper = two_tensors().bytes();
    deeper.resize(deeper.size() - 12 - 10);
    expect_refusal([&] { parse(deeper, "cut.safetensors"); },
                   {"cut.safetensors: tensor w.weight", "1 later tensors are cut off too"});
}

TEST_CASE("refused: overlapping tensors") {
    ShardBuilder b = two_tensors();
    b.add("extra", "U8", {8});
    b.header["extra"]["data_offsets"] = {60, 68};  // inside w.weight [0, 64)
    expect_refusal([&] { parse(b.bytes(), "ov.safetensors"); }, {"ov.safetensors", "extra", "overlaps", "w.weight"});
}

TEST_CASE("refused: malformed entries") {
    auto with = [](const std::function<void(json&)>& edit) {
        ShardBuilder b = two_tensors();
        edit(b.header["bias"]);
        return b.bytes();
    };
    expect_refusal([&] { parse(with([](json& e) { e["data_offsets"] = {12, 0}; })); }, {"tensor bias", "end before"});
    expect_refusal([&] { parse(with([](json& e) { e["data_offsets"] = {-4, 8}; })); }, {"tensor bias", "pair of byte offsets"});
    expect_refusal([&] { parse(with([](json& e) { e["data_offsets"] = {64}; })); }, {"tensor bias", "pair of byte offsets"});
    expect_refusal([&] { parse(with([](json& e) { e["shape"] = {-3}; })); }, {"tensor bias", "non-size"});
    expect_refusal([&] { parse(with([](json& e) { e["shape"] = {1.5}; })); }, {"tensor bias", "non-size"});
    expect_refusal([&] { parse(with([](json& e) { e["shape"] = {int64_t(1) << 40, int64_t(1) << 40}; })); },
                   {"tensor bias", "too large"});
    expect_refusal([&] { parse(with([](json& e) { e.erase("dtype"); })); }, {"tensor bias", "needs dtype"});
    expect_refusal([&] { parse(with([](json& e) { e = 7; })); }, {"tensor bias", "not an object"});
}

// ---- the directory across shards and the index ----

namespace {

// Two shards: a.safetensors {a1, a2}, b.safetensors {b1}, plus a matching index.
std::filesystem::path two_shard_dir(const std::string& name, bool with_index = true) {
    auto dir = k3::test::scratch_dir(name);
    ShardBuilder a, b;
    a.add("a1", "BF16", {2, 2}).add("a2", "F32", {3});
    b.add("b1", "U8", {5});
    a.write(dir / "model-00001-of-00002.safetensors");
    b.write(dir / "model-00002-of-00002.safetensors");
    if (with_index) {
        json idx = {{"metadata", {{"total_size", 8 + 12 + 5}}},
                    {"weight_map",
                     {{"a1", "model-00001-of-00002.safetensors"},
                      {"a2", "model-00001-of-00002.safetensors"},
                      {"b1", "model-00002-of-00002.safetensors"}}}};
        ShardBuilder::write_file(dir / "model.safetensors.index.json", idx.dump(2));
    }
    return dir;
}

json read_index(const std::filesystem::path& dir) {
    std::ifstream in(dir / "model.safetensors.index.json");
    return json::parse(in);
}

void write_index(const std::filesystem::path& dir, const json& j) {
    ShardBuilder::write_file(dir / "model.safetensors.index.json", j.dump());
}

}  // namespace

TEST_CASE("a directory of shards opens, with and without the index") {
    for (bool with_index : {true, false}) {
        auto dir = two_shard_dir("dir-ok", with_index);
        TensorDirectory td = TensorDirectory::open(dir);
        REQUIRE(td.shards().size() == 2);
        CHECK(td.shards()[0].path.filename() == "model-00001-of-00002.safetensors");
        CHECK(td.tensors().size() == 3);
        const TensorInfo* b1 = td.find("b1");
        REQUIRE(b1);
        CHECK(b1->shard == 1);
        CHECK(b1->offset == td.shards()[1].data_start);
        CHECK(td.shards()[1].file_size == td.shards()[1].data_start + 5);
        CHECK(td.find("nope") == nullptr);
    }
}

TEST_CASE("refused: no shards at all") {
    auto dir = k3::test::scratch_dir("dir-empty");
    expect_refusal([&] { TensorDirectory::open(dir); }, {"no *.safetensors"});
}

TEST_CASE("refused: the same tensor in two shards") {
    auto dir = two_shard_dir("dir-dup", false);
    ShardBuilder c;
    c.add("a2", "F32", {3});
    c.write(dir / "model-00003-of-00003.safetensors");
    expect_refusal([&] { TensorDirectory::open(dir); },
                   {"tensor a2 appears in both model-00001-of-00002.safetensors and model-00003-of-00003.safetensors"});
}

TEST_CASE("refused: a shard shorter than its header says, naming file and tensor") {
    auto dir = two_shard_dir("dir-trunc");
    auto path = dir / "model-00001-of-00002.safetensors";
    std::filesystem::resize_file(path, std::filesystem::file_size(path) - 3);
    expect_refusal([&] { TensorDirectory::open(dir); },
                   {"model-00001-of-00002.safetensors: tensor a2", "truncated"});
}

TEST_CASE("refused: a shard cut inside its header, and one with a corrupt length") {
    auto dir = two_shard_dir("dir-cut-header");
    auto path = dir / "model-00002-of-00002.safetensors";
    std::filesystem::resize_file(path, 30);
    auto path1 = dir / "model-00001-of-00002.safetensors";
    std::string bytes(8, char(0x7f));  // length ~ 9.2e18
    ShardBuilder::write_file(path1, bytes);
    // Both shards are reported in one message.
    expect_refusal([&] { TensorDirectory::open(dir); },
                   {"2 problems", "model-00002-of-00002.safetensors: header says its JSON is",
                    "model-00001-of-00002.safetensors: header length"});
}

TEST_CASE("refused: index entry pointing to the wrong shard") {
    auto dir = two_shard_dir("dir-idx-wrong");
    json idx = read_index(dir);
    idx["weight_map"]["a2"] = "model-00002-of-00002.safetensors";
    write_index(dir, idx);
    expect_refusal([&] { TensorDirectory::open(dir); },
                   {"model.safetensors.index.json: tensor a2 is listed in model-00002-of-00002.safetensors but is in "
                    "model-00001-of-00002.safetensors"});
}

TEST_CASE("refused: index entry for a tensor no shard holds") {
    auto dir = two_shard_dir("dir-idx-missing");
    json idx = read_index(dir);
    idx["weight_map"]["ghost.weight"] = "model-00002-of-00002.safetensors";
    write_index(dir, idx);
    expect_refusal([&] { TensorDirectory::open(dir); },
                   {"tensor ghost.weight is listed in model-00002-of-00002.safetensors but no shard holds it"});
}

TEST_CASE("refused: index naming a shard that is not there (partial download)") {
    auto dir = two_shard_dir("dir-idx-noshard");
    std::filesystem::remove(dir / "model-00002-of-00002.safetensors");
    expect_refusal([&] { TensorDirectory::open(dir); },
                   {"tensor b1 is listed in model-00002-of-00002.safetensors, which is not in the directory"});
}

TEST_CASE("refused: tensor missing from the index, wrong total_size, malformed index") {
    {
        auto dir = two_shard_dir("dir-idx-unlisted");
        json idx = read_index(dir);
        idx["weight_map"].erase("a1");
        idx["metadata"]["total_size"] = 8 + 12 + 5 - 8;
        write_index(dir, idx);
        expect_refusal([&] { TensorDirectory::open(dir); },
                       {"tensor a1 in model-00001-of-00002.safetensors is not listed in the index"});
    }
    {
        auto dir = two_shard_dir("dir-idx-total");
        json idx = read_index(dir);
        idx["metadata"]["total_size"] = 999;
        write_index(dir, idx);
        expect_refusal([&] { TensorDirectory::open(dir); }, {"total_size is 999 but the shards' tensors hold 25 bytes"});
    }
    {
        auto dir = two_shard_dir("dir-idx-bad");
        ShardBuilder::write_file(dir / "model.safetensors.index.json", "{\"weight_map\": {\"a1\": ");
        expect_refusal([&] { TensorDirectory::open(dir); }, {"model.safetensors.index.json", "malformed JSON"});
    }
}

// ---- fuzz ----

namespace {

// Runs the parser on `file` held in an exactly sized heap buffer (so an over-read is an ASan
// error) and accepts only success or a clean k3::Error.
void parse_must_not_crash(const std::string& file, int64_t claimed_size, int* accepted, int* refused) {
    std::vector<char> exact(file.begin(), file.end());
    std::string_view view(exact.data(), exact.size());
    try {
        auto tensors = parse_safetensors_header(view, claimed_size, 0, "fuzz.safetensors", nullptr);
        // Anything accepted must be internally consistent.
        for (const auto& t : tensors) {
            REQUIRE(t.offset >= 8);
            REQUIRE(t.nbytes >= 0);
            REQUIRE(t.offset + t.nbytes <= claimed_size);
        }
        ++*accepted;
    } catch (const Error& e) {
        REQUIRE(e.kind() == ErrorKind::Checkpoint);
        ++*refused;
    }
}

}  // namespace

TEST_CASE("fuzz: random and mutated headers never crash or read out of bounds") {
    std::mt19937_64 rng(20261129);
    auto rand_int = [&](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); };

    ShardBuilder base;
    base.add("language_model.model.layers.0.input_layernorm.weight", "BF16", {16})
        .add("w", "U8", {4, 8})
        .add("f", "F32", {2, 3})
        .add("scalar", "F32", {})
        .add("h", "F16", {5});
    base.header["__metadata__"] = {{"format", "pt"}};
    const std::string valid = base.bytes();
    const std::string header_text = base.header.dump();
    const std::string tokens[] = {"{", "}", "[", "]", ",", ":", "\"", "\\", "-1", "1e308", "18446744073709551615",
                                  "9223372036854775807", "null", "true", "\"dtype\"", "\"shape\"", "\"data_offsets\"",
                                  "\"F32\"", "\"U8\"", "[0,0]", "[]", "\"__metadata__\"", "\xff", "\\u0000", " "};

    int accepted = 0, refused = 0;
    for (int iter = 0; iter < 20000; ++iter) {
        std::string file;
        int64_t claimed = -1;
        switch (iter % 5) {
            case 0: {  // pure random bytes, random length
                file.resize(size_t(rand_int(0, 64)));
                for (char& c : file) c = char(rand_int(0, 255));
                break;
            }
            case 1: {  // valid file, random byte flips anywhere (length field included)
                file = valid;
                for (int k = int(rand_int(1, 4)); k > 0; --k) file[size_t(rand_int(0, int64_t(file.size()) - 1))] ^= char(rand_int(1, 255));
                break;
            }
            case 2: {  // header text spliced with JSON tokens, length field kept consistent
                std::string text = header_text;
                for (int k = int(rand_int(1, 3)); k > 0; --k) {
                    size_t at = size_t(rand_int(0, int64_t(text.size())));
                    if (rand_int(0, 1)) text.insert(at, tokens[rand_int(0, std::size(tokens) - 1)]);
                    else text.erase(at, size_t(rand_int(1, 6)));
                }
                file = base.bytes_with_header(text);
                break;
            }
            case 3: {  // numbers replaced by extreme values
                std::string text = header_text;
                for (int k = int(rand_int(1, 3)); k > 0; --k) {
                    size_t at = text.find_first_of("0123456789", size_t(rand_int(0, int64_t(text.size()) - 1)));
                    if (at == std::string::npos) continue;
                    size_t end = text.find_first_not_of("0123456789", at);
                    const char* repl[] = {"0", "-1", "1", "4294967296", "9223372036854775807", "18446744073709551616",
                                          "99999999999999999999999", "1.5", "1e300", "-0"};
                    text.replace(at, end - at, repl[rand_int(0, std::size(repl) - 1)]);
                }
                file = base.bytes_with_header(text);
                break;
            }
            case 4: {  // valid header, file truncated or claimed size different from the bytes given
                file = valid.substr(0, size_t(rand_int(0, int64_t(valid.size()))));
                claimed = rand_int(0, 1) ? int64_t(file.size()) : rand_int(0, int64_t(valid.size()) * 2);
                break;
            }
        }
        if (claimed < 0) claimed = int64_t(file.size());
        // The parser is only ever given at least the bytes it asks for by TensorDirectory; the
        // fuzz also covers being given fewer (claimed > bytes given).
        parse_must_not_crash(file, claimed, &accepted, &refused);
    }
    MESSAGE("fuzz: ", accepted, " accepted, ", refused, " refused");
    CHECK(refused > 10000);
    CHECK(accepted > 0);  // the mutations leave some valid files, so the accept path is exercised too
}

TEST_CASE("fuzz: mutated shards on disk through TensorDirectory::open") {
    std::mt19937_64 rng(7);
    ShardBuilder base;
    base.add("a", "BF16", {8, 8}).add("b", "U8", {16});
    const std::string valid = base.bytes();
    auto dir = k3::test::scratch_dir("fuzz-dir");
    for (int iter = 0; iter < 500; ++iter) {
        std::string file = valid;
        auto pick = std::uniform_int_distribution<size_t>(0, file.size() - 1);
        for (int k = 0; k < 3; ++k) file[pick(rng)] = char(rng());
        if (iter % 3 == 0) file.resize(pick(rng));
        ShardBuilder::write_file(dir / "x.safetensors", file);
        try {
            TensorDirectory td = TensorDirectory::open(dir);
            for (const auto& t : td.tensors()) REQUIRE(t.offset + t.nbytes <= td.shards()[0].file_size);
        } catch (const Error& e) {
            REQUIRE(e.kind() == ErrorKind::Checkpoint);
            REQUIRE(std::string(e.what()).find("x.safetensors") != std::string::npos);
        }
    }
}

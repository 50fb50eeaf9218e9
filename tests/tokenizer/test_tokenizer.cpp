// Tokenizer behaviour beyond parity: loading a model directory (and refusing malformed ones),
// invalid UTF-8, the streaming decoder, unknown ids, and the tokenize/detokenize subcommands.
#include <doctest/doctest.h>

#include "common/scratch.h"
#include "common/shared_file.h"
#include "common/skip.h"

#include <cstdio>
#include <random>
#include <set>

#include "tokenizer/utf8.h"
#include "tokenizer/tokenizer_fixtures.h"
#include "k3/error.h"

using namespace k3;
using namespace k3::test;
namespace fs = std::filesystem;

namespace {


std::string base64(std::string_view bytes) {
    static const char* kAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    std::string out;
    size_t i = 0;
    for (; i + 2 < bytes.size(); i += 3) {
        uint32_t v = (uint8_t(bytes[i]) << 16) | (uint8_t(bytes[i + 1]) << 8) | uint8_t(bytes[i + 2]);
        for (int k = 3; k >= 0; --k) out += kAlphabet[(v >> (6 * k)) & 63];
    }
    if (bytes.size() - i == 1) {
        uint32_t v = uint8_t(bytes[i]) << 16;
        out += kAlphabet[v >> 18], out += kAlphabet[(v >> 12) & 63], out += "==";
    } else if (bytes.size() - i == 2) {
        uint32_t v = (uint8_t(bytes[i]) << 16) | (uint8_t(bytes[i + 1]) << 8);
        out += kAlphabet[v >> 18], out += kAlphabet[(v >> 12) & 63], out += kAlphabet[(v >> 6) & 63], out += '=';
    }
    return out;
}

// A model-style tokenizer directory holding the o200k_base ranks and Kimi's named specials
// at the same offsets as in K3, the way make-model and the real checkpoint lay them out.
fs::path o200k_model_dir() {
    fs::path dir = k3::test::scratch_dir("o200k-model");
    auto ranks = parse_tiktoken_bpe_ranks(npm_encoder("o200k_base")["bpe_ranks"].get<std::string>());
    std::string model;
    for (size_t r = 0; r < ranks.size(); ++r) model += base64(ranks[r]) + " " + std::to_string(r) + "\n";
    k3::test::write_file(dir / "tiktoken.model", model);
    auto specials = nlohmann::json::parse(read_text(tokenizer_fixtures() / "kimi_o200k_specials.json"));
    nlohmann::json decoder = nlohmann::json::object();
    for (const auto& [content, id] : specials["specials"].items())
        decoder[std::to_string(id.get<int>())] = {{"content", content}, {"special", true}};
    k3::test::write_file(dir / "tokenizer_config.json", nlohmann::json{{"added_tokens_decoder", decoder}}.dump(1));
    return dir;
}

bool is_valid_utf8(std::string_view s) {
    for (size_t i = 0; i < s.size();) {
        size_t n = utf8::valid_sequence_length(s, i);
        if (n == 0) return false;
        i += n;
    }
    return true;
}

std::string error_of(const std::function<void()>& f) {
    try {
        f();
    } catch (const Error& e) {
        return e.what();
    }
    return "(no error)";
}

// Runs a shell command, returns its exit code and stdout.
int run(const std::string& cmd, std::string& out) {
    out.clear();
    FILE* p = popen(cmd.c_str(), "r");
    REQUIRE(p != nullptr);
    char buf[4096];
    for (size_t n; (n = fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, n);
    int status = pclose(p);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

}  // namespace

TEST_CASE("a model directory loads into the same tokenizer as the parts") {
    auto loaded = Tokenizer::load(o200k_model_dir());
    auto built = kimi_over_o200k();
    CHECK(loaded->n_vocab() == 199998 + 256);
    // Named specials keep their ids; the unnamed reserved ids get upstream's placeholder names.
    CHECK(loaded->special_id("[EOS]") == 199999);
    CHECK(loaded->special_id("<|reserved_token_200006|>") == 200006);
    CHECK(loaded->token_bytes(200006) == "<|reserved_token_200006|>");
    CHECK(loaded->is_special(200253));
    CHECK_FALSE(loaded->is_special(199997));
    CHECK(loaded->token_bytes(200254).empty());
    auto corpus = read_jsonl(tokenizer_fixtures() / "corpus.jsonl");
    for (size_t i = 0; i < corpus.size(); i += 7) {
        std::string text = corpus[i].get<std::string>();
        REQUIRE(loaded->encode(text, true) == built->encode(text, true));
    }
    // docs/model.md "BPE": ids 3, 4, 5, 6, 7 decode to $%&'(, which holds for every byte-level vocabulary that
    // starts with the printable bytes, o200k included.
    std::vector<int32_t> ids = {3, 4, 5, 6, 7};
    CHECK(loaded->decode(ids) == "$%&'(");
}

TEST_CASE("malformed tokenizer files are refused with the file, line and problem") {
    fs::path dir = k3::test::scratch_dir("bad");
    std::string bytes_ok;
    for (int b = 0; b < 256; ++b) bytes_ok += base64(std::string(1, char(b))) + " " + std::to_string(b) + "\n";
    const std::string config_ok = R"({"added_tokens_decoder": {"300": {"content": "[BOS]"}}})";

    k3::test::write_file(dir / "tokenizer_config.json", config_ok);
    fs::remove(dir / "tiktoken.model");
    CHECK(error_of([&] { Tokenizer::load(dir); }).find("cannot open") != std::string::npos);

    k3::test::write_file(dir / "tiktoken.model", bytes_ok + "!!notbase64 256\n");
    CHECK(error_of([&] { Tokenizer::load(dir); }).find("tiktoken.model:257: malformed base64") != std::string::npos);

    k3::test::write_file(dir / "tiktoken.model", bytes_ok + "YWI= x1\n");
    CHECK(error_of([&] { Tokenizer::load(dir); }).find("tiktoken.model:257: malformed rank") != std::string::npos);

    // A rank the file's line count cannot reach is refused before anything is sized by it.
    k3::test::write_file(dir / "tiktoken.model", bytes_ok + "YWI= 300\n");
    CHECK(error_of([&] { Tokenizer::load(dir); }).find("tiktoken.model:257: rank 300 is beyond the file's 258 lines") !=
          std::string::npos);
    k3::test::write_file(dir / "tiktoken.model", bytes_ok + "YWI= 257\nYWJj 258\n");
    CHECK(error_of([&] { Tokenizer::load(dir); }).find("rank 256 is missing") != std::string::npos);

    k3::test::write_file(dir / "tiktoken.model", bytes_ok + "YWI= 5\n");
    CHECK(error_of([&] { Tokenizer::load(dir); }).find("rank 5 given twice") != std::string::npos);

    k3::test::write_file(dir / "tiktoken.model", bytes_ok.substr(0, bytes_ok.find("\n") + 1) + "YWI= 1\n");
    CHECK(error_of([&] { Tokenizer::load(dir); }).find("no rank for the single byte 1") != std::string::npos);

    k3::test::write_file(dir / "tiktoken.model", bytes_ok + "YQ== 256\n");  // "a" again
    CHECK(error_of([&] { Tokenizer::load(dir); }).find("repeats the bytes") != std::string::npos);

    k3::test::write_file(dir / "tiktoken.model", bytes_ok);
    k3::test::write_file(dir / "tokenizer_config.json", R"({"added_tokens_decoder": {"12": {"content": "[BOS]"}}})");
    CHECK(error_of([&] { Tokenizer::load(dir); }).find("collides with a rank") != std::string::npos);
    k3::test::write_file(dir / "tokenizer_config.json", R"({"added_tokens_decoder": {"256": {"id": 3}}})");
    CHECK(error_of([&] { Tokenizer::load(dir); }).find("added_tokens_decoder[\"256\"]: needs a string 'content'") !=
          std::string::npos);
    k3::test::write_file(dir / "tokenizer_config.json", R"({"bos_token": "[BOS]"})");
    CHECK(error_of([&] { Tokenizer::load(dir); }).find("missing object field 'added_tokens_decoder'") != std::string::npos);
    k3::test::write_file(dir / "tokenizer_config.json", "{");
    CHECK(error_of([&] { Tokenizer::load(dir); }).find("not valid JSON") != std::string::npos);

    k3::test::write_file(dir / "tokenizer_config.json", config_ok);
    auto tok = Tokenizer::load(dir);  // the minimal valid vocabulary: 256 bytes + specials
    CHECK(tok->n_vocab() == 512);
    CHECK(tok->encode("[BOS]ab", true) == std::vector<int32_t>{300, 'a', 'b'});
}

TEST_CASE("invalid UTF-8 becomes single-byte tokens around normally encoded valid text") {
    auto tok = kimi_over_o200k();
    auto byte_id = [&](unsigned char b) { return tok->encode(std::string(1, char(b)), false).at(0); };
    auto concat = [](std::vector<std::vector<int32_t>> parts) {
        std::vector<int32_t> out;
        for (auto& p : parts) out.insert(out.end(), p.begin(), p.end());
        return out;
    };
    // Each invalid byte is cut out; the valid stretches encode as texts of their own.
    CHECK(tok->encode("hello\xFFworld", false) ==
          concat({tok->encode("hello", false), {byte_id(0xFF)}, tok->encode("world", false)}));
    CHECK(tok->encode("caf\xC3", false) == concat({tok->encode("caf", false), {byte_id(0xC3)}}));
    CHECK(tok->encode("\xED\xA0\x80", false) == std::vector<int32_t>{byte_id(0xED), byte_id(0xA0), byte_id(0x80)});
    CHECK(tok->encode("\xC0\xAF", false) == std::vector<int32_t>{byte_id(0xC0), byte_id(0xAF)});
    CHECK(tok->encode("\xF4\x90\x80\x80", false).size() == 4);  // beyond U+10FFFF
    // "  " before an invalid byte ends its stretch, as at the end of a text.
    CHECK(tok->encode("a  \x80" "b", false) ==
          concat({tok->encode("a  ", false), {byte_id(0x80)}, tok->encode("b", false)}));
    // Random bytes: deterministic, never a crash, and decoding gives the bytes back.
    std::mt19937 rng(7);
    for (int trial = 0; trial < 2000; ++trial) {
        std::string s(rng() % 64, '\0');
        for (auto& c : s) c = char(rng() % 4 == 0 ? 0x80 + rng() % 0x80 : rng() % 256);
        auto ids = tok->encode(s, trial % 2 == 0);
        REQUIRE(tok->decode(ids) == s);
        REQUIRE(tok->encode(s, trial % 2 == 0) == ids);
    }
}

TEST_CASE("StreamDecoder never emits a partial UTF-8 sequence and loses nothing") {
    auto tok = kimi_over_o200k();
    auto corpus = read_jsonl(tokenizer_fixtures() / "corpus.jsonl");
    int held_back = 0;
    for (const auto& row : corpus) {
        std::string text = row.get<std::string>();
        StreamDecoder dec(*tok);
        std::string joined;
        for (int32_t id : tok->encode(text, false)) {
            std::string piece = dec.push(id);
            REQUIRE(is_valid_utf8(piece));
            held_back += !tok->token_bytes(id).empty() && piece.size() != tok->token_bytes(id).size();
            joined += piece;
        }
        joined += dec.flush();
        REQUIRE(joined == text);
    }
    CHECK(held_back > 100);  // the corpus does split characters across tokens
    // Bytes that can never complete are not held back; an incomplete tail comes out on flush.
    StreamDecoder dec(*tok);
    CHECK(dec.push(tok->encode("\xFF", false)[0]) == "\xFF");
    CHECK(dec.push(tok->encode("\xE4", false)[0]).empty());
    CHECK(dec.push(tok->encode("\xB8", false)[0]).empty());
    CHECK(dec.push(tok->encode("\xAD", false)[0]) == "\xE4\xB8\xAD");
    CHECK(dec.push(tok->encode("\xF0", false)[0]).empty());
    CHECK(dec.flush() == "\xF0");
    CHECK(dec.push(tok->encode("\xE0", false)[0]).empty());
    CHECK(dec.push(tok->encode("\x80", false)[0]) == "\xE0\x80");  // E0 80 can never be valid
    CHECK_THROWS_AS(dec.push(-1), Error);
}

TEST_CASE("decode refuses unknown ids") {
    auto tok = kimi_over_o200k();
    std::vector<int32_t> bad = {1, tok->n_vocab()};
    CHECK(error_of([&] { tok->decode(bad); }).find("unknown token id") != std::string::npos);
    std::vector<int32_t> negative = {-5};
    CHECK_THROWS_AS(tok->decode(negative), Error);
}

TEST_CASE("a 1 MB single line is encoded (the O(n log n) merge path) and round-trips") {
    auto tok = kimi_over_o200k();
    std::string line;
    while (line.size() < (1 << 20)) line += "abcdefghij";  // one piece of 1 MiB
    auto ids = tok->encode(line, false);
    CHECK(ids.size() < line.size() / 2);
    CHECK(tok->decode(ids) == line);
}

TEST_CASE("k3serve tokenize and detokenize") {
    const char* bin = std::getenv("K3SERVE_BIN");
    REQUIRE(bin != nullptr);
    fs::path dir = o200k_model_dir();
    const fs::path cli_dir = k3::test::scratch_dir("cli");
    fs::path input = cli_dir / "input.txt";
    const std::string text = "[BOS]Hello, 世界! It's 2026.\r\n\tdone <|open|>";
    k3::test::write_file(input, text);
    auto tok = Tokenizer::load(dir);
    std::string out;

    REQUIRE(run(std::string(bin) + " tokenize --tokenizer " + dir.string() + " < " + input.string(), out) == 0);
    CHECK(nlohmann::json::parse(out).get<std::vector<int32_t>>() == tok->encode(text, false));
    REQUIRE(run(std::string(bin) + " tokenize --allow-special --tokenizer " + dir.string() + " < " + input.string(), out) == 0);
    auto ids = nlohmann::json::parse(out).get<std::vector<int32_t>>();
    CHECK(ids == tok->encode(text, true));
    CHECK(ids.front() == 199998);

    fs::path ids_file = cli_dir / "ids.json";
    k3::test::write_file(ids_file, out);
    REQUIRE(run(std::string(bin) + " detokenize --tokenizer " + dir.string() + " < " + ids_file.string(), out) == 0);
    CHECK(out == text);

    CHECK(run(std::string(bin) + " tokenize --help", out) == 0);
    CHECK(out.find("--allow-special") != std::string::npos);
    CHECK(run(std::string(bin) + " detokenize --help", out) == 0);
    CHECK(run(std::string(bin) + " tokenize < /dev/null 2>/dev/null", out) == 2);
    CHECK(run(std::string(bin) + " tokenize --tokenizer /nonexistent < /dev/null 2>/dev/null", out) == 2);
    k3::test::write_file(ids_file, "[1, \"two\"]");
    CHECK(run(std::string(bin) + " detokenize --tokenizer " + dir.string() + " < " + ids_file.string() + " 2>&1", out) == 2);
    CHECK(out.find("element 1") != std::string::npos);
    k3::test::write_file(ids_file, "[1, 999999999]");
    CHECK(run(std::string(bin) + " detokenize --tokenizer " + dir.string() + " < " + ids_file.string() + " 2>&1", out) == 2);
    CHECK(out.find("unknown token id 999999999") != std::string::npos);
}

TEST_CASE("the real Kimi K3 tokenizer (../shared/data/kimi-tokenizer) reproduces the documented examples") {
    // K3_REAL_TOKENIZER_DIR names another copy.
    const fs::path dir = k3::test::env_or("K3_REAL_TOKENIZER_DIR", k3::test::shared_file("data/kimi-tokenizer").string());
    for (const char* file : {"tiktoken.model", "tokenizer_config.json"})
        if (!fs::exists(dir / file)) K3_SKIP(k3::test::missing_shared_file(dir / file));
    auto tok = Tokenizer::load(dir.string());
    CHECK(tok->n_vocab() == 163840);
    CHECK(tok->encode("The capital of France is", false) == std::vector<int32_t>{1008, 10484, 318, 15383, 387});
    CHECK(tok->token_bytes(17374) == " Paris");
    // 20829 is said to be "period, double-quote, comma"; the rank file's line for it is
    // "LiIsCg== 20829", base64 of those three and a newline: the file is the reference.
    CHECK(tok->token_bytes(20829) == ".\",\n");
    std::vector<int32_t> ids = {3, 4, 5, 6, 7};
    CHECK(tok->decode(ids) == "$%&'(");
    CHECK(tok->special_id("[BOS]") == 163584);
    CHECK(tok->special_id("[EOS]") == 163585);
    CHECK(tok->special_id("<|end_of_msg|>") == 163586);
    CHECK(tok->special_id("<|open|>") == 163587);
    CHECK(tok->special_id("[PAD]") == 163839);
    // docs/model.md "Pre-tokenizer": the example split 中文 | English | 混合: token boundaries at bytes 6 and 13.
    std::set<size_t> boundaries;
    size_t offset = 0;
    for (int32_t id : tok->encode("中文English混合", false)) boundaries.insert(offset += tok->token_bytes(id).size());
    CHECK(boundaries.count(6) == 1);
    CHECK(boundaries.count(13) == 1);
}

// k3serve tokenize --tokenizer DIR [--allow-special]: UTF-8 text on stdin -> JSON array of ids.
#include <cstdio>
#include <cstring>
#include <iostream>
#include <iterator>
#include <string>

#include "k3/tokenizer.h"
#include "k3/cli.h"
#include "k3/error.h"

namespace k3::cli {

namespace {

constexpr const char* kUsage =
    "usage: k3serve tokenize --tokenizer DIR [--allow-special]\n"
    "\n"
    "Reads text from stdin and prints its token ids as a JSON array.\n"
    "  --tokenizer DIR   directory with tiktoken.model and tokenizer_config.json\n"
    "                    (a model directory)\n"
    "  --allow-special   map special-token strings such as [BOS] or <|open|> to their ids;\n"
    "                    without it they are encoded as plain text\n"
    "Invalid UTF-8 bytes are encoded as single-byte tokens (README, \"Tokenizer\").\n";

}  // namespace

int tokenize_main(int argc, char** argv) {
    std::string dir;
    bool allow_special = false;
    for (int i = 1; i < argc; ++i) {
        if (!std::strcmp(argv[i], "--help") || !std::strcmp(argv[i], "-h")) {
            std::fputs(kUsage, stdout);
            return 0;
        } else if (!std::strcmp(argv[i], "--tokenizer") && i + 1 < argc) {
            dir = argv[++i];
        } else if (!std::strcmp(argv[i], "--allow-special")) {
            allow_special = true;
        } else {
            std::fprintf(stderr, "k3serve tokenize: unexpected argument '%s'\n\n%s", argv[i], kUsage);
            return 2;
        }
    }
    if (dir.empty()) {
        std::fprintf(stderr, "k3serve tokenize: --tokenizer DIR is required\n\n%s", kUsage);
        return 2;
    }
    try {
        auto tok = Tokenizer::load(dir);
        std::string text((std::istreambuf_iterator<char>(std::cin)), std::istreambuf_iterator<char>());
        std::vector<int32_t> ids = tok->encode(text, allow_special);
        std::string out = "[";
        for (size_t i = 0; i < ids.size(); ++i) {
            if (i) out += ',';
            out += std::to_string(ids[i]);
        }
        out += "]\n";
        std::fwrite(out.data(), 1, out.size(), stdout);
        return std::fflush(stdout) == 0 ? 0 : 1;
    } catch (const Error& e) {
        std::fprintf(stderr, "k3serve tokenize: %s\n", e.what());
        return exit_code_for(e.kind());
    }
}

}  // namespace k3::cli

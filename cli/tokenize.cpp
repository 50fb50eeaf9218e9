// k3serve tokenize --tokenizer DIR [--allow-special]: UTF-8 text on stdin -> JSON array of ids.
#include <cstdio>
#include <iostream>
#include <iterator>
#include <string>

#include "k3/tokenizer.h"
#include "k3/cli.h"
#include "cli/subcommand.h"
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
    return run_subcommand({"tokenize", kUsage}, argc, argv, [](ArgList& args) {
        std::string dir;
        bool allow_special = false;
        while (args.next()) {
            if (args.is("--tokenizer")) dir = args.value();
            else if (args.is("--allow-special")) allow_special = true;
            else args.positional({});
        }
        if (dir.empty()) throw Error(ErrorKind::Usage, "--tokenizer DIR is required");
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
    });
}

}  // namespace k3::cli

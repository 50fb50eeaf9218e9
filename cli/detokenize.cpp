// k3serve detokenize --tokenizer DIR: JSON array of ids on stdin -> the bytes they stand for.
#include <cstdio>
#include <iostream>
#include <iterator>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>

#include "k3/tokenizer.h"
#include "k3/cli.h"
#include "cli/subcommand.h"
#include "k3/error.h"

namespace k3::cli {

namespace {

constexpr const char* kUsage =
    "usage: k3serve detokenize --tokenizer DIR\n"
    "\n"
    "Reads a JSON array of token ids from stdin and writes the bytes they decode to (special\n"
    "tokens as their literal text) to stdout.\n"
    "  --tokenizer DIR   directory with tiktoken.model and tokenizer_config.json\n";

std::vector<int32_t> parse_ids(const std::string& text) {
    nlohmann::json doc;
    try {
        doc = nlohmann::json::parse(text);
    } catch (const nlohmann::json::parse_error& e) {
        throw Error(ErrorKind::Usage, std::string("stdin is not valid JSON: ") + e.what());
    }
    if (!doc.is_array()) throw Error(ErrorKind::Usage, "stdin must be a JSON array of token ids");
    std::vector<int32_t> ids;
    ids.reserve(doc.size());
    for (size_t i = 0; i < doc.size(); ++i) {
        const auto& v = doc[i];
        if (!v.is_number_integer() || v.get<int64_t>() < 0 ||
            v.get<int64_t>() > std::numeric_limits<int32_t>::max())
            throw Error(ErrorKind::Usage, "element " + std::to_string(i) + " of the array is not a token id: " + v.dump());
        ids.push_back(static_cast<int32_t>(v.get<int64_t>()));
    }
    return ids;
}

}  // namespace

int detokenize_main(int argc, char** argv) {
    return run_subcommand({"detokenize", kUsage}, argc, argv, [](ArgList& args) {
        std::string dir;
        while (args.next()) {
            if (args.is("--tokenizer")) dir = args.value();
            else args.positional({});
        }
        if (dir.empty()) throw Error(ErrorKind::Usage, "--tokenizer DIR is required");
        auto tok = Tokenizer::load(dir);
        std::string input((std::istreambuf_iterator<char>(std::cin)), std::istreambuf_iterator<char>());
        std::string out = tok->decode(parse_ids(input));
        std::fwrite(out.data(), 1, out.size(), stdout);
        return std::fflush(stdout) == 0 ? 0 : 1;
    });
}

}  // namespace k3::cli

// Helpers for the grammar tests: run a grammar over text (bytes, with K3 control tokens written
// as their text), check which strings it accepts and which schemas it refuses, and tokenizers of the synthetic vocabularies (tiny: 512 ids, single bytes;
// demo: 4096 ids with multi-byte pieces).
#pragma once
#include <doctest/doctest.h>

#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/scratch.h"
#include "grammar/automaton.h"
#include "k3/grammar.h"
#include "k3/tokenizer.h"
#include "synthetic/vocab.h"

namespace k3::test {

// The ids that end an answer ([EOS], <|end_of_msg|>) where the tokenizer has them.
inline std::vector<int32_t> end_ids(const Tokenizer& tok) {
    std::vector<int32_t> ids;
    for (const char* name : {"[EOS]", "<|end_of_msg|>"})
        if (auto id = tok.special_id(name)) ids.push_back(*id);
    return ids;
}

// Whether `text` (control tokens spelled "<|open|>" etc.) is a complete sentence of `g`.
inline bool grammar_accepts(const Grammar& g, std::string_view text) {
    grammar::Automaton a(g.shared_rules());
    int32_t s = a.start();
    const auto& specials = g.rules().specials;
    for (size_t i = 0; i < text.size();) {
        int symbol = (unsigned char)text[i];
        size_t width = 1;
        for (size_t k = 0; k < specials.size(); ++k)
            if (text.substr(i, specials[k].size()) == specials[k]) {
                symbol = 256 + int(k);
                width = specials[k].size();
            }
        s = a.step(s, symbol);
        if (s == grammar::Automaton::kDead) return false;
        i += width;
    }
    return a.accepting(s);
}

// Checks that `g` accepts every string of `good` and none of `bad`, naming the one that fails.
inline void check_sentences(const Grammar& g, std::initializer_list<std::string> good, std::initializer_list<std::string> bad) {
    for (const auto& s : good) CHECK_MESSAGE(grammar_accepts(g, s), "should accept: " << s);
    for (const auto& s : bad) CHECK_MESSAGE(!grammar_accepts(g, s), "should reject: " << s);
}

// The keyword a schema is refused for (GrammarError::keyword), or "(accepted)".
inline std::string refused_keyword(const std::string& schema) {
    try {
        Grammar::json_schema(schema);
    } catch (const GrammarError& e) {
        return e.keyword();
    }
    return "(accepted)";
}

inline std::shared_ptr<Tokenizer> synthetic_tokenizer(int vocab_size) {
    // Written into this process's own scratch directory (common/scratch.h), so test cases that
    // run side by side never read each other's half-written files.
    const auto dir = scratch_dir("vocab-" + std::to_string(vocab_size));
    write_tokenizer_files(build_synthetic_vocab(vocab_size), dir);
    return std::shared_ptr<Tokenizer>(Tokenizer::load(dir));
}

}  // namespace k3::test

// Constrained decoding: grammars that the model's output is held to, token by token.
//
// A Grammar describes the output as bytes plus K3 control tokens (<|open|>, <|close|>,
// <|sep|>). A TokenTable (built once per tokenizer, at start-up) knows what each token spells.
// A GrammarMatcher (one per request, one thread at a time) walks the grammar's pushdown automaton over
// those bytes and, before each sampling step, sets the logits of every token that cannot
// continue a valid output to -inf; the logits of allowed tokens are not touched, so a request
// without a grammar is unaffected and a constrained one is deterministic like any other.
// Masks are cached per automaton state, so a step costs a cache lookup plus the -inf writes.
//
// Typical use (the daemon compiles on the request's HTTP thread, within GrammarLimits, and its
// engine worker runs the loop):
//
//     Grammar g = Grammar::json_schema(schema_text, limits).chat_response(thinking, limits);  // may throw GrammarError
//     GrammarMatcher m(g, token_table, limits);                        // the automaton's start, the first mask
//     for (each step) {
//         copy logits; m.mask_logits(copy, max_tokens - generated);   // after penalties/biases
//         id = sampler.sample(copy); m.accept(id);
//         if (m.finished()) stop;                                      // the output is complete
//     }
//
// FOR TOOL CALLING (the agent-api side): Grammar::tool_calls() is the grammar of an assistant
// turn that must call tools (tool_choice "required" or a named function): the K3 XTML call
// structure of K3's tool call (docs/api.md "Tool calling"; literals from k3/xtml.h), the tool name out of the
// declared ones, and each argument's body valid for its JSON schema (string bodies raw, the
// others JSON). It starts right after the generation prompt (so with an empty response:
// <|close|>response<|sep|><|open|>tools<|sep|>...) and ends with <|close|>message<|sep|>, where
// finished() turns true. For tool_choice "required" pass every declared tool; for a named
// function pass only that one; max_calls > 1 for parallel_tool_calls. Build it on the HTTP
// thread (it throws GrammarError naming an unsupported schema keyword: answer 400), put it in
// GenerationParams::grammar, and the worker runs it exactly as above. A tool whose parameters
// declare no properties takes no arguments.
#pragma once
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "k3/error.h"
#include "k3/tokenizer.h"

namespace k3 {

namespace grammar {
struct GrammarRules;
struct TokenTableData;
class Automaton;
}  // namespace grammar

// A schema or grammar that cannot be compiled. keyword() names the JSON-schema keyword (or
// "pattern", "$ref", ...) at fault; path() is the JSON pointer of the schema object holding it.
class GrammarError : public Error {
public:
    GrammarError(std::string keyword, std::string path, const std::string& message)
        : Error(ErrorKind::Usage, message), keyword_(std::move(keyword)), path_(std::move(path)) {}
    const std::string& keyword() const { return keyword_; }
    const std::string& path() const { return path_; }

private:
    std::string keyword_, path_;
};

// What compiling one grammar may cost (docs/operations.md, "Grammar budgets": an enum
// of 60,000 strings once took 26-44 s and 260 MB of the engine worker). Each budget is checked
// while the grammar is built, counting as it goes, so a schema over one is refused before most
// of its cost is paid, never built whole and then measured. The daemon sets them from its
// --grammar-max-* settings; the defaults are those settings' defaults.
struct GrammarLimits {
    size_t max_enum_values = 10000;        // values of one enum (const is one value)
    size_t max_literal_bytes = 1u << 20;   // bytes of every enum and const value together, as JSON text
    size_t max_symbols = 4u << 20;         // symbols of the compiled rules (bytes, control tokens, references)
    size_t max_states = 1u << 16;          // automaton states, while compiling and while decoding
    double max_compile_ms = 5000;          // rules, automaton and first mask, counted from `started`
    // When the compile began: one request's several steps (schema, chat wrapper, matcher) share
    // one time budget by passing the same start. Unset: each step starts its own clock.
    std::optional<std::chrono::steady_clock::time_point> started;
};

// The budget GrammarLimits names, for errors and metrics.
enum class GrammarLimit { EnumValues, LiteralBytes, Symbols, States, CompileTime };
inline constexpr GrammarLimit kAllGrammarLimits[] = {GrammarLimit::EnumValues, GrammarLimit::LiteralBytes,
                                                     GrammarLimit::Symbols, GrammarLimit::States,
                                                     GrammarLimit::CompileTime};
// Its short name, as the daemon's setting has it after "grammar_max_": "enum", "literal_bytes",
// "symbols", "states", "compile_ms" (/metrics labels, --grammar-max-* flags).
const char* grammar_limit_name(GrammarLimit limit);

// A grammar over one of its budgets: limit() says which, limit_value() what it was set to. The
// request's error (a 400 naming the limit), not the server's.
class GrammarBudgetError : public GrammarError {
public:
    GrammarBudgetError(GrammarLimit limit, double limit_value, std::string path, const std::string& message)
        : GrammarError("", std::move(path), message), limit_(limit), limit_value_(limit_value) {}
    GrammarLimit limit() const { return limit_; }
    double limit_value() const { return limit_value_; }

private:
    GrammarLimit limit_;
    double limit_value_;
};

// One declared tool: its name and its parameters as JSON-schema text ("" = no parameters).
struct ToolDeclaration {
    std::string name;
    std::string parameters_schema;
};

struct ToolCallOptions {
    bool thinking = false;  // the generation prompt opened <|open|>think<|sep|> (reasoning first)
    int max_calls = 1;      // 1, or up to this many calls (parallel_tool_calls); at most 16
};

class Grammar {
public:
    // Any JSON object (RFC 8259, no whitespace between tokens), as response_format json_object.
    static Grammar json_object();
    // The JSON values a JSON schema accepts (schema given as JSON text). Supported: type (one or
    // a list), properties, required, additionalProperties (false, true, or a schema for a map
    // without properties), enum, const, items, minItems, maxItems, anyOf, $ref to #, #/$defs/...
    // or #/definitions/..., string minLength, maxLength and pattern (a regex subset), integer
    // and number minimum, maximum, exclusiveMinimum, exclusiveMaximum (integral bounds for
    // numbers), OpenAPI's nullable, and annotations (title, description, default, examples, $schema, $id,
    // $comment, deprecated, readOnly, writeOnly, strict). Output has no whitespace between
    // tokens and properties in schema order. Anything else throws GrammarError naming it.
    // Over a budget of `limits`: GrammarBudgetError.
    static Grammar json_schema(std::string_view schema_json, const GrammarLimits& limits = {});
    // An assistant turn that calls one or more of `tools` (see the header comment).
    static Grammar tool_calls(std::span<const ToolDeclaration> tools, const ToolCallOptions& options,
                              const GrammarLimits& limits = {});

    // This grammar as the response of a chat turn, i.e. what the model writes after the chat
    // generation prompt: with thinking on, free reasoning text, then <|close|>think<|sep|>
    // <|open|>response<|sep|>, then this grammar; without, this grammar alone.
    Grammar chat_response(bool thinking, const GrammarLimits& limits = {}) const;

    // Whether both grammars have the same rules (and so accept the same output): a matcher built
    // for one, with its cached masks, serves the other.
    bool same_rules(const Grammar& other) const;

    const grammar::GrammarRules& rules() const { return *rules_; }
    std::shared_ptr<const grammar::GrammarRules> shared_rules() const { return rules_; }
    explicit Grammar(std::shared_ptr<const grammar::GrammarRules> rules) : rules_(std::move(rules)) {}

private:
    std::shared_ptr<const grammar::GrammarRules> rules_;
};

// What every token of a tokenizer spells, sorted for walking the vocabulary as a trie. Built
// once at start-up; immutable and shareable between threads afterwards.
class TokenTable {
public:
    // `n_vocab`: the model's logits width (>= the tokenizer's ids); `end_ids`: the tokens that
    // end generation (EOS, <|end_of_msg|>), allowed only where the grammar is complete.
    TokenTable(const Tokenizer& tokenizer, int n_vocab, std::vector<int32_t> end_ids);
    ~TokenTable();
    int n_vocab() const;
    double build_seconds() const;  // how long the constructor took (reported at start-up)
    const grammar::TokenTableData& data() const { return *data_; }

private:
    std::unique_ptr<grammar::TokenTableData> data_;
};

struct GrammarStats {
    uint64_t masks = 0;         // mask_logits calls
    uint64_t mask_cache_hits = 0;
    uint64_t forced_masks = 0;  // steps where the token budget narrowed the mask
    size_t automaton_states = 0;
};

class GrammarMatcher {
public:
    // Builds the automaton's start and the first mask, within `limits` (max_states, and
    // max_compile_ms from limits.started; GrammarBudgetError past either), so that whoever
    // builds the matcher pays for compiling it: the daemon does this on the HTTP thread and
    // hands the matcher to the engine worker with the job. Afterwards only max_states applies.
    GrammarMatcher(const Grammar& grammar, std::shared_ptr<const TokenTable> table, const GrammarLimits& limits = {});
    ~GrammarMatcher();
    GrammarMatcher(GrammarMatcher&&) noexcept;
    GrammarMatcher& operator=(GrammarMatcher&&) noexcept;

    // Sets the logits of disallowed tokens to -inf; allowed ones keep their exact values.
    // `tokens_left` is how many tokens may still be generated, this one included: when the
    // output could otherwise not be completed within it, only tokens after which it still can
    // are allowed (so a max_tokens large enough for the grammar's shortest output always ends
    // in a complete output). Throws GrammarBudgetError if the automaton outgrows max_states.
    void mask_logits(std::span<float> logits, int tokens_left);
    // Whether the grammar allows `id` next (by walking its bytes: the reference for the mask).
    bool allows(int32_t id);
    // Advances past `id`; false (and no change) if the grammar does not allow it.
    bool accept(int32_t id);
    // The output so far is complete (an end token is allowed now).
    bool accepting() const;
    // The output is complete and nothing may follow: generation must stop.
    bool finished() const;
    // Fewest tokens that complete the output (each byte and control token is at most one token).
    int min_tokens_to_finish() const;
    // Back to the start, keeping the automaton and its cached masks (for the next request with
    // the same grammar).
    void reset();
    const Grammar& grammar() const;
    GrammarStats stats() const;

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

}  // namespace k3

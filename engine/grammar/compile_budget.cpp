// GrammarBudgetError messages: what was counted, where, and the limit it passed (the daemon
// adds the setting's name to it: refusal_message, beside the daemon's other error bodies).
#include "grammar/compile_budget.h"

namespace k3 {

const char* grammar_limit_name(GrammarLimit limit) {
    switch (limit) {
        case GrammarLimit::EnumValues: return "enum";
        case GrammarLimit::LiteralBytes: return "literal_bytes";
        case GrammarLimit::Symbols: return "symbols";
        case GrammarLimit::States: return "states";
        case GrammarLimit::CompileTime: return "compile_ms";
    }
    return "?";
}

}  // namespace k3

namespace k3::grammar {

namespace {

std::string at(const std::string& path) { return path.empty() ? "" : " at " + path; }

}  // namespace

void CompileBudget::check_enum(size_t count, const std::string& path) const {
    if (count > limits_.max_enum_values)
        throw GrammarBudgetError(GrammarLimit::EnumValues, double(limits_.max_enum_values), path,
                                 "grammar too large: the enum" + at(path) + " has " + std::to_string(count) +
                                     " values, over the limit of " + std::to_string(limits_.max_enum_values) +
                                     " values per enum");
}

void CompileBudget::add_literal_bytes(size_t bytes, const std::string& path) {
    literal_bytes_ += bytes;
    if (literal_bytes_ > limits_.max_literal_bytes)
        throw GrammarBudgetError(GrammarLimit::LiteralBytes, double(limits_.max_literal_bytes), path,
                                 "grammar too large: the enum and const values pass " +
                                     std::to_string(limits_.max_literal_bytes) + " bytes" + at(path) +
                                     ", the limit for one grammar");
}

void CompileBudget::add_symbols(size_t n) {
    symbols_ += n;
    if (symbols_ > limits_.max_symbols)
        throw GrammarBudgetError(GrammarLimit::Symbols, double(limits_.max_symbols), "",
                                 "grammar too large: its rules pass " + std::to_string(limits_.max_symbols) +
                                     " symbols, the limit for one grammar");
    tick();
}

void CompileBudget::expect_symbols(size_t n, const std::string& path) const {
    if (symbols_ + n > limits_.max_symbols)
        throw GrammarBudgetError(GrammarLimit::Symbols, double(limits_.max_symbols), path,
                                 "grammar too large: the string length" + at(path) + " needs about " + std::to_string(n) +
                                     " symbols, over the limit of " + std::to_string(limits_.max_symbols) +
                                     " for one grammar");
}

void CompileBudget::check_states(size_t states) const {
    if (states > limits_.max_states)
        throw GrammarBudgetError(GrammarLimit::States, double(limits_.max_states), "",
                                 "grammar too large: its automaton passes " + std::to_string(limits_.max_states) +
                                     " states (the output nests or branches too much)");
}

void CompileBudget::check_time() const {
    const double ms = std::chrono::duration<double, std::milli>(Clock::now() - started_).count();
    if (ms > limits_.max_compile_ms)
        throw GrammarBudgetError(GrammarLimit::CompileTime, limits_.max_compile_ms, "",
                                 "grammar too large: compiling it took longer than " +
                                     std::to_string(int64_t(limits_.max_compile_ms)) + " ms");
}

}  // namespace k3::grammar

// The running count of one grammar compile against its GrammarLimits (k3/grammar.h): the
// builder adds the symbols it is given, the schema compiler the enum and const values it writes,
// the automaton the states it creates, and each checks the clock every so often; the first
// count over its limit throws GrammarBudgetError naming it. Counting as the grammar grows is the
// point: an enum of 60,000 strings is refused on its size, before a rule of it exists.
#pragma once
#include <chrono>
#include <cstddef>
#include <string>

#include "k3/grammar.h"

namespace k3::grammar {

class CompileBudget {
public:
    using Clock = std::chrono::steady_clock;

    explicit CompileBudget(const GrammarLimits& limits = {})
        : limits_(limits), started_(limits.started.value_or(Clock::now())) {}

    const GrammarLimits& limits() const { return limits_; }

    // One enum (or const) of `count` values at `path`, before any is compiled.
    void check_enum(size_t count, const std::string& path) const;
    // `bytes` more of enum and const text.
    void add_literal_bytes(size_t bytes, const std::string& path);
    // `n` more symbols in the rules.
    void add_symbols(size_t n);
    // Whether `n` more symbols would still fit, before making any of them (a string length at
    // `path` that would pass the limit is refused without building its chain of rules).
    void expect_symbols(size_t n, const std::string& path) const;
    // The automaton now has `states` states.
    void check_states(size_t states) const;
    // The time budget, read from the clock every kClockEvery calls (a call is one alternative or
    // one state: far cheaper than a clock read, so the check costs nothing measurable).
    void tick() {
        if (timed_ && ++ticks_ % kClockEvery == 0) check_time();
    }
    void check_time() const;
    // Compiling is over (the matcher is built): from now on only max_states applies.
    void stop_clock() { timed_ = false; }

private:
    static constexpr unsigned kClockEvery = 64;
    GrammarLimits limits_;
    Clock::time_point started_;
    bool timed_ = true;
    unsigned ticks_ = 0;
    size_t literal_bytes_ = 0, symbols_ = 0;
};

}  // namespace k3::grammar

// The pushdown automaton that runs a GrammarRules over output symbols (bytes 0..255, then the
// grammar's control tokens), built lazily into a DFA. A parse position is a stack of rule positions
// (a persistent linked list: each node is "at this symbol, then return to parent"), interned so a
// stack is an integer. Several stacks can be alive at once (anyOf, optional properties that start
// alike), so an automaton state is the sorted set of live stacks, also interned (by a hash of the
// set, compared against the one stored copy). step(state, symbol) is computed once and then read
// from a dense table, so walking the vocabulary's bytes costs one table read per byte once the
// states involved are known. Every lookup while computing a step is hashed, so a state of N stacks
// costs N, not N squared (an enum of 60,000 strings; docs/operations.md "Grammar budgets"). Not
// thread-safe: one automaton belongs to one matcher, used by one thread at a time.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "grammar/compile_budget.h"
#include "grammar/grammar_rules.h"

namespace k3::grammar {

class Automaton {
public:
    static constexpr int32_t kDead = -1;

    // Past limits.max_states (the grammar growing without bound: deep nesting) or, until
    // stop_clock(), past limits.max_compile_ms, building a state throws GrammarBudgetError.
    explicit Automaton(std::shared_ptr<const GrammarRules> rules, const GrammarLimits& limits = {});
    // The time budget now, whatever the count of states since the last look; then compiling is
    // over: only the state count is limited from here on.
    void check_clock() const { budget_.check_time(); }
    void stop_clock() { budget_.stop_clock(); }
    // How many parse stacks a state holds (tests: an enum's trie keeps it to one per next byte).
    size_t stack_count(int32_t state) const { return states_[size_t(state)].stacks.size(); }

    int32_t start() const { return start_; }
    int n_symbols() const { return n_symbols_; }
    const GrammarRules& rules() const { return *rules_; }

    int32_t step(int32_t state, int symbol) {
        size_t at = size_t(state) * size_t(n_symbols_) + size_t(symbol);
        int32_t next = transitions_[at];
        if (next != kUnknown) return next;
        next = compute_step(state, symbol);
        transitions_[at] = next;
        return next;
    }
    // The output so far is a complete sentence of the grammar.
    bool accepting(int32_t state) const { return states_[size_t(state)].accepting; }
    // Some further symbol is possible (false: the output is complete and must end here).
    bool can_continue(int32_t state) const { return states_[size_t(state)].can_continue; }
    // Fewest symbols that bring this state to an accepting one.
    int32_t distance(int32_t state) const { return states_[size_t(state)].distance; }
    size_t state_count() const { return states_.size(); }

private:
    static constexpr int32_t kUnknown = -2;
    static constexpr int32_t kEmptyStack = 0;  // the stack with nothing left: accept

    struct State {
        std::vector<int32_t> stacks;  // sorted stack ids; kEmptyStack when accepting
        bool accepting = false, can_continue = false;
        int32_t distance = 0;
    };

    int32_t intern_stack(int32_t pos, int32_t parent);
    int32_t intern_state(std::vector<int32_t> stacks);
    // The (pos, parent) pairs one step's closure has visited: a short list, scanned (most
    // steps visit a handful), that becomes a hash set once it grows, so a closure over N
    // alternatives costs N.
    class Visited {
    public:
        bool insert(uint64_t key);

    private:
        static constexpr size_t kListMax = 32;
        std::vector<uint64_t> list_;
        std::unordered_set<uint64_t> set_;
    };
    // Adds to `out` every stack whose top is a terminal, reachable from "at pos, then parent"
    // without consuming output.
    void close(int32_t pos, int32_t parent, std::vector<int32_t>& out, Visited& seen);
    int32_t compute_step(int32_t state, int symbol);

    std::shared_ptr<const GrammarRules> rules_;
    CompileBudget budget_;
    int n_symbols_ = 0;
    std::vector<int32_t> stack_pos_, stack_parent_, stack_distance_;
    std::unordered_map<uint64_t, int32_t> stack_ids_;
    std::vector<State> states_;
    std::unordered_multimap<uint64_t, int32_t> state_ids_;  // hash of a state's stacks -> state ids
    std::vector<int32_t> transitions_;  // state * n_symbols + symbol
    int32_t start_ = 0;
};

}  // namespace k3::grammar

// Lazy determinisation of the grammar's pushdown automaton (see automaton.h).
#include "grammar/automaton.h"

#include <algorithm>
#include <cstring>

#include "k3/error.h"

namespace k3::grammar {

Automaton::Automaton(std::shared_ptr<const GrammarRules> rules)
    : rules_(std::move(rules)), n_symbols_(256 + int(rules_->specials.size())) {
    // Stack 0 is the empty stack (nothing left to produce).
    stack_pos_.push_back(-1);
    stack_parent_.push_back(-1);
    stack_distance_.push_back(0);
    std::vector<int32_t> stacks;
    std::vector<uint64_t> seen;
    for (int32_t start : rules_->rule_starts[size_t(rules_->root)]) close(start, kEmptyStack, stacks, seen);
    start_ = intern_state(std::move(stacks));
}

int32_t Automaton::intern_stack(int32_t pos, int32_t parent) {
    uint64_t key = (uint64_t(uint32_t(pos)) << 32) | uint32_t(parent);
    auto [it, inserted] = stack_ids_.try_emplace(key, int32_t(stack_pos_.size()));
    if (inserted) {
        stack_pos_.push_back(pos);
        stack_parent_.push_back(parent);
        int64_t d = int64_t(rules_->rest_min[size_t(pos)]) + stack_distance_[size_t(parent)];
        stack_distance_.push_back(int32_t(std::min<int64_t>(d, GrammarRules::kUnreachable)));
    }
    return it->second;
}

void Automaton::close(int32_t pos, int32_t parent, std::vector<int32_t>& out, std::vector<uint64_t>& seen) {
    // Epsilon paths can meet again (nullable rules): visit each (pos, parent) once.
    uint64_t key = (uint64_t(uint32_t(pos)) << 32) | uint32_t(parent);
    if (std::find(seen.begin(), seen.end(), key) != seen.end()) return;
    seen.push_back(key);
    const Symbol& sym = rules_->symbols[size_t(pos)];
    switch (sym.kind) {
        case Symbol::Kind::Bytes:
        case Symbol::Kind::Special: out.push_back(intern_stack(pos, parent)); return;
        case Symbol::Kind::End:
            // The rule is done: continue where the caller left off.
            if (parent == kEmptyStack) out.push_back(kEmptyStack);
            else close(stack_pos_[size_t(parent)], stack_parent_[size_t(parent)], out, seen);
            return;
        case Symbol::Kind::Rule: {
            // A reference in tail position returns straight to our caller: not pushing a frame
            // for it keeps right-recursive loops (x*, strings, digits) at a constant depth, so
            // their states repeat and their masks come from the cache.
            bool tail = rules_->symbols[size_t(pos) + 1].kind == Symbol::Kind::End;
            int32_t ret = tail ? parent : intern_stack(pos + 1, parent);
            for (int32_t start : rules_->rule_starts[size_t(sym.index)]) close(start, ret, out, seen);
            return;
        }
    }
}

int32_t Automaton::intern_state(std::vector<int32_t> stacks) {
    if (stacks.empty()) return kDead;
    std::sort(stacks.begin(), stacks.end());
    stacks.erase(std::unique(stacks.begin(), stacks.end()), stacks.end());
    std::string key(reinterpret_cast<const char*>(stacks.data()), stacks.size() * sizeof(int32_t));
    auto it = state_ids_.find(key);
    if (it != state_ids_.end()) return it->second;
    if (states_.size() >= kMaxStates)
        throw Error(ErrorKind::Runtime, "grammar: the output nests too deeply (more than " +
                                            std::to_string(kMaxStates) + " parser states)");
    State st;
    st.distance = GrammarRules::kUnreachable;
    for (int32_t s : stacks) {
        if (s == kEmptyStack) st.accepting = true;
        else st.can_continue = true;
        st.distance = std::min(st.distance, stack_distance_[size_t(s)]);
    }
    st.stacks = std::move(stacks);
    int32_t id = int32_t(states_.size());
    states_.push_back(std::move(st));
    state_ids_.emplace(std::move(key), id);
    transitions_.resize(transitions_.size() + size_t(n_symbols_), kUnknown);
    return id;
}

int32_t Automaton::compute_step(int32_t state, int symbol) {
    std::vector<int32_t> next;
    std::vector<uint64_t> seen;
    // Copy: intern_stack may grow the vectors that states_ entries do not own, but states_
    // itself can grow inside intern_state below, so read the stacks first.
    const std::vector<int32_t> stacks = states_[size_t(state)].stacks;
    for (int32_t s : stacks) {
        if (s == kEmptyStack) continue;
        int32_t pos = stack_pos_[size_t(s)];
        const Symbol& sym = rules_->symbols[size_t(pos)];
        bool match = symbol < 256 ? sym.kind == Symbol::Kind::Bytes && rules_->byte_sets[size_t(sym.index)].has(unsigned(symbol))
                                  : sym.kind == Symbol::Kind::Special && sym.index == symbol - 256;
        if (match) close(pos + 1, stack_parent_[size_t(s)], next, seen);
    }
    return intern_state(std::move(next));
}

}  // namespace k3::grammar

// Lazy determinisation of the grammar's pushdown automaton (see automaton.h).
#include "grammar/automaton.h"

#include <algorithm>

#include "k3/fnv1a.h"

namespace k3::grammar {

namespace {

uint64_t pair_key(int32_t pos, int32_t parent) { return (uint64_t(uint32_t(pos)) << 32) | uint32_t(parent); }

uint64_t stacks_hash(const std::vector<int32_t>& stacks) {
    Fnv1a h;
    h.add(stacks.data(), stacks.size() * sizeof(int32_t));
    return h.value();
}

}  // namespace

Automaton::Automaton(std::shared_ptr<const GrammarRules> rules, const GrammarLimits& limits)
    : rules_(std::move(rules)), budget_(limits), n_symbols_(256 + int(rules_->specials.size())) {
    // Stack 0 is the empty stack (nothing left to produce).
    stack_pos_.push_back(-1);
    stack_parent_.push_back(-1);
    stack_distance_.push_back(0);
    std::vector<int32_t> stacks;
    Visited seen;
    for (int32_t start : rules_->rule_starts[size_t(rules_->root)]) close(start, kEmptyStack, stacks, seen);
    start_ = intern_state(std::move(stacks));
}

int32_t Automaton::intern_stack(int32_t pos, int32_t parent) {
    auto [it, inserted] = stack_ids_.try_emplace(pair_key(pos, parent), int32_t(stack_pos_.size()));
    if (inserted) {
        stack_pos_.push_back(pos);
        stack_parent_.push_back(parent);
        int64_t d = int64_t(rules_->rest_min[size_t(pos)]) + stack_distance_[size_t(parent)];
        stack_distance_.push_back(int32_t(std::min<int64_t>(d, GrammarRules::kUnreachable)));
    }
    return it->second;
}

bool Automaton::Visited::insert(uint64_t key) {
    if (!set_.empty()) return set_.insert(key).second;
    if (std::find(list_.begin(), list_.end(), key) != list_.end()) return false;
    list_.push_back(key);
    if (list_.size() > kListMax) set_.insert(list_.begin(), list_.end());
    return true;
}

void Automaton::close(int32_t pos, int32_t parent, std::vector<int32_t>& out, Visited& seen) {
    // Epsilon paths can meet again (nullable rules): visit each (pos, parent) once.
    if (!seen.insert(pair_key(pos, parent))) return;
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
    const uint64_t hash = stacks_hash(stacks);
    for (auto [it, end] = state_ids_.equal_range(hash); it != end; ++it)
        if (states_[size_t(it->second)].stacks == stacks) return it->second;
    budget_.check_states(states_.size() + 1);
    budget_.tick();
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
    state_ids_.emplace(hash, id);
    transitions_.resize(transitions_.size() + size_t(n_symbols_), kUnknown);
    return id;
}

int32_t Automaton::compute_step(int32_t state, int symbol) {
    std::vector<int32_t> next;
    Visited seen;
    // Read in place: close() grows the stack tables only, and states_ grows in intern_state,
    // after the last read of `stacks`.
    const std::vector<int32_t>& stacks = states_[size_t(state)].stacks;
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

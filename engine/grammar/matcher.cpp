// GrammarMatcher: the per-request side of constrained decoding. The allowed-token mask of an
// automaton state is computed once by walking the sorted vocabulary (a trie walk: a token
// sharing a dead prefix with the one before is rejected without reading it) and cached; a step
// with a cached mask costs the -inf writes only.
#include <algorithm>
#include <cmath>
#include <limits>

#include "grammar/automaton.h"
#include "grammar/token_table.h"
#include "k3/grammar.h"

namespace k3 {

using grammar::Automaton;

struct GrammarMatcher::Impl {
    Grammar grammar;
    Automaton automaton;
    std::shared_ptr<const TokenTable> table_owner;
    const grammar::TokenTableData& table;
    std::vector<int32_t> special_tokens;     // grammar special index -> token id
    int32_t state = 0;
    bool ended = false;                      // an end token was accepted
    size_t words = 0;                        // mask words per state
    std::vector<uint64_t> masks;             // cached masks, `words` each
    std::vector<int32_t> mask_of_state;      // state -> mask index, -1 if not computed yet
    std::vector<int32_t> max_next_distance;  // state -> largest distance after an allowed token
    std::vector<uint64_t> scratch_mask;
    std::vector<int32_t> walk;               // automaton state per depth of the trie walk
    GrammarStats stats;

    Impl(const Grammar& g, std::shared_ptr<const TokenTable> t, const GrammarLimits& limits)
        : grammar(g), automaton(g.shared_rules(), limits), table_owner(std::move(t)), table(table_owner->data()) {
        for (const std::string& text : g.rules().specials) {
            auto it = table.special_ids.find(text);
            if (it == table.special_ids.end())
                throw Error(ErrorKind::Usage, "grammar: the tokenizer has no special token " + text);
            special_tokens.push_back(it->second);
        }
        state = automaton.start();
        words = (size_t(table.n_vocab) + 63) / 64;
        walk.resize(table.max_token_bytes + 1);
    }

    bool is_end(int32_t id) const {
        return std::find(table.end_ids.begin(), table.end_ids.end(), id) != table.end_ids.end();
    }

    // The state after `id` from `from`, or kDead.
    int32_t after(int32_t from, int32_t id) {
        if (table.is_special[size_t(id)]) {
            for (size_t k = 0; k < special_tokens.size(); ++k)
                if (special_tokens[k] == id) return automaton.step(from, 256 + int(k));
            return Automaton::kDead;
        }
        std::string_view b = table.token(id);
        if (b.empty()) return Automaton::kDead;
        int32_t s = from;
        for (unsigned char c : b) {
            s = automaton.step(s, c);
            if (s == Automaton::kDead) break;
        }
        return s;
    }

    // Fills `out` with the tokens allowed from `from`; with `budget` >= 0, only those after
    // which the output can still be completed in `budget` more symbols. Returns the largest
    // distance-to-complete after an allowed token.
    int32_t compute_mask(int32_t from, int32_t budget, uint64_t* out) {
        std::fill(out, out + words, 0);
        int32_t max_distance = 0;
        auto allow = [&](int32_t id, int32_t next) {
            int32_t d = automaton.distance(next);
            if (budget >= 0 && d > budget) return;
            out[size_t(id) >> 6] |= uint64_t(1) << (id & 63);
            max_distance = std::max(max_distance, d);
        };
        // Trie walk over the sorted ordinary tokens: walk[d] is the state after the first d
        // bytes of the current token; dead_at is the length of a prefix known to be dead.
        const auto& sorted = table.sorted;
        const auto& shared = table.shared_prefix;
        walk[0] = from;
        size_t dead_at = SIZE_MAX;
        for (size_t i = 0; i < sorted.size(); ++i) {
            size_t common = shared[i];
            if (common >= dead_at) continue;  // starts with the dead prefix
            dead_at = SIZE_MAX;
            std::string_view b = table.token(sorted[i]);
            int32_t s = walk[common];
            size_t d = common;
            for (; d < b.size(); ++d) {
                s = automaton.step(s, (unsigned char)b[d]);
                if (s == Automaton::kDead) break;
                walk[d + 1] = s;
            }
            if (s == Automaton::kDead) {
                dead_at = d + 1;
                continue;
            }
            allow(sorted[i], s);
        }
        for (size_t k = 0; k < special_tokens.size(); ++k) {
            int32_t next = automaton.step(from, 256 + int(k));
            if (next != Automaton::kDead) allow(special_tokens[k], next);
        }
        if (automaton.accepting(from))
            for (int32_t id : table.end_ids)
                if (id >= 0 && id < table.n_vocab) out[size_t(id) >> 6] |= uint64_t(1) << (id & 63);
        return max_distance;
    }

    const uint64_t* cached_mask(int32_t s) {
        if (mask_of_state.size() < automaton.state_count()) {
            mask_of_state.resize(automaton.state_count(), -1);
            max_next_distance.resize(automaton.state_count(), 0);
        }
        if (mask_of_state[size_t(s)] >= 0) {
            stats.mask_cache_hits++;
            return masks.data() + size_t(mask_of_state[size_t(s)]) * words;
        }
        std::vector<uint64_t> m(words);
        int32_t far = compute_mask(s, -1, m.data());
        // compute_mask may have created states: grow the per-state tables again.
        mask_of_state.resize(automaton.state_count(), -1);
        max_next_distance.resize(automaton.state_count(), 0);
        mask_of_state[size_t(s)] = int32_t(masks.size() / words);
        max_next_distance[size_t(s)] = far;
        masks.insert(masks.end(), m.begin(), m.end());
        return masks.data() + size_t(mask_of_state[size_t(s)]) * words;
    }
};

GrammarMatcher::GrammarMatcher(const Grammar& grammar, std::shared_ptr<const TokenTable> table, const GrammarLimits& limits)
    : impl_(std::make_unique<Impl>(grammar, std::move(table), limits)) {
    // The first mask is the costly one (every alternative is open): made here, by whoever
    // compiles, so the first step of the one who runs the matcher is a cache read.
    impl_->cached_mask(impl_->state);
    impl_->automaton.check_clock();
    impl_->automaton.stop_clock();
}
GrammarMatcher::~GrammarMatcher() = default;
GrammarMatcher::GrammarMatcher(GrammarMatcher&&) noexcept = default;
GrammarMatcher& GrammarMatcher::operator=(GrammarMatcher&&) noexcept = default;

void GrammarMatcher::mask_logits(std::span<float> logits, int tokens_left) {
    Impl& m = *impl_;
    m.stats.masks++;
    const uint64_t* mask = m.cached_mask(m.state);
    // The budget: after this token, tokens_left - 1 remain, and each remaining symbol of the
    // shortest completion is one token (every byte is a token). Narrow only when it binds and
    // when finishing in time is still possible at all.
    int32_t budget = tokens_left - 1;
    if (m.max_next_distance[size_t(m.state)] > budget && m.automaton.distance(m.state) <= budget + 1) {
        m.stats.forced_masks++;
        m.scratch_mask.resize(m.words);
        m.compute_mask(m.state, budget, m.scratch_mask.data());
        mask = m.scratch_mask.data();
    }
    constexpr float kNegInf = -std::numeric_limits<float>::infinity();
    size_t n = std::min(logits.size(), size_t(m.table.n_vocab));
    for (size_t w = 0; w * 64 < n; ++w) {
        uint64_t bits = mask[w];
        if (bits == ~uint64_t(0)) continue;
        size_t end = std::min(n, w * 64 + 64);
        for (size_t i = w * 64; i < end; ++i)
            if (!((bits >> (i - w * 64)) & 1)) logits[i] = kNegInf;
    }
    for (size_t i = n; i < logits.size(); ++i) logits[i] = kNegInf;
}

bool GrammarMatcher::allows(int32_t id) {
    Impl& m = *impl_;
    if (id < 0 || id >= m.table.n_vocab || m.ended) return false;
    if (m.is_end(id)) return m.automaton.accepting(m.state);
    return m.after(m.state, id) != Automaton::kDead;
}

bool GrammarMatcher::accept(int32_t id) {
    Impl& m = *impl_;
    if (!allows(id)) return false;
    if (m.is_end(id)) {
        m.ended = true;
        return true;
    }
    m.state = m.after(m.state, id);
    return true;
}

bool GrammarMatcher::accepting() const { return impl_->automaton.accepting(impl_->state); }

bool GrammarMatcher::finished() const {
    return impl_->ended || (impl_->automaton.accepting(impl_->state) && !impl_->automaton.can_continue(impl_->state));
}

int GrammarMatcher::min_tokens_to_finish() const { return impl_->automaton.distance(impl_->state); }

void GrammarMatcher::reset() {
    impl_->state = impl_->automaton.start();
    impl_->ended = false;
}

const Grammar& GrammarMatcher::grammar() const { return impl_->grammar; }

GrammarStats GrammarMatcher::stats() const {
    GrammarStats s = impl_->stats;
    s.automaton_states = impl_->automaton.state_count();
    return s;
}

}  // namespace k3

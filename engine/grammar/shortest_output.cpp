// shortest_output: the automaton's distance from its start state to acceptance (automaton.h).
#include "k3/grammar_shortest.h"

#include "grammar/automaton.h"

namespace k3 {

int shortest_output(const Grammar& grammar) {
    const grammar::Automaton automaton(grammar.shared_rules());
    return automaton.distance(automaton.start());
}

}  // namespace k3

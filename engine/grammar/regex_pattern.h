// JSON-schema "pattern" (an ECMA-262 regex over the decoded string) as grammar rules over the
// string's encoded content: JSON-escaped inside a JSON string, or raw for an XTML argument.
// Supported: literals, ., classes [...] (ASCII ranges, negation, \d \w \s and their negations),
// groups (capturing or (?:...)), alternation, * + ? {n} {n,} {n,m}, and ^ / $ at the ends
// (without them the match may sit anywhere in the string, as JSON schema says). Anything else
// (backreferences, lookaround, \b, \p{...}, non-ASCII ranges) throws GrammarError("pattern").
#pragma once
#include <string>

#include "grammar/json_rules.h"

namespace k3::grammar {

// The rule for string content (quotes not included) matching `pattern`, of min_length to
// max_length characters (max_length < 0: no limit; minLength/maxLength beside the pattern);
// `path` names the schema location for errors. No string of those lengths matching: GrammarError.
int32_t compile_pattern(JsonRules& json, const std::string& pattern, bool raw, const std::string& path,
                        int min_length = 0, int max_length = -1);

}  // namespace k3::grammar

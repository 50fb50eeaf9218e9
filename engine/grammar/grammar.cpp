// The Grammar constructors that are not tool calls: json_object, json_schema, and the chat
// wrapper that lets reasoning come first.
#include <algorithm>
#include <nlohmann/json.hpp>

#include "grammar/grammar_rules.h"
#include "grammar/json_rules.h"
#include "grammar/schema_compiler.h"
#include "k3/grammar.h"
#include "k3/xtml.h"

namespace k3 {

using namespace grammar;

Grammar Grammar::json_object() {
    GrammarBuilder b;
    JsonRules j(b);
    int32_t object = j.object();
    return Grammar(std::make_shared<GrammarRules>(b.finish(object)));
}

Grammar Grammar::json_schema(std::string_view schema_json, const GrammarLimits& limits) {
    nlohmann::ordered_json schema;
    try {
        schema = nlohmann::ordered_json::parse(schema_json);
    } catch (const nlohmann::ordered_json::exception& e) {
        throw GrammarError("schema", "#", std::string("the schema is not valid JSON: ") + e.what());
    }
    GrammarBuilder b(limits);
    JsonRules j(b);
    SchemaCompiler compiler(j, schema);
    int32_t root = compiler.compile(schema, "#");
    return Grammar(std::make_shared<GrammarRules>(b.finish(root)));
}

bool Grammar::same_rules(const Grammar& other) const {
    const GrammarRules &a = *rules_, &b = *other.rules_;
    if (&a == &b) return true;
    auto same_symbols = [](const std::vector<Symbol>& x, const std::vector<Symbol>& y) {
        return x.size() == y.size() && std::equal(x.begin(), x.end(), y.begin(), [](const Symbol& p, const Symbol& q) {
                   return p.kind == q.kind && p.index == q.index;
               });
    };
    return a.fingerprint == b.fingerprint && a.root == b.root && a.rule_starts == b.rule_starts &&
           a.byte_sets == b.byte_sets && a.specials == b.specials && same_symbols(a.symbols, b.symbols);
}

Grammar Grammar::chat_response(bool thinking, const GrammarLimits& limits) const {
    if (!thinking) return *this;
    // Reasoning is free text (no control tokens), then the think section closes and the
    // response opens; the response is this grammar.
    GrammarBuilder b(limits);
    JsonRules j(b);
    int32_t inner = b.import(*rules_);
    int32_t reasoning = j.string_content(0, -1, /*raw=*/true);
    Sequence seq = concat({{GrammarBuilder::ref(reasoning), b.special(xtml::kClose)}, b.literal(xtml::kThink),
                           {b.special(xtml::kSep), b.special(xtml::kOpen)}, b.literal(xtml::kResponse),
                           {b.special(xtml::kSep), GrammarBuilder::ref(inner)}});
    int32_t root = b.rule("chat response", {seq});
    return Grammar(std::make_shared<GrammarRules>(b.finish(root)));
}

}  // namespace k3

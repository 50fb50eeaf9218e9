// JSON schema -> grammar rules (see schema_compiler.h and Grammar::json_schema in k3/grammar.h
// for the supported keywords). Every keyword is either compiled, accepted as an annotation, or
// refused by name: a schema is never silently half-enforced.
#include "grammar/schema_compiler.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>

#include "grammar/compile_budget.h"
#include "grammar/decimal_bound.h"
#include "grammar/regex_pattern.h"
#include "k3/grammar.h"

namespace k3::grammar {

using json = nlohmann::ordered_json;

namespace {

constexpr int kMaxSchemaDepth = 64;
constexpr int kMaxCount = 1000;  // minItems/maxItems we unroll

const std::set<std::string>& annotations() {
    static const std::set<std::string> s = {"title",    "description", "default",  "examples", "$schema",
                                            "$id",      "$comment",    "deprecated", "readOnly", "writeOnly",
                                            "strict",   "$defs",       "definitions"};
    return s;
}

const std::set<std::string>& supported() {
    static const std::set<std::string> s = {
        "type",      "properties", "required",  "additionalProperties", "enum",      "const",
        "items",     "minItems",   "maxItems",  "anyOf",                "$ref",      "minLength",
        "maxLength", "pattern",    "minimum",   "maximum",              "exclusiveMinimum", "exclusiveMaximum",
        "nullable"};  // OpenAPI's "also null" (zod-to-json-schema writes it)
    return s;
}

[[noreturn]] void refuse(const std::string& keyword, const std::string& path, const std::string& why) {
    throw GrammarError(keyword, path, "unsupported JSON schema: '" + keyword + "' at " + path + ": " + why);
}

std::string child(const std::string& path, const std::string& key) {
    std::string k;
    for (char c : key) k += c == '~' ? "~0" : c == '/' ? "~1" : std::string(1, c);
    return path + "/" + k;
}

const char* json_type_name(const json& v) {
    switch (v.type()) {
        case json::value_t::null: return "null";
        case json::value_t::boolean: return "boolean";
        case json::value_t::string: return "string";
        case json::value_t::number_integer:
        case json::value_t::number_unsigned: return "integer";
        case json::value_t::number_float: return "number";
        case json::value_t::array: return "array";
        default: return "object";
    }
}

// A count keyword's value, -1 when absent. Item counts are capped at kMaxCount; string lengths
// are left to the grammar's budgets (a length is a chain of rules, one per character), checked
// before any rule of it is made.
// (`symbols_each`: about how many symbols a character of that length costs).
int count_keyword(const json& s, const char* key, const std::string& path, CompileBudget* length_budget = nullptr,
                  size_t symbols_each = 0) {
    auto it = s.find(key);
    if (it == s.end()) return -1;
    if (!it->is_number_integer() || it->get<int64_t>() < 0) refuse(key, path, "must be a non-negative integer");
    const int64_t n = it->get<int64_t>();
    if (!length_budget && n > kMaxCount) refuse(key, path, "values above " + std::to_string(kMaxCount) + " are not supported");
    if (n > std::numeric_limits<int>::max()) refuse(key, path, "is too large");
    if (length_budget) length_budget->expect_symbols(size_t(n) * symbols_each, path);
    return int(n);
}

}  // namespace

void SchemaCompiler::check_keywords(const json& s, const std::string& path) {
    for (auto it = s.begin(); it != s.end(); ++it) {
        const std::string& k = it.key();
        if (supported().count(k) || annotations().count(k)) continue;
        std::string why = "this server does not enforce it";
        if (k == "oneOf") why = "use anyOf";
        else if (k == "allOf") why = "merge the subschemas into one";
        else if (k == "format") why = "string formats are not enforced; use 'pattern'";
        throw GrammarError(k, path, "unsupported JSON schema keyword '" + k + "' at " + path + ": " + why);
    }
    if (auto it = s.find("additionalProperties"); it != s.end() && !it->is_boolean() && !it->is_object())
        refuse("additionalProperties", path, "must be a boolean or a schema");
    if (auto it = s.find("nullable"); it != s.end() && !it->is_boolean()) refuse("nullable", path, "must be a boolean");
}

const json& SchemaCompiler::resolve(const json& schema, std::string& path) {
    const json* s = &schema;
    for (int hops = 0; s->is_object() && s->contains("$ref"); ++hops) {
        if (hops > 32) refuse("$ref", path, "a chain of more than 32 references");
        const json& ref = (*s)["$ref"];
        if (!ref.is_string()) refuse("$ref", path, "must be a string");
        for (auto it = s->begin(); it != s->end(); ++it)
            if (it.key() != "$ref" && !annotations().count(it.key()))
                refuse(it.key(), path, "keywords beside '$ref' are not supported");
        std::string r = ref.get<std::string>();
        if (r == "#") {
            s = &root_;
        } else if (r.rfind("#/$defs/", 0) == 0 || r.rfind("#/definitions/", 0) == 0) {
            try {
                s = &root_.at(json::json_pointer(r.substr(1)));
            } catch (const json::exception&) {
                refuse("$ref", path, "'" + r + "' does not name a definition in this schema");
            }
        } else {
            refuse("$ref", path, "only '#', '#/$defs/...' and '#/definitions/...' references are supported (got '" + r + "')");
        }
        path = r;
    }
    return *s;
}

std::vector<std::string> SchemaCompiler::types_of(const json& s, const std::string& path) {
    auto it = s.find("type");
    static const std::set<std::string> known = {"object", "array", "string", "number", "integer", "boolean", "null"};
    std::vector<std::string> out;
    if (it == s.end()) {
        // No type: infer from type-specific keywords, else anything.
        if (s.contains("properties") || s.contains("additionalProperties") || s.contains("required")) return {"object"};
        if (s.contains("items") || s.contains("minItems") || s.contains("maxItems")) return {"array"};
        if (s.contains("pattern") || s.contains("minLength") || s.contains("maxLength")) return {"string"};
        if (s.contains("minimum") || s.contains("maximum") || s.contains("exclusiveMinimum") || s.contains("exclusiveMaximum"))
            return {"number"};
        return {"object", "array", "string", "number", "boolean", "null"};
    }
    if (it->is_string()) out.push_back(it->get<std::string>());
    else if (it->is_array())
        for (const auto& t : *it) {
            if (!t.is_string()) refuse("type", path, "entries must be strings");
            out.push_back(t.get<std::string>());
        }
    else refuse("type", path, "must be a string or an array of strings");
    if (out.empty()) refuse("type", path, "an empty list allows nothing");
    for (const auto& t : out)
        if (!known.count(t)) refuse("type", path, "unknown type '" + t + "'");
    return out;
}

int32_t SchemaCompiler::literal_values(const json& values, const std::string& path, bool raw) {
    // Judged on the count first, then on the bytes as each value is written: nothing of an
    // enum over a budget is built.
    CompileBudget& budget = b_.budget();
    budget.check_enum(values.size(), path);
    std::vector<std::string> texts;
    texts.reserve(values.size());
    for (const auto& v : values) {
        if (raw && !v.is_string()) continue;
        texts.push_back(raw ? v.get<std::string>() : v.dump());
        budget.add_literal_bytes(texts.back().size(), path);
        budget.tick();
    }
    if (texts.empty()) refuse("enum", path, "no value is possible");
    return literal_trie(std::move(texts));
}

int32_t SchemaCompiler::literal_trie(std::vector<std::string> values) {
    std::sort(values.begin(), values.end());
    values.erase(std::unique(values.begin(), values.end()), values.end());
    return trie_node(values, 0, values.size(), 0);
}

// The rule for the suffixes from `depth` of sorted[lo, hi), which share their first `depth`
// bytes. One alternative per distinct next byte: the bytes its strings share from there, then
// the rule for what follows (none when one string is left). Children are made before their
// parent, so rule ids grow towards the root and finish()'s shortest-output pass settles in one
// sweep; every reference is in tail position, so walking the trie keeps the stack flat.
int32_t SchemaCompiler::trie_node(const std::vector<std::string>& sorted, size_t lo, size_t hi, size_t depth) {
    std::vector<Sequence> alts;
    size_t i = lo;
    if (sorted[i].size() == depth) {  // a string ends here (sorted first, and only one: unique)
        alts.push_back({});
        ++i;
    }
    while (i < hi) {
        const unsigned char next = (unsigned char)sorted[i][depth];
        size_t end = i + 1;
        while (end < hi && (unsigned char)sorted[end][depth] == next) ++end;
        // The group's common prefix: that of its first and last string (sorted).
        const std::string& first = sorted[i];
        const std::string& last = sorted[end - 1];
        size_t common = depth + 1;
        while (common < first.size() && common < last.size() && first[common] == last[common]) ++common;
        Sequence alt = b_.literal(std::string_view(first).substr(depth, common - depth));
        if (end - i > 1 || first.size() > common) alt.push_back(GrammarBuilder::ref(trie_node(sorted, i, end, common)));
        alts.push_back(std::move(alt));
        i = end;
    }
    return b_.rule(depth == 0 ? "enum" : "enum branch", alts);
}

int32_t SchemaCompiler::compile(const json& schema_in, const std::string& path_in) {
    std::string path = path_in;
    if (schema_in.is_object() && schema_in.contains("$ref")) {
        // Make the rule before compiling the target, so a recursive schema refers to itself.
        const std::string ref = schema_in["$ref"].is_string() ? schema_in["$ref"].get<std::string>() : "";
        if (auto it = ref_rules_.find(ref); it != ref_rules_.end()) return it->second;
        const json& target = resolve(schema_in, path);
        int32_t r = b_.new_rule("ref " + ref);
        ref_rules_[ref] = r;
        b_.add_alternative(r, {GrammarBuilder::ref(compile(target, path))});
        return r;
    }
    const json& s = schema_in;
    if (s.is_boolean()) {
        if (!s.get<bool>()) refuse("false", path, "a schema that allows nothing");
        return j_.value();
    }
    if (!s.is_object()) refuse("schema", path, "a schema must be an object or a boolean");
    if (++depth_ > kMaxSchemaDepth) refuse("schema", path, "nested deeper than 64 levels");
    check_keywords(s, path);
    int32_t out;
    if (auto c = s.find("const"); c != s.end()) {
        out = literal_values(json::array({*c}), path, false);
    } else if (auto e = s.find("enum"); e != s.end()) {
        if (!e->is_array() || e->empty()) refuse("enum", path, "must be a non-empty array");
        out = literal_values(*e, path, false);
    } else if (auto any = s.find("anyOf"); any != s.end()) {
        if (!any->is_array() || any->empty()) refuse("anyOf", path, "must be a non-empty array");
        for (auto it = s.begin(); it != s.end(); ++it)
            if (it.key() != "anyOf" && !annotations().count(it.key()))
                refuse(it.key(), path, "keywords beside 'anyOf' are not supported (move them into each branch)");
        std::vector<Sequence> alts;
        for (size_t i = 0; i < any->size(); ++i)
            alts.push_back({GrammarBuilder::ref(compile((*any)[i], child(child(path, "anyOf"), std::to_string(i))))});
        out = b_.rule("anyOf", alts);
    } else {
        std::vector<Sequence> alts;
        for (const auto& t : types_of(s, path)) alts.push_back({GrammarBuilder::ref(compile_typed(s, t, path, false))});
        out = alts.size() == 1 ? alts[0][0].index : b_.rule("types", alts);
    }
    if (s.value("nullable", false)) out = b_.rule("nullable", {{GrammarBuilder::ref(out)}, {GrammarBuilder::ref(j_.null_value())}});
    --depth_;
    return out;
}

int32_t SchemaCompiler::compile_typed(const json& s, const std::string& type, const std::string& path, bool raw) {
    if (type == "object") return compile_object(s, path);
    if (type == "array") return compile_array(s, path);
    if (type == "string") return compile_string(s, path, raw);
    if (type == "number" || type == "integer") return compile_number(s, type, path);
    if (type == "boolean") return j_.boolean();
    return j_.null_value();
}

int32_t SchemaCompiler::compile_object(const json& s, const std::string& path) {
    const json empty = json::object();
    const json& props = s.contains("properties") ? s["properties"] : empty;
    if (!props.is_object()) refuse("properties", path, "must be an object");
    std::set<std::string> required;
    if (auto r = s.find("required"); r != s.end()) {
        if (!r->is_array()) refuse("required", path, "must be an array of property names");
        for (const auto& name : *r) {
            if (!name.is_string()) refuse("required", path, "must be an array of property names");
            if (!props.contains(name.get<std::string>()))
                refuse("required", path, "'" + name.get<std::string>() + "' is required but not among 'properties'");
            required.insert(name.get<std::string>());
        }
    }
    const json* extra = s.contains("additionalProperties") ? &s["additionalProperties"] : nullptr;
    bool closed = extra && extra->is_boolean() && !extra->get<bool>();
    if (props.empty()) {
        if (closed) return b_.rule("empty_object", {b_.literal("{}")});
        if (extra && extra->is_object()) {
            // A map: any keys, every value valid for the additionalProperties schema.
            int32_t v = compile(*extra, child(path, "additionalProperties"));
            Sequence member = {GrammarBuilder::ref(j_.string()), b_.byte(':'), GrammarBuilder::ref(v)};
            int32_t more = b_.star(concat({{b_.byte(',')}, member}), "map_members");
            return b_.rule("map", {b_.literal("{}"), concat({{b_.byte('{')}, member, {GrammarBuilder::ref(more), b_.byte('}')}})});
        }
        return j_.object();
    }
    // Declared properties in schema order; optional ones may be left out. Only declared
    // properties are produced, which every additionalProperties setting accepts. From the
    // last property back: head[i] = properties i.. when none was written yet, tail[i] = the
    // same after at least one (each then starts with a comma).
    std::vector<std::pair<std::string, int32_t>> members;
    for (auto it = props.begin(); it != props.end(); ++it)
        members.emplace_back(it.key(), compile(it.value(), child(child(path, "properties"), it.key())));
    int32_t head = b_.rule("props_end", {{}}), tail = head;
    for (size_t i = members.size(); i-- > 0;) {
        const auto& [name, rule] = members[i];
        Sequence member = concat({b_.literal(json(name).dump()), {b_.byte(':'), GrammarBuilder::ref(rule)}});
        bool optional = !required.count(name);
        std::vector<Sequence> tail_alts = {concat({{b_.byte(',')}, member, {GrammarBuilder::ref(tail)}})};
        std::vector<Sequence> head_alts = {concat({member, {GrammarBuilder::ref(tail)}})};
        if (optional) {
            tail_alts.push_back({GrammarBuilder::ref(tail)});
            head_alts.push_back({GrammarBuilder::ref(head)});
        }
        int32_t new_tail = b_.rule("props_tail", tail_alts);
        int32_t new_head = b_.rule("props_head", head_alts);
        tail = new_tail;
        head = new_head;
    }
    return b_.rule("object_" + path, {{b_.byte('{'), GrammarBuilder::ref(head), b_.byte('}')}});
}

int32_t SchemaCompiler::compile_array(const json& s, const std::string& path) {
    int32_t item = s.contains("items") ? compile(s["items"], child(path, "items")) : j_.value();
    int min = std::max(0, count_keyword(s, "minItems", path));
    int max = count_keyword(s, "maxItems", path);
    if (max >= 0 && max < min) refuse("maxItems", path, "is below minItems");
    Sequence open = {b_.byte('[')}, close = {b_.byte(']')};
    Sequence next = {b_.byte(','), GrammarBuilder::ref(item)};
    std::vector<Sequence> alts;
    if (min == 0) alts.push_back(b_.literal("[]"));
    if (max != 0) {
        // first item, then (min-1 .. max-1) more
        int32_t rest = b_.repeat(next, std::max(0, min - 1), max < 0 ? -1 : max - 1, "items");
        alts.push_back({b_.byte('['), GrammarBuilder::ref(item), GrammarBuilder::ref(rest), b_.byte(']')});
    }
    return b_.rule("array_" + path, alts);
}

int32_t SchemaCompiler::compile_string(const json& s, const std::string& path, bool raw) {
    // A required character is one symbol; an optional one a rule of two alternatives (4).
    int min = std::max(0, count_keyword(s, "minLength", path, &b_.budget(), 1));
    int max = count_keyword(s, "maxLength", path, &b_.budget(), 4);
    if (max >= 0 && max < min) refuse("maxLength", path, "is below minLength");
    int32_t content;
    if (auto p = s.find("pattern"); p != s.end()) {
        if (!p->is_string()) refuse("pattern", path, "must be a string");
        content = compile_pattern(j_, p->get<std::string>(), raw, path, min, max);
    } else {
        content = j_.string_content(min, max, raw);
    }
    if (raw) return content;
    return b_.rule("string_" + path, {{b_.byte('"'), GrammarBuilder::ref(content), b_.byte('"')}});
}

int32_t SchemaCompiler::compile_number(const json& s, const std::string& type, const std::string& path) {
    // Each bound becomes an inclusive decimal one, rounded inwards to what is written (integers,
    // or kMaxFractionDigits fraction digits) and safe whether a validator compares exactly or
    // as doubles (decimal_bound.h): fractional bounds and integers beyond 2^53 included.
    const bool integral = type == "integer";
    const int digits = integral ? 0 : kMaxFractionDigits;
    std::optional<Decimal> lo, hi;
    auto bound = [&](const char* key, bool is_lower, bool exclusive) {
        auto it = s.find(key);
        if (it == s.end()) return;
        if (!it->is_number()) refuse(key, path, "must be a number");
        if (!std::isfinite(it->get<double>())) refuse(key, path, "must be a finite number");
        Decimal d = is_lower ? lower_bound(*it, exclusive, digits) : upper_bound(*it, exclusive, digits);
        auto& slot = is_lower ? lo : hi;
        if (!slot || (is_lower ? compare(d, *slot) > 0 : compare(d, *slot) < 0)) slot = d;
    };
    bound("minimum", true, false);
    bound("exclusiveMinimum", true, true);
    bound("maximum", false, false);
    bound("exclusiveMaximum", false, true);
    if (!lo && !hi) return integral ? j_.integer() : j_.number();
    if (lo && hi && compare(*lo, *hi) > 0)
        refuse(s.contains("maximum") ? "maximum" : "exclusiveMaximum", path, "the bounds leave no number");
    return j_.bounded_number(integral, lo, hi);
}

std::vector<SchemaCompiler::ArgumentForm> SchemaCompiler::argument_forms(const json& schema_in, const std::string& path_in) {
    std::string path = path_in;
    const json& s = resolve(schema_in, path);
    if (s.is_boolean()) {
        if (!s.get<bool>()) refuse("false", path, "a schema that allows nothing");
        return argument_forms(json::object(), path);
    }
    if (!s.is_object()) refuse("schema", path, "a schema must be an object or a boolean");
    check_keywords(s, path);
    std::vector<ArgumentForm> out;
    auto attr_type = [](const std::string& t) { return t == "integer" ? std::string("number") : t; };
    auto values = s.contains("const") ? json::array({s["const"]}) : s.contains("enum") ? s["enum"] : json();
    if (!values.is_null()) {
        if (!values.is_array() || values.empty()) refuse("enum", path, "must be a non-empty array");
        // One form per JSON type among the values: strings raw, the others as JSON.
        std::map<std::string, json> by_type;
        for (const auto& v : values) by_type[attr_type(json_type_name(v))].push_back(v);
        for (auto& [t, vs] : by_type) out.push_back({t, literal_values(vs, path, t == "string")});
        return out;
    }
    if (auto any = s.find("anyOf"); any != s.end()) {
        if (!any->is_array() || any->empty()) refuse("anyOf", path, "must be a non-empty array");
        for (size_t i = 0; i < any->size(); ++i)
            for (auto& f : argument_forms((*any)[i], child(child(path, "anyOf"), std::to_string(i)))) out.push_back(f);
        return out;
    }
    for (const auto& t : types_of(s, path)) out.push_back({attr_type(t), compile_typed(s, t, path, t == "string")});
    if (s.value("nullable", false)) out.push_back({"null", j_.null_value()});
    return out;
}

}  // namespace k3::grammar

// Grammar::tool_calls: an assistant turn that must call tools, in K3's XTML layout
// (k3/xtml.h, docs/api.md "Tool calling"):
//   [thinking: reasoning <|close|>think<|sep|><|open|>response<|sep|>]
//   <|close|>response<|sep|><|open|>tools<|sep|>
//     <|open|>call tool="NAME" index="1"<|sep|>
//       <|open|>argument key="KEY" type="TYPE"<|sep|>BODY<|close|>argument<|sep|> ...
//     <|close|>call<|sep|> ... (up to max_calls, index counting up)
//   <|close|>tools<|sep|><|close|>message<|sep|>
// Arguments follow the tool's "properties" in order (required ones always, optional ones
// maybe); a string body is raw text, any other body JSON valid for the property's schema.
#include <nlohmann/json.hpp>
#include <set>

#include "grammar/grammar_rules.h"
#include "grammar/json_rules.h"
#include "grammar/schema_compiler.h"
#include "k3/grammar.h"
#include "k3/xtml.h"

namespace k3 {

using namespace grammar;
using Json = nlohmann::ordered_json;

namespace {

constexpr int kMaxCalls = 16;

// NAME key="value" ... (values escaped), the inside of an opening tag.
std::string attribute_tag(std::string_view name, std::initializer_list<std::pair<std::string_view, std::string>> attributes) {
    std::string out(name);
    for (const auto& [key, value] : attributes) {
        out += ' ';
        out += key;
        out += "=\"";
        out += xtml::escape_attribute(value);
        out += '"';
    }
    return out;
}

// <|open|>NAME ATTRS<|sep|> and <|close|>NAME<|sep|>
Sequence open_tag(GrammarBuilder& b, std::string_view name_and_attributes) {
    return concat({{b.special(xtml::kOpen)}, b.literal(name_and_attributes), {b.special(xtml::kSep)}});
}
Sequence close_tag(GrammarBuilder& b, std::string_view name) {
    return concat({{b.special(xtml::kClose)}, b.literal(name), {b.special(xtml::kSep)}});
}

// The argument elements of one tool, from its parameters schema.
int32_t arguments_rule(JsonRules& j, const ToolDeclaration& tool) {
    GrammarBuilder& b = j.b;
    std::string where = "tools[" + tool.name + "].parameters";
    Json schema = Json::object();
    if (!tool.parameters_schema.empty()) {
        try {
            schema = Json::parse(tool.parameters_schema);
        } catch (const Json::exception& e) {
            throw GrammarError("parameters", where, "the parameters of tool '" + tool.name + "' are not valid JSON: " + e.what());
        }
    }
    SchemaCompiler compiler(j, schema);
    std::string path = where;
    const Json& s = compiler.resolve(schema, path);
    if (!s.is_object()) throw GrammarError("parameters", where, "the parameters of tool '" + tool.name + "' must be an object schema");
    if (s.contains("type") && s["type"] != "object")
        throw GrammarError("type", where, "the parameters of tool '" + tool.name + "' must be of type object");
    // Reuse the object checks (keywords, required names) by compiling it once as JSON too.
    compiler.compile(s, path);
    const Json empty = Json::object();
    const Json& props = s.contains("properties") ? s["properties"] : empty;
    std::set<std::string> required;
    if (s.contains("required"))
        for (const auto& r : s["required"]) required.insert(r.get<std::string>());
    Sequence all;
    for (auto it = props.begin(); it != props.end(); ++it) {
        std::vector<Sequence> forms;
        for (const auto& f : compiler.argument_forms(it.value(), path + "/properties/" + it.key()))
            forms.push_back(concat({open_tag(b, attribute_tag(xtml::kArgument, {{xtml::kKeyAttr, it.key()}, {xtml::kTypeAttr, f.type}})),
                                    {GrammarBuilder::ref(f.body)}, close_tag(b, xtml::kArgument)}));
        if (!required.count(it.key())) forms.push_back({});
        all.push_back(GrammarBuilder::ref(b.rule("argument " + it.key(), forms)));
    }
    return b.rule("arguments " + tool.name, {all});
}

}  // namespace

Grammar Grammar::tool_calls(std::span<const ToolDeclaration> tools, const ToolCallOptions& options,
                            const GrammarLimits& limits) {
    if (tools.empty()) throw GrammarError("tools", "", "a tool-call grammar needs at least one tool");
    if (options.max_calls < 1 || options.max_calls > kMaxCalls)
        throw GrammarError("max_calls", "", "max_calls must be in [1, " + std::to_string(kMaxCalls) + "]");
    GrammarBuilder b(limits);
    JsonRules j(b);
    std::vector<int32_t> args;
    for (const auto& t : tools) args.push_back(arguments_rule(j, t));
    // call_i: any declared tool with index i; calls_i: call_i, then optionally calls_{i+1}.
    int32_t more = -1;
    for (int i = options.max_calls; i >= 1; --i) {
        std::vector<Sequence> alts;
        for (size_t t = 0; t < tools.size(); ++t)
            alts.push_back(concat({open_tag(b, attribute_tag(xtml::kCall, {{xtml::kToolAttr, tools[t].name}, {xtml::kIndexAttr, std::to_string(i)}})),
                                   {GrammarBuilder::ref(args[t])}, close_tag(b, xtml::kCall)}));
        int32_t call = b.rule("call " + std::to_string(i), alts);
        std::vector<Sequence> seq_alts = {{GrammarBuilder::ref(call)}};
        if (more >= 0) seq_alts[0].push_back(GrammarBuilder::ref(b.optional({GrammarBuilder::ref(more)}, "more calls")));
        more = b.rule("calls from " + std::to_string(i), seq_alts);
    }
    Sequence turn = concat({close_tag(b, xtml::kResponse), open_tag(b, xtml::kTools), {GrammarBuilder::ref(more)},
                            close_tag(b, xtml::kTools), close_tag(b, xtml::kMessage)});
    int32_t root = b.rule("tool turn", {turn});
    Grammar g(std::make_shared<GrammarRules>(b.finish(root)));
    return options.thinking ? g.chat_response(true, limits) : g;
}

}  // namespace k3

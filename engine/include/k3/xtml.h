// Every literal of K3's XTML chat format in one table (docs/model.md "Chat layout", checked
// against the official encoder). The two strings marked [unconfirmed] are inferred, not read in
// the encoder: if one turns out wrong, the correction is here and only here. Used by the
// renderer, the output parser and the tool-call grammar.
#pragma once
#include <string>
#include <string_view>

namespace k3::xtml {

// Control tokens (specials).
inline constexpr std::string_view kOpen = "<|open|>";
inline constexpr std::string_view kClose = "<|close|>";
inline constexpr std::string_view kSep = "<|sep|>";
inline constexpr std::string_view kEndOfMessage = "<|end_of_msg|>";
inline constexpr std::string_view kEos = "[EOS]";

// An image's framing (docs/model.md "Images in the prompt"):
// <|media_begin|>image WxH<|media_content|><|media_pad|><|media_end|>, W x H the stored size; the pad stands for the image's rows (k3/image_prompt.h).
inline constexpr std::string_view kMediaBegin = "<|media_begin|>";
inline constexpr std::string_view kMediaContent = "<|media_content|>";
inline constexpr std::string_view kMediaPad = "<|media_pad|>";
inline constexpr std::string_view kMediaEnd = "<|media_end|>";
inline std::string image_size_text(int width, int height) {
    return "image " + std::to_string(width) + "x" + std::to_string(height);
}

// Element names.
inline constexpr std::string_view kMessage = "message";
inline constexpr std::string_view kThink = "think";
inline constexpr std::string_view kResponse = "response";
inline constexpr std::string_view kTools = "tools";
inline constexpr std::string_view kCall = "call";
inline constexpr std::string_view kArgument = "argument";
inline constexpr std::string_view kJson = "json";

// Attributes of a call and its arguments: <|open|>call tool="NAME" index="N"<|sep|>,
// <|open|>argument key="K" type="T"<|sep|>.
inline constexpr std::string_view kToolAttr = "tool";
inline constexpr std::string_view kIndexAttr = "index";
inline constexpr std::string_view kKeyAttr = "key";
inline constexpr std::string_view kTypeAttr = "type";
inline constexpr std::string_view kRoleAttr = "role";
inline constexpr std::string_view kNameAttr = "name";  // on system/user/assistant messages

// Internal system messages: <|open|>message role="system" type="TYPE"<|sep|>BODY<|close|>...
inline constexpr std::string_view kRoleSystem = "system";
inline constexpr std::string_view kRoleAssistant = "assistant";
inline constexpr std::string_view kRoleTool = "tool";

// The tool-declaration system message: the body is kToolsPreamble + the tools array (compact
// JSON, keys sorted at every depth) + kToolsPostamble.
inline constexpr std::string_view kToolDeclareType = "tool-declare";
inline constexpr std::string_view kToolsPreamble =
    "# Tools\nHere are the available tools, described in JSONSchema.\n\n```json\n";
inline constexpr std::string_view kToolsPostamble = "\n```";
// A system message's own tools (dynamic tools, declared where the message stands): the body
// is kDynamicToolsPreamble + that message's tools array + kToolsPostamble. Its type attribute
// is kToolDeclareType [unconfirmed: the body is the encoder's, the type is inferred].
inline constexpr std::string_view kDynamicToolsPreamble =
    "## New Tools Available\nThe system dynamically extends the toolset via lazy-loading.\n"
    "You have access to all existing and extended tools.\nHere are the specs for the extended tools.\n\n```json\n";

// The tool-choice system message after all messages ("auto" and a named function: none).
inline constexpr std::string_view kToolChoiceType = "tool-choice";
inline constexpr std::string_view kToolChoiceRequired =
    "The system is invoked with `tool_choice=required`.\nYou MUST call tools in the next message.";
inline constexpr std::string_view kToolChoiceNone =
    "The system is invoked with `tool_choice=none`.\nYou MUST NOT call any tools in the next message.";

// The response-format system message, after the tool choice: response_format_text(TYPE), and
// for json_schema kResponseFormatSchemaPreamble + the schema (compact, keys sorted) +
// kToolsPostamble. Its type attribute [unconfirmed: the body is the encoder's, the type is
// inferred from the other internal messages' names].
inline constexpr std::string_view kResponseFormatType = "response-format";
inline std::string response_format_text(std::string_view type) {
    return "The system is invoked with `response_format=" + std::string(type) +
           "`.\nYour response must be raw JSON data without markdown code blocks (```json) or any additional "
           "formatting.";
}
inline constexpr std::string_view kResponseFormatSchemaPreamble =
    "\nThe JSON data must match the following schema:\n```json\n";

// The thinking-effort system message (docs/model.md "Chat layout"). The sentence lists
// `medium`, but the encoder renders only low, high and max.
inline constexpr std::string_view kThinkingEffortType = "thinking-effort";
inline constexpr std::string_view kThinkingEfforts[] = {"low", "high", "max"};
inline std::string thinking_effort_text(std::string_view effort) {
    return "`thinking_effort` guides on how much to think in your thinking channel (not including the "
           "response channel), supported values include `low`, `medium`, `high`, and `max`.\n"
           "Now the system is invoked with `thinking_effort=" +
           std::string(effort) + "`.";
}

// Argument types of <|open|>argument ... type="T": a string body is raw text, the others JSON.
inline constexpr std::string_view kTypeString = "string";
inline constexpr std::string_view kTypeNumber = "number";
inline constexpr std::string_view kTypeBoolean = "boolean";
inline constexpr std::string_view kTypeNull = "null";
inline constexpr std::string_view kTypeObject = "object";
inline constexpr std::string_view kTypeArray = "array";

// Attribute values escape only & (as &amp;, first) and " (as &quot;); < and > stay as they are.
std::string escape_attribute(std::string_view value);
std::string unescape_attribute(std::string_view value);

}  // namespace k3::xtml

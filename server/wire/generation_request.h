// The wire layer's request: what every API (chat/completions and completions in openai/, the
// Responses API in responses/, the Messages API in anthropic/) parses its body into, and what
// validation needs to know about the served model. Each API's parser is declared in its own
// folder; wire/responder.h is the other half (the worker's events -> the client), wire/error.h
// owns every error body and HTTP status. No sockets in here: the routes call these and own the
// connections.
#pragma once
#include <algorithm>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "worker/job.h"
#include "k3/chat.h"
#include "k3/tokenizer.h"
#include "wire/answer_limit.h"
#include "wire/error.h"
#include "wire/image_input.h"

namespace k3::server {

// What validation needs to know about the served model.
struct ModelLimits {
    std::string model_name;
    int n_ctx = 0;             // session context
    int max_prompt_tokens = 0; // <= n_ctx - 1
    int n_vocab = 0;
    // --strict-model-name: a request naming another model is a 404. Otherwise any name is
    // served by the one loaded model and echoed back (agents hard-code names like gpt-5).
    bool strict_model_name = false;
    // --hosted-sampling: chat sampling held to Moonshot's hosted values (docs/operations.md).
    bool hosted_sampling = false;
    // --new-turn-tool-choice required: tool_choice auto becomes required on a turn's first
    // request (docs/api.md, "Tools"; docs/agents.md).
    bool new_turn_tool_required = false;
    // --max-answer-mb and the vocabulary's per-token costs (wire/answer_limit.h).
    AnswerLimit answer;
    ImageRequestLimits images;  // what image parts may cost (docs/api.md "Images")
    // What compiling the request's grammar may cost (--grammar-max-*); the route sets `started`
    // when the request arrives, so its every compile step shares one time budget.
    GrammarLimits grammar;
};

// Which OpenAI endpoint a request came through (decides the response shapes).
enum class Endpoint { Completions, ChatCompletions, Responses, Messages };

// An output limit above what the context leaves, lowered to what it leaves (docs/api.md,
// "Output limits"): agents ask for 32000 or 128000 whatever the context.
struct MaxTokensClamp {
    std::string param;       // "" = not clamped
    long long asked = 0;
    int granted = 0;
};

// A namespace tool's functions are offered to the model as NAMESPACE + this + NAME.
inline constexpr const char* kNamespaceSeparator = ".";

// A validated request, ready to become a Job.
struct GenerationRequest {
    Endpoint endpoint = Endpoint::Completions;
    std::vector<int32_t> prompt;      // with each image's rows (its row ids) in place of its pad
    std::vector<PromptImage> images;  // chat: the images in the prompt, in order
    GenerationParams params;
    bool stream = false;
    bool include_usage = false;
    bool echo = false;          // completions: prepend the prompt text
    std::string echo_text;
    std::string model;          // as reported back: the name the client sent, else the served id
    MaxTokensClamp clamp;
    // The prompt's last tokens that usage.prompt_tokens leaves out: a chat's generation opener
    // (k3::kGenerationOpenerTokens), as the hosted API counts (docs/api.md "Thinking").
    int uncounted_prompt_tokens = 0;
    int reported_prompt_tokens() const { return std::max(0, int(prompt.size()) - uncounted_prompt_tokens); }
    bool hide_reasoning = false;  // Messages: thinking.display "omitted" (the text rides in the signature)
    std::vector<std::string> tool_namespaces;  // /v1/responses: namespace tools offered as "NS.name"
    json responses_echo;        // /v1/responses: the request settings the response object repeats
};

// Serialises with invalid UTF-8 replaced by U+FFFD (a token's bytes may be a partial character).
inline std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

}  // namespace k3::server

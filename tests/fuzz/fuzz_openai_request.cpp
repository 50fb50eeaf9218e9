// The OpenAI request validator (server/openai/request.h) on arbitrary request bodies, against a real
// tokenizer: every input is a valid job or an ApiError (a 4xx the client can act on). Anything
// else escaping (a JSON type_error, a std::out_of_range...) would have been a 500 and is a
// finding: libFuzzer reports the uncaught exception as a crash.
#include <cstddef>
#include <cstdint>
#include <string>

#include "fuzz_common.h"
#include "wire/json_body.h"
#include "openai/request.h"

K3_FUZZ_INIT_TOKENIZER

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    using namespace k3::server;
    std::string body(reinterpret_cast<const char*>(data), size);
    ModelLimits limits;
    limits.model_name = "fuzz";
    limits.n_ctx = 512;
    limits.max_prompt_tokens = 511;
    limits.n_vocab = k3::fuzz::tokenizer().n_vocab();
    JsonBody j;
    try {
        j = parse_json_body(body, {64, json_value_budget(limits.n_ctx)});
    } catch (const ApiError& e) {
        K3_FUZZ_CHECK(e.status == 400 || e.status == 413, "parse errors are 400 (or 413 for too many values)");
        return 0;
    }
    for (bool chat : {true, false}) {
        try {
            GenerationRequest r = chat ? parse_chat_request(j.value, k3::fuzz::tokenizer(), limits, &j.schemas)
                                       : parse_completion_request(j.value, k3::fuzz::tokenizer(), limits, &j.schemas);
            K3_FUZZ_CHECK(!r.prompt.empty(), "accepted an empty prompt");
            K3_FUZZ_CHECK(r.params.max_tokens >= 0, "negative max_tokens");
            K3_FUZZ_CHECK(int(r.prompt.size()) + r.params.max_tokens <= limits.n_ctx, "accepted past the context");
            for (int32_t id : r.prompt) K3_FUZZ_CHECK(id >= 0 && id < limits.n_vocab, "prompt id outside the vocabulary");
        } catch (const ApiError& e) {
            K3_FUZZ_CHECK(e.status >= 400 && e.status < 500, "validation errors are 4xx");
        }
    }
    return 0;
}

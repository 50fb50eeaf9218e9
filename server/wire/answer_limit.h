// Bounded answers (docs/operations.md "Bounded answers"): a whole, non-streamed
// answer is held in memory until its last token, so its size is bounded before the job is
// queued. The bound scales with what was asked: n choices x max_tokens x the most bytes one token
// can add to the body (its text, and its logprobs entry with top_logprobs alternatives), each
// token counted at the vocabulary's longest piece as JSON escapes it. A request whose bound
// passes --max-answer-mb is refused with a 400 that names the limit and what to lower; a stream
// is not bound by it (its memory is per event, worker/job_channel.h).
#pragma once
#include <cstddef>

#include "k3/tokenizer.h"

namespace k3::server {

struct GenerationRequest;

struct AnswerLimit {
    size_t max_bytes = 0;    // --max-answer-mb in bytes; 0: not set (nothing is refused)
    size_t piece = 0;        // most bytes one token's text takes inside a JSON string
    size_t piece_bytes = 0;  // most bytes one token's chat-logprobs "bytes" array takes (digits and commas)
};

// The limit for the served vocabulary: one pass over every token's bytes, at startup.
AnswerLimit answer_limit(const Tokenizer& tok, int max_answer_mb);

// The most bytes the whole answer to `r` can take (its body as sent).
size_t answer_bound(const GenerationRequest& r, const AnswerLimit& limit);

// Throws a 400 (code answer_too_large) for a non-streamed request whose bound passes the limit.
void check_answer_fits(const GenerationRequest& r, const AnswerLimit& limit);

}  // namespace k3::server

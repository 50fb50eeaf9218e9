// The progress line `k3serve run` keeps on stderr while a prompt is evaluated, when stderr is a
// terminal: "reading the prompt: 1,200 of 5,000 tokens (24%), 35.2 tokens/s, about 1 min 47 s left",
// redrawn in place a few times a second (inside a chunk too: it counts the layers the chunk has
// been through, k3/prefill_progress.h) and left as a summary line when the prompt is in.
#pragma once
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <string>
#include <thread>

#include "k3/engine.h"
#include "k3/prefill_progress.h"

namespace k3::cli {

class PrefillLine {
public:
    // Starts drawing on `out` (a terminal) for a prompt of `total` tokens, `cached` of them resumed.
    PrefillLine(const Engine& engine, std::FILE* out, int total, int cached);
    ~PrefillLine();  // ends the line (as far as it got) if finish() was not called
    PrefillLine(const PrefillLine&) = delete;
    PrefillLine& operator=(const PrefillLine&) = delete;

    void chunk_started(int tokens);
    void chunk_done(int done_tokens);
    // The prompt is in (or the evaluation stopped): the last line, then a newline.
    void finish();

    // The text of the line for these figures (no control characters), for tests.
    static std::string text(const PrefillFigures& f, bool final);

private:
    void draw(bool final);  // under mutex_
    void tick();

    const Engine& engine_;
    std::FILE* out_;
    std::mutex mutex_;
    std::condition_variable wake_;
    PrefillProgress progress_;
    bool done_ = false;
    std::thread ticker_;
};

}  // namespace k3::cli

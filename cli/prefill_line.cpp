#include "cli/prefill_line.h"

#include <chrono>
#include <cmath>

namespace k3::cli {

namespace {

constexpr auto kRedraw = std::chrono::milliseconds(250);

// 12345 -> "12,345"
std::string grouped(int n) {
    std::string digits = std::to_string(n), out;
    for (size_t i = 0; i < digits.size(); ++i) {
        if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
        out += digits[i];
    }
    return out;
}

std::string duration(double s) {
    char buf[48];
    const long whole = std::lround(s);
    if (whole >= 3600)
        std::snprintf(buf, sizeof buf, "%ld h %ld min", whole / 3600, whole % 3600 / 60);
    else if (whole >= 60)
        std::snprintf(buf, sizeof buf, "%ld min %ld s", whole / 60, whole % 60);
    else
        std::snprintf(buf, sizeof buf, "%.1f s", s);
    return buf;
}

}  // namespace

std::string PrefillLine::text(const PrefillFigures& f, bool final) {
    std::string line = final && f.done_tokens == f.total_tokens ? "prompt read: " : "reading the prompt: ";
    char buf[96];
    if (final && f.done_tokens == f.total_tokens) {
        line += grouped(f.total_tokens) + " tokens";
        if (f.cached_tokens > 0) line += " (" + grouped(f.cached_tokens) + " cached)";
        line += " in " + duration(f.elapsed_s);
        if (f.chunks_done > 0) line += ", " + grouped(f.chunks_done) + (f.chunks_done == 1 ? " pass" : " passes");
    } else {
        const double percent = f.total_tokens > 0 ? 100.0 * f.done_tokens / f.total_tokens : 0.0;
        std::snprintf(buf, sizeof buf, " (%.0f%%)", std::floor(percent));
        line += grouped(f.done_tokens) + " of " + grouped(f.total_tokens) + " tokens" + buf;
        if (f.pass) {
            std::snprintf(buf, sizeof buf, ", pass %d (%s tokens): %d of %d layers", f.pass->number,
                          grouped(f.pass->tokens).c_str(), f.pass->layers_done, f.pass->layers);
            line += buf;
        }
    }
    if (f.tokens_per_s) {
        std::snprintf(buf, sizeof buf, ", %.1f tokens/s", *f.tokens_per_s);
        line += buf;
    }
    if (!final && f.eta_s) line += ", about " + duration(*f.eta_s) + " left";
    return line;
}

PrefillLine::PrefillLine(const Engine& engine, std::FILE* out, int total, int cached) : engine_(engine), out_(out) {
    progress_.begin(total, cached, engine.info().n_layers, PrefillProgress::Clock::now());
    ticker_ = std::thread([this] { tick(); });
}

PrefillLine::~PrefillLine() { finish(); }

void PrefillLine::chunk_started(int tokens) {
    std::lock_guard lock(mutex_);
    progress_.chunk_started(tokens, engine_.progress());
}

void PrefillLine::chunk_done(int done_tokens) {
    std::lock_guard lock(mutex_);
    progress_.chunk_done(done_tokens, PrefillProgress::Clock::now());
    draw(false);
}

void PrefillLine::finish() {
    {
        std::lock_guard lock(mutex_);
        if (done_) return;
        done_ = true;
        draw(true);
    }
    wake_.notify_all();
    ticker_.join();
}

void PrefillLine::draw(bool final) {
    const PrefillFigures f = progress_.at(engine_.progress(), PrefillProgress::Clock::now());
    // back to the line's start, the text, the rest of the old line cleared
    std::fprintf(out_, "\r%s\x1b[K%s", text(f, final).c_str(), final ? "\n" : "");
    std::fflush(out_);
}

void PrefillLine::tick() {
    std::unique_lock lock(mutex_);
    while (!done_) {
        draw(false);
        wake_.wait_for(lock, kRedraw, [this] { return done_; });
    }
}

}  // namespace k3::cli

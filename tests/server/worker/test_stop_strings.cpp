// Several stop strings at once, overlapping ("abc" and "bcd"), fed in every possible split of
// the text: the streamed output must always be what a one-shot cut at the earliest stop gives,
// nothing that could still become a stop string may be released early, and no stop string
// (or any part after it) is ever sent.
#include <doctest/doctest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "worker/stop_matcher.h"

using k3::server::StopMatcher;

namespace {

// The text before the earliest occurrence of any stop string (all of it when none occurs).
std::string cut_at_earliest(const std::string& text, const std::vector<std::string>& stops, bool* stopped) {
    size_t first = std::string::npos;
    for (const auto& s : stops)
        if (!s.empty()) first = std::min(first, text.find(s));
    *stopped = first != std::string::npos;
    return text.substr(0, std::min(first, text.size()));
}

// Feeds `text` in the pieces given by the split mask (bit i set: cut after character i) and
// checks every intermediate output against the one-shot answer.
void check_split(const std::string& text, const std::vector<std::string>& stops, uint32_t mask) {
    bool want_stopped = false;
    const std::string want = cut_at_earliest(text, stops, &want_stopped);
    StopMatcher m(stops);
    std::string sent, piece;
    for (size_t i = 0; i < text.size(); ++i) {
        piece += text[i];
        if (i + 1 == text.size() || (mask >> i & 1u)) {
            sent += m.push(piece);
            piece.clear();
            // Released text is final: a prefix of the answer, never a stop string's start that
            // the next piece could still complete (it would then be sent and also be cut).
            REQUIRE_MESSAGE(want.compare(0, sent.size(), sent) == 0, "sent '", sent, "' is not a prefix of '", want, "'");
        }
    }
    CHECK(m.stopped() == want_stopped);
    sent += m.flush();
    CHECK(sent == want);
}

}  // namespace

TEST_CASE("stop strings: overlapping \"abc\" and \"bcd\" cut at the earliest, in every split") {
    const std::vector<std::vector<std::string>> stop_sets = {
        {"abc", "bcd"}, {"bcd", "abc"}, {"ab", "aab"}, {"aab", "ab"}, {"cd", "abcd", "x"}, {"a", "abc"}, {"bb", "b"},
    };
    const std::vector<std::string> texts = {
        "xabcd", "xbcda", "aabcd", "abab", "zzbcdabc", "aaab", "ababcd", "bcbcd", "abdcbb", "xyz", "dcba", "abcabc",
    };
    for (const auto& stops : stop_sets) {
        CAPTURE(stops);
        for (const auto& text : texts) {
            CAPTURE(text);
            for (uint32_t mask = 0; mask < (1u << (text.size() - 1)); ++mask) {
                CAPTURE(mask);
                check_split(text, stops, mask);
            }
        }
    }
}

TEST_CASE("stop strings: the earliest stop wins whatever the order they are listed in") {
    // "abcd" holds "abc" (at 0) and "bcd" (at 1); fed one character at a time, "abc" completes
    // at the third and nothing is ever sent, although "bcd" is listed first.
    StopMatcher m({"bcd", "abc"});
    CHECK(m.push("a") == "");
    CHECK(m.push("b") == "");
    CHECK(m.push("c") == "");
    CHECK(m.stopped());
    CHECK(m.push("d") == "");
    CHECK(m.flush() == "");

    // "xbcd" then: only "bcd" occurs, and the "x" before it is released.
    StopMatcher n({"abc", "bcd"});
    CHECK(n.push("xb") == "x");
    CHECK(n.push("cd") == "");
    CHECK(n.stopped());
}

TEST_CASE("stop strings: a held-back start that does not complete is released, in order") {
    StopMatcher m({"abc", "bcd"});
    CHECK(m.push("ab") == "");     // could be "abc"
    CHECK(m.push("x") == "abx");   // it was not
    CHECK(m.push("bc") == "");     // could be "bcd"
    CHECK(m.push("e") == "bce");
    CHECK_FALSE(m.stopped());
    CHECK(m.push("abcd") == "");   // "abc" at 0 is the earliest
    CHECK(m.stopped());
}

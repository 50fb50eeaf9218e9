// Stop strings across token boundaries. Text goes in as it is decoded; what comes out is safe to
// send: anything that could still be the start of a stop string is held back until the next
// piece decides it. When a stop string completes, the text before it is released, the stop
// string itself and everything after it are dropped, and stopped() turns true.
#pragma once
#include <string>
#include <vector>

namespace k3::server {

class StopMatcher {
public:
    explicit StopMatcher(std::vector<std::string> stops);

    // Feeds new text; returns the text that can be emitted now.
    std::string push(const std::string& text);
    // End of generation: the held-back text (it did not become a stop string).
    std::string flush();
    bool stopped() const { return stopped_; }
    // The stop string that ended the text ("" while none has).
    const std::string& matched() const { return matched_; }

private:
    std::vector<std::string> stops_;
    std::string matched_;
    std::string held_;
    bool stopped_ = false;
};

}  // namespace k3::server

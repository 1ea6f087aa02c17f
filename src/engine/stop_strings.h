// OpenAI's `stop`: generation ends where any of the strings appears, and the
// text from it on is never shown. Streaming must not show the start of a stop
// string before knowing it is one, so text that could still begin one is
// held back until it cannot.
#pragma once

#include <string>
#include <vector>

namespace tessera {

class StopStrings {
public:
    explicit StopStrings(std::vector<std::string> stops);

    // Takes the next piece of generated text; returns what can be shown now.
    std::string push(const std::string& piece);
    // The text held back, once generation has ended without a stop.
    std::string flush();
    bool stopped() const { return stopped_; }

private:
    std::vector<std::string> stops_;
    std::string pending_;
    bool stopped_ = false;
};

}  // namespace tessera

#include "engine/stop_strings.h"

#include <algorithm>

namespace tessera {

StopStrings::StopStrings(std::vector<std::string> stops) : stops_(std::move(stops)) {
    stops_.erase(std::remove(stops_.begin(), stops_.end(), std::string()), stops_.end());
}

std::string StopStrings::push(const std::string& piece) {
    if (stopped_) return {};
    pending_ += piece;
    size_t first = std::string::npos;
    for (const std::string& s : stops_) first = std::min(first, pending_.find(s));
    if (first != std::string::npos) {
        stopped_ = true;
        std::string out = pending_.substr(0, first);
        pending_.clear();
        return out;
    }
    // Hold back the longest tail that is a proper prefix of some stop string.
    size_t keep = 0;
    for (const std::string& s : stops_) {
        for (size_t n = std::min(s.size() - 1, pending_.size()); n > keep; --n) {
            if (pending_.compare(pending_.size() - n, n, s, 0, n) == 0) {
                keep = n;
                break;
            }
        }
    }
    std::string out = pending_.substr(0, pending_.size() - keep);
    pending_.erase(0, pending_.size() - keep);
    return out;
}

std::string StopStrings::flush() {
    std::string out;
    out.swap(pending_);
    return stopped_ ? std::string() : out;
}

}  // namespace tessera

#include "util/progress.h"

#include "util/timer.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>

namespace tessera {

namespace {
std::atomic<int> g_terminal{-1};
}  // namespace

void Progress::set_terminal_for_testing(int terminal) { g_terminal.store(terminal); }

bool Progress::on_terminal() {
    const int forced = g_terminal.load();
    return forced >= 0 ? forced == 1 : ::isatty(STDERR_FILENO) == 1;
}

Progress::Progress(std::string label, double total, std::string unit)
    : label_(std::move(label)), unit_(std::move(unit)), total_(std::max(total, 1e-9)), start_(now_seconds()) {
    terminal_ = on_terminal();
}

Progress::~Progress() {
    if (!finished_ && terminal_ && last_draw_ >= 0.0) std::fputc('\n', stderr);
}

void Progress::update(double done) {
    if (finished_) return;
    const double now = now_seconds();
    if (terminal_) {
        if (last_draw_ >= 0.0 && now - last_draw_ < 0.1) return;
        last_draw_ = now;
        draw(done, false);
        return;
    }
    const int quarter = static_cast<int>(std::clamp(done / total_, 0.0, 1.0) * 4.0);
    if (quarter > last_quarter_ && quarter < 4) {
        last_quarter_ = quarter;
        draw(done, false);
    }
}

void Progress::finish() {
    if (finished_) return;
    draw(total_, true);
    finished_ = true;
}

void Progress::draw(double done, bool final) {
    constexpr int kWidth = 30;
    const double fraction = std::clamp(done / total_, 0.0, 1.0);
    const double seconds = now_seconds() - start_;
    // Counts (tensors) as integers, sizes (MiB) with a decimal.
    const int digits = total_ == static_cast<double>(static_cast<int64_t>(total_)) && unit_ != "MiB" ? 0 : 1;
    if (terminal_) {
        const int filled = static_cast<int>(fraction * kWidth);
        std::fprintf(stderr, "\r%s [%.*s%*s] %3.0f%% %.*f/%.*f %s %.1f s%s", label_.c_str(), filled,
                     "##############################", kWidth - filled, "", fraction * 100.0, digits, done, digits,
                     total_, unit_.c_str(), seconds, final ? "\n" : "");
    } else {
        std::fprintf(stderr, "%s: %.0f%% (%.*f/%.*f %s, %.1f s)\n", label_.c_str(), fraction * 100.0, digits, done,
                     digits, total_, unit_.c_str(), seconds);
    }
    std::fflush(stderr);
}

}  // namespace tessera

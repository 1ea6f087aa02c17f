// Progress of a long step (model load, slice shipping, quantize, convert,
// gen-model) on stderr: a bar redrawn in place on a terminal, at most ten
// times a second; elsewhere (a log, a pipe) a plain line at every quarter, so
// logs stay short and readable.
#pragma once

#include <cstdint>
#include <string>

namespace tessera {

class Progress {
public:
    // `unit` names what is counted ("MiB", "tensors").
    Progress(std::string label, double total, std::string unit);
    ~Progress();
    Progress(const Progress&) = delete;
    Progress& operator=(const Progress&) = delete;

    void update(double done);
    // Draws the final state (100%) and ends the line.
    void finish();

    // Whether stderr is a terminal (bars) or not (quarter lines); tests set it.
    static void set_terminal_for_testing(int terminal);  // -1: detect, 0: no, 1: yes
    // Whether a Progress made now draws a bar (stderr is a terminal).
    static bool on_terminal();

private:
    std::string label_, unit_;
    double total_;
    double start_;
    double last_draw_ = -1.0;
    int last_quarter_ = -1;
    bool terminal_;
    bool finished_ = false;
    void draw(double done, bool final);
};

}  // namespace tessera

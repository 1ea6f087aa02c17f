// Runs a command as a real child process and captures what it prints, with a
// time limit (the child is killed past it), for end-to-end tests of the CLI.
#pragma once

#include <string>
#include <vector>

namespace tessera::test {

struct ProcessResult {
    int exit_code = -1;  // -1 when killed by a signal or the time limit
    bool timed_out = false;
    std::string out;
    std::string err;
    double seconds = 0.0;
};

ProcessResult run_process(const std::vector<std::string>& argv, double timeout_seconds);

}  // namespace tessera::test

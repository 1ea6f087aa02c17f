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

// A child process left running (a worker): its stdout is a pipe to read its
// first line from, its stderr is inherited. Killed and reaped on destruction.
class BackgroundProcess {
public:
    explicit BackgroundProcess(const std::vector<std::string>& argv);
    ~BackgroundProcess();
    BackgroundProcess(const BackgroundProcess&) = delete;
    BackgroundProcess& operator=(const BackgroundProcess&) = delete;

    // The first line the child prints, or "" if none within the timeout.
    std::string read_line(double timeout_seconds);
    void signal(int sig);
    // Waits up to the timeout for the child to exit by itself; its exit code,
    // or -1 when it was killed by a signal or is still running (then it is
    // left to the destructor).
    int wait_exit(double timeout_seconds);
    int pid() const { return pid_; }

private:
    int pid_ = -1;
    int out_fd_ = -1;
};

}  // namespace tessera::test

// Helpers shared by the end-to-end tests of the tessera binary: its command
// lines, the tokens of `run --json`, and worker processes on loopback.
#pragma once

#include "subprocess.h"

#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

namespace tessera::test {

// {tessera binary, args...}
std::vector<std::string> tessera_cmd(std::initializer_list<std::string> args);

// The generated token ids of a `tessera run --json` result.
std::vector<int> tokens_of(const ProcessResult& r);

// Starts `tessera worker` for one session of `model` on a free loopback
// port (1 thread); returns "127.0.0.1:PORT". With cpu_target, its kernels
// run on that SIMD target or a lesser one (tessera --cpu-target).
std::string start_worker(std::unique_ptr<BackgroundProcess>& worker, const std::string& model,
                         const std::string& cpu_target = "");

}  // namespace tessera::test

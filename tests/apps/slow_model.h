// A generated F32 model slow enough per token (scalar-sized work) that a run
// of a few thousand tokens lasts seconds: for tests that kill or stop a node
// mid-generation.
#pragma once

#include <string>

namespace tessera::test {

// Writes it into `dir` and returns its path.
std::string write_slow_model(const std::string& dir);

}  // namespace tessera::test

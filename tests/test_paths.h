// Paths the tests read and write, fixed at configure time.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tessera::test {

// tests/data in the repository: every model, vocabulary and vector a test
// reads (tests/data/SOURCES.md gives each one's origin, licence and sha256).
std::string data_dir();
// The bundled default model, models/stories260K.gguf (real trained weights).
std::string stories260k();
// A fresh scratch directory for one test (under the build tree).
std::string scratch_dir(const std::string& name);
// The same, made fresh once per test and then kept (scratch_dir empties the
// directory on every call).
std::string test_dir(const std::string& name);
// A directory that outlives the test (never emptied): files that tests of
// every binary derive from the same inputs, named by what they derive from
// (npm_vocab.cpp).
std::string lasting_dir(const std::string& name);
std::string tessera_binary();
std::string relay_binary();  // tessera-relay, beside the tessera binary
std::string source_dir();
// A whole file's bytes; throws std::runtime_error naming a file it cannot open.
std::string read_text(const std::string& path);
std::vector<uint8_t> read_bytes(const std::string& path);

}  // namespace tessera::test

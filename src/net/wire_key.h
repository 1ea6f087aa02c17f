// The pre-shared key of a cluster (Shard, seed 002): 32 random bytes that
// every node of a plan holds and no one else. A key file holds them as 64
// hex digits (one line, easy to copy between machines); a file that group or
// others may read is refused, as ssh refuses a private key left readable.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>

namespace tessera {

struct WireKey {
    std::array<uint8_t, 32> bytes{};
};

// Writes a fresh random key to `path` with mode 0600; refuses to replace an
// existing file.
void write_new_key_file(const std::string& path);

// Reads a key file: checks its mode (no group or other bits), its size and
// its digits. Every error names the file and says how to fix it.
WireKey read_key_file(const std::string& path);

// A fresh random key (for the processes of --local, which never touches disk).
WireKey random_key();

// 64 hex digits, and back (an Error on anything else).
std::string key_to_hex(const WireKey& key);
WireKey key_from_hex(const std::string& text, const std::string& source);

// The key a command line names: --key FILE, else $TESSERA_KEY_FILE, else none.
std::shared_ptr<const WireKey> key_from_flag_or_env(const std::string& flag_path);

}  // namespace tessera

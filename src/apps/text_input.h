// A text file's whole contents, for commands that read one (-f): an Error
// naming the file when it cannot be read.
#pragma once

#include <string>

namespace tessera {

std::string read_text_file(const std::string& path);

}  // namespace tessera

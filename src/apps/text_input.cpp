#include "apps/text_input.h"

#include "util/error.h"

#include <fstream>
#include <sstream>

namespace tessera {

std::string read_text_file(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw make_error("{}: cannot read the text file", path);
    std::ostringstream text;
    text << in.rdbuf();
    return text.str();
}

}  // namespace tessera

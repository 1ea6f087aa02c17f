#include "util/version.h"

namespace tessera {

const char* tessera_version() { return TESSERA_VERSION_STRING; }

}  // namespace tessera

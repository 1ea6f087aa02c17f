// The release this binary was built from (CMake's project version), for
// --version, the status view, and the version a root and a worker exchange
// in their hello (cluster/session/session_messages.h).
#pragma once

namespace tessera {

const char* tessera_version();

}  // namespace tessera

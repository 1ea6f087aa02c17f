// How fast the disk under a file reads, for the planner's cost of layers a
// node streams from disk every token (model/streamed_layers.h).
#pragma once

#include <string>

namespace tessera {

// Sequential read speed, bytes per second, of the disk holding `path`:
// up to 32 MiB from the middle of the file read with O_DIRECT (past the page
// cache) in 4 MiB requests; where O_DIRECT is refused, after dropping the
// file's cached pages. Measured once per process and path; 0 when the file
// cannot be read.
double disk_read_bytes_per_second(const std::string& path);

}  // namespace tessera

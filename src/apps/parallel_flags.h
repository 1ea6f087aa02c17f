// The flags every model-running command shares for tensor-parallel modes
// (--workers, --local, --weights, --fast, --exact, --timeout-ms), declared once.
#pragma once

#include "engine/decoder_setup.h"

#include <CLI/CLI.hpp>

namespace tessera {

void add_parallel_flags(CLI::App* cmd, ParallelOptions& options);

// One line per rank: address, slice, weight and memory footprint (stderr).
void print_ranks(const TensorParallelDecoder& decoder);

}  // namespace tessera

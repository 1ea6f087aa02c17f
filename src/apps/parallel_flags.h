// The flags every model-running command shares for distributed modes
// (--workers, --local, --stages, --cluster, --stage-layers, --weights, --fast,
// --exact, --timeout-ms), declared once.
#pragma once

#include "engine/decoder_setup.h"

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

namespace tessera {

void add_parallel_flags(CLI::App* cmd, ParallelOptions& options);

// One line per rank: address, slice, weight and memory footprint (stderr).
void print_ranks(const TensorParallelDecoder& decoder);

// One line per pipeline stage: leader, group, slice, weight and footprint.
void print_stages(const PipelineDecoder& decoder);

// Whichever of the two the setup holds.
void print_plan(const DecoderSetup& setup);
// Sequence-parallel prefill: its nodes, and each one's chunk of the last
// prompt with the bytes the root sent it and received from it.
void print_sequence_nodes(const SpPrefillDecoder& decoder);
void print_sequence_chunks(const SpPrefillDecoder& decoder);

// The plan as JSON, one object per node: role ("single", "rank N", "stage
// N"), address, slice, weight and MiB (serve's /props, the web page).
nlohmann::json plan_json(const DecoderSetup& setup);

}  // namespace tessera

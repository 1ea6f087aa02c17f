// A Vulkan device's speed as the planner measures a CPU's
// (cluster/planner/speed_probe.h's probe_seconds: the seconds one token's
// gate and up products of a layer take): a token through the first layers on
// the device, best of several runs, per layer, times the share of a layer's
// bytes that gate and up are. A worker on a GPU reports it in its hello, so
// `plan --auto` sizes a GPU node's share by what it computes.
#pragma once

#include "model/llama_model.h"

namespace tessera {

double vulkan_probe_seconds(const LlamaModel& model, int device_index);

}  // namespace tessera

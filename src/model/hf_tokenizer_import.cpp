#include "model/hf_tokenizer_import.h"

#include "model/gguf_writer.h"
#include "model/hf_checkpoint.h"
#include "model/hf_tokenizer_spm.h"
#include "model/tokenizer_bpe.h"
#include "model/vocab.h"
#include "util/error.h"

#include <nlohmann/json.hpp>

#include <cctype>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <optional>

namespace tessera {

namespace {

using nlohmann::json;

GgufWriter vocabulary_of(const nlohmann::json& tokenizer, const nlohmann::json& config, const std::string& tokenizer_json,
                         const std::string& config_json, const std::string& chat_template);

// Gemma 3's tokenizer.json is 33 MB; a bound far above any real one.
constexpr uint64_t kMaxTokenizerJsonBytes = 1u << 30;

json read_json(const std::string& path) {
    if (std::filesystem::is_directory(path)) throw make_error("{}: is a folder, not a JSON file", path);
    if (!std::ifstream(path, std::ios::binary)) throw make_error("{}: cannot open", path);
    return read_checkpoint_json(path, kMaxTokenizerJsonBytes);
}

// The Split regexes of a pre_tokenizer (alone or in a Sequence), and whether
// a ByteLevel step splits with GPT-2's own regex (use_regex).
void collect_pre(const json& pre, std::vector<std::string>& regexes, bool& gpt2_regex) {
    if (!pre.is_object()) return;
    const std::string type = pre.value("type", "");
    if (type == "Sequence" && pre.contains("pretokenizers") && pre["pretokenizers"].is_array()) {
        for (const json& p : pre["pretokenizers"]) collect_pre(p, regexes, gpt2_regex);
    } else if (type == "Split" && pre.contains("pattern") && pre["pattern"].is_object()) {
        const json& pattern = pre["pattern"];
        if (pattern.contains("Regex") && pattern["Regex"].is_string()) regexes.push_back(pattern["Regex"]);
    } else if (type == "ByteLevel") {
        gpt2_regex = gpt2_regex || pre.value("use_regex", true);
    }
}

std::string pre_name(const json& tokenizer, const std::string& path) {
    std::vector<std::string> regexes;
    bool gpt2_regex = false;
    if (tokenizer.contains("pre_tokenizer")) collect_pre(tokenizer["pre_tokenizer"], regexes, gpt2_regex);
    if (regexes.empty() && gpt2_regex) return "gpt-2";
    if (regexes.size() == 1) {
        if (const char* name = bpe_pre_tokenizer_of_regex(regexes[0])) return name;
    }
    throw make_error("{}: its pre-tokenizer ({}) is not one Tessera knows (Llama 3's, Qwen 2's, o200k's or GPT-2's regex)",
                     path,
                     regexes.empty() ? std::string("no Split regex") : regexes[0]);
}

// A special token's text from tokenizer_config.json: a string or {"content": ...}.
std::optional<std::string> token_text(const json& config, const char* key) {
    if (!config.contains(key)) return std::nullopt;
    const json& v = config[key];
    if (v.is_string()) return v.get<std::string>();
    if (v.is_object() && v.contains("content") && v["content"].is_string()) return v["content"].get<std::string>();
    return std::nullopt;
}

}  // namespace

HfTokenizerFiles hf_tokenizer_files(const std::string& dir) {
    namespace fs = std::filesystem;
    HfTokenizerFiles files;
    files.tokenizer = (fs::path(dir) / "tokenizer.json").string();
    if (!fs::is_regular_file(files.tokenizer)) throw make_error("{}: a folder without a tokenizer.json", dir);
    const fs::path config = fs::path(dir) / "tokenizer_config.json";
    if (fs::is_regular_file(config)) files.config = config.string();
    const fs::path chat_template = fs::path(dir) / "chat_template.jinja";
    if (fs::is_regular_file(chat_template)) files.chat_template = chat_template.string();
    return files;
}

void convert_hf_tokenizer(const std::string& tokenizer_json, const std::string& config_json, const std::string& out_path,
                          const std::string& chat_template) {
    const json tokenizer = read_json(tokenizer_json);
    const json config = config_json.empty() ? json::object() : read_json(config_json);
    std::string template_text;
    if (!chat_template.empty()) {
        std::ifstream in(chat_template, std::ios::binary);
        if (!in) throw make_error("{}: cannot open", chat_template);
        template_text.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
        if (template_text.empty()) throw make_error("{}: the chat template is empty", chat_template);
    }
    hf_vocabulary(tokenizer, config, tokenizer_json, config_json, template_text).write(out_path);
}

GgufWriter hf_vocabulary(const nlohmann::json& tokenizer, const nlohmann::json& config, const std::string& tokenizer_json,
                         const std::string& config_json, const std::string& chat_template) {
    try {
        return vocabulary_of(tokenizer, config, tokenizer_json, config_json, chat_template);
    } catch (const nlohmann::json::exception& e) {
        // A field of another JSON type than the one read (value() of a number as a string).
        throw make_error("{} / {}: a field of the wrong type: {}", tokenizer_json, config_json.empty() ? "no config" : config_json,
                         e.what());
    }
}

namespace {

GgufWriter vocabulary_of(const nlohmann::json& tokenizer, const nlohmann::json& config, const std::string& tokenizer_json,
                         const std::string& config_json, const std::string& chat_template) {
    if (!tokenizer.is_object() || !tokenizer.contains("model") || !tokenizer["model"].is_object()) {
        throw make_error("{}: has no 'model' object (not a tokenizer.json)", tokenizer_json);
    }
    const json& model = tokenizer["model"];
    if (model.value("type", "") != "BPE" || !model.contains("vocab") || !model["vocab"].is_object() ||
        !model.contains("merges") || !model["merges"].is_array()) {
        throw make_error("{}: model type '{}' is not supported (a BPE with vocab and merges only: byte-level, or "
                         "SentencePiece-style with byte_fallback)",
                         tokenizer_json, model.value("type", "?"));
    }
    // A BPE with byte_fallback is a SentencePiece model (Llama 2, Mistral,
    // Gemma): llama.cpp's "llama" tokenizer, with scores; otherwise byte-level
    // BPE (GPT-2 style): "gpt2", with merges.
    const bool sentencepiece = model.value("byte_fallback", false);

    // Every id, from the vocabulary and the added tokens.
    std::map<int64_t, std::pair<std::string, TokenType>> by_id;
    constexpr int64_t kMaxVocab = 1 << 22;
    for (const auto& [text, id] : model["vocab"].items()) {
        if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() >= kMaxVocab) {
            throw make_error("{}: vocab entry '{}' has no valid id", tokenizer_json, text);
        }
        by_id[id.get<int64_t>()] = {text, TokenType::Normal};
    }
    if (tokenizer.contains("added_tokens") && tokenizer["added_tokens"].is_array()) {
        for (const json& t : tokenizer["added_tokens"]) {
            if (!t.is_object() || !t.contains("id") || !t["id"].is_number_integer() || !t.contains("content") ||
                !t["content"].is_string() || t["id"].get<int64_t>() < 0 || t["id"].get<int64_t>() >= kMaxVocab) {
                throw make_error("{}: an added token has no valid id or content", tokenizer_json);
            }
            by_id[t["id"].get<int64_t>()] = {t["content"].get<std::string>(),
                                             t.value("special", false) ? TokenType::Control : TokenType::UserDefined};
        }
    }
    if (sentencepiece) {
        // SentencePiece's own kinds: its byte pieces and its unknown piece.
        const std::string unk = model.contains("unk_token") && model["unk_token"].is_string() ? model["unk_token"].get<std::string>() : "";
        for (auto& [id, entry] : by_id) {
            const std::string& text = entry.first;
            const bool byte = text.size() == 6 && text.starts_with("<0x") && text.ends_with(">") &&
                              std::isxdigit(static_cast<unsigned char>(text[3])) && std::isxdigit(static_cast<unsigned char>(text[4]));
            if (byte) entry.second = TokenType::Byte;
            if (!unk.empty() && text == unk) entry.second = TokenType::Unknown;
        }
    }
    if (by_id.empty()) throw make_error("{}: the vocabulary is empty", tokenizer_json);
    const int64_t n_vocab = by_id.rbegin()->first + 1;
    std::vector<std::string> tokens(static_cast<size_t>(n_vocab));
    std::vector<int32_t> types(static_cast<size_t>(n_vocab), static_cast<int32_t>(TokenType::Unused));
    std::map<std::string, int32_t> id_of;
    for (int64_t i = 0; i < n_vocab; ++i) tokens[static_cast<size_t>(i)] = "[PAD" + std::to_string(i) + "]";
    for (const auto& [id, entry] : by_id) {
        tokens[static_cast<size_t>(id)] = entry.first;
        types[static_cast<size_t>(id)] = static_cast<int32_t>(entry.second);
        id_of.emplace(entry.first, static_cast<int32_t>(id));
    }

    std::vector<std::pair<std::string, std::string>> merges;
    merges.reserve(model["merges"].size());
    for (const json& m : model["merges"]) {
        if (m.is_string()) {
            // "a b": split at the first space after the first byte (as the vocabulary reader does).
            const std::string text = m.get<std::string>();
            const size_t space = text.find(' ', 1);
            if (space == std::string::npos) throw make_error("{}: merge '{}' has no space", tokenizer_json, text.substr(0, 80));
            merges.emplace_back(text.substr(0, space), text.substr(space + 1));
        } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
            merges.emplace_back(m[0].get<std::string>(), m[1].get<std::string>());
        } else {
            throw make_error("{}: a merge is neither \"a b\" nor [\"a\", \"b\"]", tokenizer_json);
        }
    }

    GgufWriter w;
    w.set_string("general.architecture", "llama");
    w.set_string("general.name", "vocab from " + tokenizer_json);
    std::string pre;
    if (sentencepiece) {
        const SpmFromHf spm = spm_from_hf(tokenizer, tokens, merges, tokenizer_json);
        w.set_string("tokenizer.ggml.model", "llama");
        w.set_string("tokenizer.ggml.pre", "default");
        w.set_string_array("tokenizer.ggml.tokens", tokens);
        w.set_f32_array("tokenizer.ggml.scores", spm.scores);
        w.set_i32_array("tokenizer.ggml.token_type", types);
        w.set_bool("tokenizer.ggml.add_space_prefix", spm.add_space_prefix);
        if (const auto unk = model.find("unk_token"); unk != model.end() && unk->is_string()) {
            if (const auto it = id_of.find(unk->get<std::string>()); it != id_of.end()) {
                w.set_u32("tokenizer.ggml.unknown_token_id", static_cast<uint32_t>(it->second));
            }
        }
    } else {
        pre = pre_name(tokenizer, tokenizer_json);
        std::vector<std::string> joined;
        joined.reserve(merges.size());
        for (const auto& [a, b] : merges) joined.push_back(a + " " + b);
        w.set_string("tokenizer.ggml.model", "gpt2");
        w.set_string("tokenizer.ggml.pre", pre);
        w.set_string_array("tokenizer.ggml.tokens", tokens);
        w.set_i32_array("tokenizer.ggml.token_type", types);
        w.set_string_array("tokenizer.ggml.merges", joined);
    }
    const auto special_id = [&](const char* key) -> std::optional<int32_t> {
        const std::optional<std::string> text = token_text(config, key);
        if (!text) return std::nullopt;
        const auto it = id_of.find(*text);
        if (it == id_of.end()) throw make_error("{}: {} '{}' is not in the vocabulary", config_json, key, *text);
        return it->second;
    };
    const std::optional<int32_t> bos = special_id("bos_token"), eos = special_id("eos_token");
    if (bos) w.set_u32("tokenizer.ggml.bos_token_id", static_cast<uint32_t>(*bos));
    if (eos) w.set_u32("tokenizer.ggml.eos_token_id", static_cast<uint32_t>(*eos));
    if (const std::optional<int32_t> pad = special_id("pad_token")) {
        w.set_u32("tokenizer.ggml.padding_token_id", static_cast<uint32_t>(*pad));
    }
    // Llama 3 prepends BOS (llama.cpp assumes so for its pre-tokenizer);
    // others say so in their config, or do not.
    // SentencePiece models prepend BOS unless they say otherwise.
    const bool add_bos = config.contains("add_bos_token") && config["add_bos_token"].is_boolean()
                             ? config["add_bos_token"].get<bool>()
                             : ((sentencepiece || pre == "llama-bpe") && bos.has_value());
    if (config.contains("add_eos_token") && config["add_eos_token"].is_boolean()) {
        w.set_bool("tokenizer.ggml.add_eos_token", config["add_eos_token"].get<bool>());
    }
    w.set_bool("tokenizer.ggml.add_bos_token", add_bos);
    if (!chat_template.empty()) {
        w.set_string("tokenizer.chat_template", chat_template);
    } else if (config.contains("chat_template")) {
        const json& t = config["chat_template"];
        if (t.is_string()) {
            w.set_string("tokenizer.chat_template", t.get<std::string>());
        } else if (t.is_array()) {
            // Several named templates: the default one.
            for (const json& named : t) {
                if (named.is_object() && named.value("name", "") == "default" && named.contains("template") &&
                    named["template"].is_string()) {
                    w.set_string("tokenizer.chat_template", named["template"].get<std::string>());
                }
            }
        }
    }
    return w;
}

}  // namespace

}  // namespace tessera

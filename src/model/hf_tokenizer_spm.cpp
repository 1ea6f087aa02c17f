#include "model/hf_tokenizer_spm.h"

#include "util/error.h"

#include <unordered_map>

namespace tessera {

namespace {

using nlohmann::json;

constexpr const char* kSpaceMark = "\xE2\x96\x81";  // "▁", SentencePiece's space

// Whether a normalizer step (or Sequence of them) prepends "▁"; refuses a
// step that SentencePiece's plain BPE would not do (NFKC, lowercasing, ...),
// since llama.cpp's tokenizer would not do it either.
void read_normalizer(const json& n, bool& prepend, const std::string& path) {
    if (n.is_null()) return;
    const std::string type = n.is_object() ? n.value("type", "") : "";
    if (type == "Sequence" && n.contains("normalizers") && n["normalizers"].is_array()) {
        for (const json& step : n["normalizers"]) read_normalizer(step, prepend, path);
        return;
    }
    if (type == "Prepend" && n.value("prepend", "") == kSpaceMark) {
        prepend = true;
        return;
    }
    if (type == "Replace" && n.contains("pattern") && n["pattern"].is_object() &&
        n["pattern"].value("String", "") == " " && n.value("content", "") == kSpaceMark) {
        return;  // the tokenizer writes every space as "▁" anyway
    }
    throw make_error("{}: a SentencePiece-style normalizer step '{}' that llama.cpp's tokenizer does not apply", path,
                     n.dump().substr(0, 200));
}

void read_pre_tokenizer(const json& p, bool& prepend, const std::string& path) {
    if (p.is_null()) return;
    const std::string type = p.is_object() ? p.value("type", "") : "";
    if (type == "Sequence" && p.contains("pretokenizers") && p["pretokenizers"].is_array()) {
        for (const json& step : p["pretokenizers"]) read_pre_tokenizer(step, prepend, path);
        return;
    }
    if (type == "Metaspace" && p.value("replacement", kSpaceMark) == std::string(kSpaceMark)) {
        // tokenizers >= 0.14 say prepend_scheme; older files add_prefix_space.
        const std::string scheme = p.value("prepend_scheme", p.value("add_prefix_space", true) ? "always" : "never");
        prepend = prepend || scheme == "always" || scheme == "first";
        return;
    }
    // Gemma's Split on " " after its normalizer turned every space into "▁": splits nothing.
    if (type == "Split" && p.contains("pattern") && p["pattern"].is_object() && p["pattern"].value("String", "") == " ") {
        return;
    }
    throw make_error("{}: a SentencePiece-style pre-tokenizer '{}' that llama.cpp's tokenizer does not apply", path,
                     p.dump().substr(0, 200));
}

}  // namespace

SpmFromHf spm_from_hf(const json& tokenizer, const std::vector<std::string>& tokens,
                      const std::vector<std::pair<std::string, std::string>>& merges, const std::string& path) {
    SpmFromHf out;
    bool prepend = false;
    if (tokenizer.contains("normalizer")) read_normalizer(tokenizer["normalizer"], prepend, path);
    if (tokenizer.contains("pre_tokenizer")) read_pre_tokenizer(tokenizer["pre_tokenizer"], prepend, path);
    out.add_space_prefix = prepend;

    std::unordered_map<std::string, size_t> id_of;
    id_of.reserve(tokens.size());
    for (size_t id = 0; id < tokens.size(); ++id) id_of.emplace(tokens[id], id);
    // Below every merge's score: tokens no merge makes.
    const float never = -static_cast<float>(merges.size()) - 1.0f;
    out.scores.assign(tokens.size(), never);
    std::vector<bool> made(tokens.size(), false);
    for (size_t rank = 0; rank < merges.size(); ++rank) {
        const auto it = id_of.find(merges[rank].first + merges[rank].second);
        if (it == id_of.end()) {
            throw make_error("{}: merge {} ('{} {}') makes no token of the vocabulary", path, rank,
                             merges[rank].first.substr(0, 60), merges[rank].second.substr(0, 60));
        }
        if (!made[it->second]) {
            made[it->second] = true;
            out.scores[it->second] = -static_cast<float>(rank);
        }
    }
    return out;
}

}  // namespace tessera

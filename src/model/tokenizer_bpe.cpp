// GPT-2 byte-level BPE ("gpt2" vocabularies): the text is split by the GPT-2
// pre-tokenizer regex (PCRE2 with Unicode properties), each piece's bytes are
// mapped to printable symbols, and adjacent symbols are merged by merge rank.
#define PCRE2_CODE_UNIT_WIDTH 8
#include "model/tokenizer_impl.h"
#include "util/error.h"

#include <pcre2.h>

#include <climits>
#include <map>

namespace tessera {

namespace {

constexpr const char* kGpt2Pattern =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

void append_utf8(std::string& out, uint32_t cp) {
    if (cp < 0x80) {
        out += static_cast<char>(cp);
    } else if (cp < 0x800) {
        out += static_cast<char>(0xc0 | (cp >> 6));
        out += static_cast<char>(0x80 | (cp & 0x3f));
    } else {
        out += static_cast<char>(0xe0 | (cp >> 12));
        out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
        out += static_cast<char>(0x80 | (cp & 0x3f));
    }
}

class BpeTokenizer : public Tokenizer {
public:
    explicit BpeTokenizer(Vocab vocab) : Tokenizer(std::move(vocab)) {
        // GPT-2's byte <-> symbol table: printable bytes map to themselves,
        // the others to code points from 256 upwards.
        int n = 0;
        for (int b = 0; b < 256; ++b) {
            const bool printable = (b >= '!' && b <= '~') || (b >= 0xa1 && b <= 0xac) || (b >= 0xae && b <= 0xff);
            const uint32_t cp = printable ? static_cast<uint32_t>(b) : static_cast<uint32_t>(256 + n++);
            append_utf8(byte_symbol_[b], cp);
            symbol_byte_[byte_symbol_[b]] = static_cast<uint8_t>(b);
        }
        for (size_t i = 0; i < vocab_.merges.size(); ++i) {
            ranks_.emplace(vocab_.merges[i].first + " " + vocab_.merges[i].second, static_cast<int>(i));
        }
        int error = 0;
        PCRE2_SIZE offset = 0;
        regex_ = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(kGpt2Pattern), PCRE2_ZERO_TERMINATED,
                               PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF, &error, &offset, nullptr);
        if (regex_ == nullptr) throw make_error("internal: the GPT-2 pre-tokenizer pattern does not compile ({})", error);
        match_ = pcre2_match_data_create_from_pattern(regex_, nullptr);
    }
    ~BpeTokenizer() override {
        pcre2_match_data_free(match_);
        pcre2_code_free(regex_);
    }

    std::vector<int32_t> encode(std::string_view text, bool add_bos) const override {
        std::vector<int32_t> out;
        if (add_bos && vocab_.add_bos) out.push_back(vocab_.bos_id);
        size_t start = 0;
        while (start < text.size()) {
            const int rc = pcre2_match(regex_, reinterpret_cast<PCRE2_SPTR>(text.data()), text.size(), start, 0, match_,
                                       nullptr);
            if (rc < 0) {
                // No match (only possible around invalid UTF-8): the rest is one piece.
                encode_piece(text.substr(start), out);
                break;
            }
            const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(match_);
            if (ov[0] > start) encode_piece(text.substr(start, ov[0] - start), out);  // skipped invalid bytes
            if (ov[1] == ov[0]) {
                start = ov[0] + 1;
                continue;
            }
            encode_piece(text.substr(ov[0], ov[1] - ov[0]), out);
            start = ov[1];
        }
        return out;
    }

    std::string token_to_piece(int32_t id) const override {
        if (!vocab_.is_valid(id)) throw make_error("token id {} is outside the vocabulary of {}", id, vocab_.size());
        if (vocab_.types[static_cast<size_t>(id)] == TokenType::Control) return {};
        const std::string& t = vocab_.tokens[static_cast<size_t>(id)];
        std::string out;
        for (size_t i = 0; i < t.size();) {
            size_t len = 1;
            const auto lead = static_cast<unsigned char>(t[i]);
            if (lead >= 0xc0) len = lead >= 0xf0 ? 4 : lead >= 0xe0 ? 3 : 2;
            len = std::min(len, t.size() - i);
            const auto it = symbol_byte_.find(t.substr(i, len));
            if (it != symbol_byte_.end()) out += static_cast<char>(it->second);
            else out += t.substr(i, len);
            i += len;
        }
        return out;
    }

private:
    void encode_piece(std::string_view piece, std::vector<int32_t>& out) const {
        std::vector<std::string> symbols;
        for (unsigned char b : piece) symbols.push_back(byte_symbol_[b]);
        // Merge the lowest-ranked adjacent pair until none is a known merge.
        for (;;) {
            int best_rank = INT_MAX;
            size_t best = 0;
            for (size_t i = 0; i + 1 < symbols.size(); ++i) {
                const auto it = ranks_.find(symbols[i] + " " + symbols[i + 1]);
                if (it != ranks_.end() && it->second < best_rank) {
                    best_rank = it->second;
                    best = i;
                }
            }
            if (best_rank == INT_MAX) break;
            symbols[best] += symbols[best + 1];
            symbols.erase(symbols.begin() + static_cast<long>(best) + 1);
        }
        for (const auto& s : symbols) {
            const auto it = vocab_.token_to_id.find(s);
            if (it != vocab_.token_to_id.end()) {
                out.push_back(it->second);
            } else if (vocab_.unk_id >= 0) {
                out.push_back(vocab_.unk_id);
            }
        }
    }

    std::string byte_symbol_[256];
    std::map<std::string, uint8_t> symbol_byte_;
    std::unordered_map<std::string, int> ranks_;
    pcre2_code* regex_ = nullptr;
    pcre2_match_data* match_ = nullptr;  // encode is const but single-threaded per tokenizer
};

}  // namespace

std::unique_ptr<Tokenizer> make_bpe_tokenizer(Vocab vocab) { return std::make_unique<BpeTokenizer>(std::move(vocab)); }

}  // namespace tessera

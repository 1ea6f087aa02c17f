#include "model/tokenizer.h"

#include "model/tokenizer_impl.h"

namespace tessera {

std::unique_ptr<Tokenizer> make_tokenizer(Vocab vocab) {
    return vocab.kind == VocabKind::Spm ? make_spm_tokenizer(std::move(vocab)) : make_bpe_tokenizer(std::move(vocab));
}

namespace {

// Length of the sequence a UTF-8 lead byte starts, or 0 if it cannot start one.
size_t sequence_length(unsigned char lead) {
    if (lead < 0x80) return 1;
    if (lead >= 0xc2 && lead <= 0xdf) return 2;
    if (lead >= 0xe0 && lead <= 0xef) return 3;
    if (lead >= 0xf0 && lead <= 0xf4) return 4;
    return 0;
}

}  // namespace

StreamDecoder::StreamDecoder(const Tokenizer& tokenizer, bool at_text_start)
    : tokenizer_(tokenizer),
      strip_leading_space_(at_text_start && tokenizer.vocab().kind == VocabKind::Spm &&
                           tokenizer.vocab().add_space_prefix) {}

std::string StreamDecoder::push(int32_t id) {
    std::string piece = tokenizer_.token_to_piece(id);
    if (strip_leading_space_ && !piece.empty()) {
        if (piece[0] == ' ') piece.erase(0, 1);
        strip_leading_space_ = false;
    }
    pending_ += piece;
    // Emit every complete character; keep an incomplete tail; replace bytes
    // that can never form a character with U+FFFD.
    std::string out;
    size_t i = 0;
    while (i < pending_.size()) {
        const size_t len = sequence_length(static_cast<unsigned char>(pending_[i]));
        if (len == 0) {
            out += "\xef\xbf\xbd";
            ++i;
            continue;
        }
        if (i + len > pending_.size()) {
            bool valid_so_far = true;
            for (size_t k = i + 1; k < pending_.size(); ++k) valid_so_far &= (static_cast<unsigned char>(pending_[k]) & 0xc0) == 0x80;
            if (valid_so_far) break;  // wait for the rest of the character
            out += "\xef\xbf\xbd";
            ++i;
            continue;
        }
        bool valid = true;
        for (size_t k = 1; k < len; ++k) valid &= (static_cast<unsigned char>(pending_[i + k]) & 0xc0) == 0x80;
        if (!valid) {
            out += "\xef\xbf\xbd";
            ++i;
            continue;
        }
        out.append(pending_, i, len);
        i += len;
    }
    pending_.erase(0, i);
    return out;
}

std::string StreamDecoder::flush() {
    std::string out;
    for (size_t i = 0; i < pending_.size(); ++i) out += "\xef\xbf\xbd";
    pending_.clear();
    return out;
}

std::string decode(const Tokenizer& tokenizer, const std::vector<int32_t>& ids, bool at_text_start) {
    StreamDecoder stream(tokenizer, at_text_start);
    std::string out;
    for (int32_t id : ids) out += stream.push(id);
    return out + stream.flush();
}

}  // namespace tessera

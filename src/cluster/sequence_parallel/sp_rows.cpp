#include "cluster/sequence_parallel/sp_rows.h"

#include "util/error.h"

namespace tessera {

SpRowCodec::SpRowCodec(SliceForward& forward, const KvCodebooks* books) : forward_(forward), books_(books) {}

uint64_t SpRowCodec::body_bytes(int n) const {
    return books_ != nullptr ? books_->packed_bytes(n) : forward_.kv_rows_bytes(n);
}

void SpRowCodec::encode(int layer, int pos0, int n, std::vector<uint8_t>& out) {
    if (books_ != nullptr) {
        const size_t width = static_cast<size_t>(books_->kv_dim());
        k_.resize(static_cast<size_t>(n) * width);
        v_.resize(k_.size());
        forward_.read_kv_floats(layer, pos0, n, k_.data(), v_.data());
        books_->encode(layer, n, k_.data(), v_.data(), rows_);
    } else {
        forward_.read_kv_rows(layer, pos0, n, rows_);
    }
    out.resize(kSpRowsHeaderBytes);
    encode_sp_rows_header({layer, pos0, n}, out.data());
    out.insert(out.end(), rows_.begin(), rows_.end());
}

void SpRowCodec::store(const SpRowsHeader& h, std::span<const uint8_t> payload, const std::string& peer) {
    const std::span<const uint8_t> body = payload.subspan(kSpRowsHeaderBytes);
    if (body.size() != body_bytes(h.n)) {
        throw make_error("{}: {} bytes of {} KV rows for {} positions, {} expected", peer, body.size(),
                         books_ != nullptr ? "compressed" : "exact", h.n, body_bytes(h.n));
    }
    if (books_ == nullptr) {
        forward_.write_kv_rows(h.layer, h.pos0, h.n, body);
        return;
    }
    const size_t width = static_cast<size_t>(books_->kv_dim());
    k_.resize(static_cast<size_t>(h.n) * width);
    v_.resize(k_.size());
    try {
        books_->decode(h.layer, h.n, body, k_.data(), v_.data());
    } catch (const Error& e) {
        throw make_error("{}: {}", peer, e.what());
    }
    forward_.write_kv_floats(h.layer, h.pos0, h.n, k_.data(), v_.data());
}

}  // namespace tessera

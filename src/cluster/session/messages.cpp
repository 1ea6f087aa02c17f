#include "cluster/session/messages.h"

#include "cluster/tensor_parallel/fixed_rows.h"

#include "ops/quant_traits.h"
#include "util/checked.h"
#include "util/error.h"
#include "util/little_endian.h"

#include <cmath>
#include <cstring>

namespace tessera {

const char* tp_message_name(uint16_t type) {
    switch (static_cast<SessionMessage>(type)) {
        case SessionMessage::kHello: return "hello";
        case SessionMessage::kHelloReply: return "hello-reply";
        case SessionMessage::kAssign: return "assign";
        case SessionMessage::kReady: return "ready";
        case SessionMessage::kSliceData: return "slice-data";
        case SessionMessage::kSliceEnd: return "slice-end";
        case SessionMessage::kSliceBegin: return "slice-begin";
        case SessionMessage::kResidual: return "residual";
        case SessionMessage::kMeshHello: return "mesh-hello";
        case SessionMessage::kPartial: return "partial";
        case SessionMessage::kStageInput: return "stage-input";
        case SessionMessage::kLogits: return "logits";
        case SessionMessage::kStageHello: return "stage-hello";
        case SessionMessage::kHead: return "head";
        case SessionMessage::kSeqRuns: return "seq-runs";
        case SessionMessage::kLinkProbe: return "link-probe";
        case SessionMessage::kShift: return "shift";
        case SessionMessage::kHeartbeat: return "heartbeat";
        case SessionMessage::kError: return "error";
        case SessionMessage::kShutdown: return "shutdown";
        case SessionMessage::kMass: return "attention-mass";
        case SessionMessage::kSpChunk: return "sp-chunk";
        case SessionMessage::kSpRows: return "sp-rows";
        case SessionMessage::kStatus: return "status";
        case SessionMessage::kStatusReply: return "status-reply";
        case SessionMessage::kHeadNeed: return "head-need";
        case SessionMessage::kCandidates: return "candidates";
    }
    return "unknown";
}

const char* wire_format_name(WireFormat format) {
    switch (format) {
        case WireFormat::F32: return "f32";
        case WireFormat::F16: return "f16";
        case WireFormat::Q8_0: return "q8_0";
        case WireFormat::Fixed: return "fixed";
    }
    return "unknown";
}

uint64_t wire_rows_bytes(WireFormat format, uint32_t width, uint32_t n_tok) {
    // Checked: width and n_tok come from the wire, and 4 * 2^31 * 2^31 wraps.
    const uint64_t cells = checked_mul(width, n_tok, "a step's rows");
    switch (format) {
        case WireFormat::F32: return checked_mul(cells, 4, "a step's rows");
        case WireFormat::F16: return checked_mul(cells, 2, "a step's rows");
        case WireFormat::Q8_0: return checked_mul(quant_row_bytes(QuantType::Q8_0, width), n_tok, "a step's rows");
        case WireFormat::Fixed: return fixed_rows_max_bytes(cells);  // at most; the blocks say
    }
    throw make_error("unknown wire format {}", static_cast<int>(format));
}

namespace {

// Writes the header and sizes out for the body; returns the body's start.
uint8_t* begin_step(const StepHeader& h, std::vector<uint8_t>& out) {
    const uint64_t body = wire_rows_bytes(h.format, h.width, h.n_tok);
    out.resize(kStepHeaderBytes + body);
    uint8_t* p = out.data();
    store_u32(p, h.layer);
    store_u32(p + 4, h.pos0);
    store_u32(p + 8, h.n_tok);
    store_u32(p + 12, h.width);
    store_u32(p + 16, static_cast<uint32_t>(h.format) | static_cast<uint32_t>(h.flags) << 16);
    return p + kStepHeaderBytes;
}

// Parses and checks the header of a step payload; returns the body's start.
const uint8_t* parse_step(std::span<const uint8_t> payload, StepHeader& h, const char* peer) {
    if (payload.size() < kStepHeaderBytes) throw make_error("{}: step message of {} bytes is truncated", peer, payload.size());
    const uint8_t* p = payload.data();
    h.layer = load_u32(p);
    h.pos0 = load_u32(p + 4);
    h.n_tok = load_u32(p + 8);
    h.width = load_u32(p + 12);
    const uint32_t word = load_u32(p + 16);
    const uint32_t format = word & 0xffff;
    if (format > static_cast<uint32_t>(WireFormat::Fixed)) throw make_error("{}: unknown row format {}", peer, format);
    h.format = static_cast<WireFormat>(format);
    h.flags = static_cast<uint16_t>(word >> 16);
    if ((h.flags & ~kStepOverRuns) != 0) throw make_error("{}: unknown step flags {:#x}", peer, h.flags);
    // Every step carries at least one row of at least one value (fuzzing
    // found an empty one reaching memcpy with a null destination).
    if (h.n_tok == 0 || h.width == 0) throw make_error("{}: step of {} rows x {} is empty", peer, h.n_tok, h.width);
    if (h.format == WireFormat::Q8_0 && h.width % 32 != 0) {
        throw make_error("{}: Q8_0 rows of width {} (not a multiple of 32)", peer, h.width);
    }
    uint64_t body = 0;
    try {
        body = wire_rows_bytes(h.format, h.width, h.n_tok);
    } catch (const Error&) {
        throw make_error("{}: step of {} rows x {} is impossibly large", peer, h.n_tok, h.width);
    }
    // Exact partials take what their blocks need (fixed_rows.h): no more
    // than the widest blocks, no less than a byte per block.
    const uint64_t have = payload.size() - kStepHeaderBytes;
    if (h.format == WireFormat::Fixed && have <= body && have >= (static_cast<uint64_t>(h.width) * h.n_tok + kFixedBlock - 1) / kFixedBlock) {
        return p + kStepHeaderBytes;
    }
    if (body != have) {
        throw make_error("{}: step of {} rows x {} ({}) needs {} bytes, the message has {}", peer, h.n_tok, h.width,
                         wire_format_name(h.format), body, payload.size() - kStepHeaderBytes);
    }
    return p + kStepHeaderBytes;
}
}  // namespace

const char* partial_topology_name(PartialTopology t) {
    return t == PartialTopology::kReduceScatter ? "reduce-scatter" : "all-to-all";
}

PartialTopology parse_partial_topology(const std::string& name) {
    if (name == "all-to-all") return PartialTopology::kAllToAll;
    if (name == "reduce-scatter") return PartialTopology::kReduceScatter;
    throw make_error("unknown exchange '{}' (all-to-all or reduce-scatter)", name);
}

void encode_exact_step(const StepHeader& h, const double* rows, std::vector<uint8_t>& out) {
    if (h.format != WireFormat::Fixed) throw make_error("internal: exact rows encoded as {}", wire_format_name(h.format));
    begin_step(h, out);
    out.resize(kStepHeaderBytes);
    encode_fixed_rows(rows, static_cast<size_t>(h.width) * h.n_tok, out);
}

StepHeader decode_exact_step(std::span<const uint8_t> payload, std::vector<double>& rows, const char* peer,
                             uint64_t max_values) {
    StepHeader h;
    const uint8_t* src = parse_step(payload, h, peer);
    if (h.format != WireFormat::Fixed) {
        throw make_error("{}: {} rows where exact partials were due", peer, wire_format_name(h.format));
    }
    if (static_cast<uint64_t>(h.width) * h.n_tok > max_values) {
        throw make_error("{}: exact partial of {} rows x {} where at most {} values were due", peer, h.n_tok, h.width,
                         max_values);
    }
    rows.resize(static_cast<size_t>(h.width) * h.n_tok);
    decode_fixed_rows(payload.subspan(static_cast<size_t>(src - payload.data())), rows.size(), rows.data(), peer);
    return h;
}

void encode_step(const StepHeader& h, const float* rows, std::vector<uint8_t>& out) {
    if (h.format == WireFormat::Fixed) throw make_error("internal: float rows encoded as exact partials");
    uint8_t* dst = begin_step(h, out);
    const size_t n = static_cast<size_t>(h.width) * h.n_tok;
    switch (h.format) {
        case WireFormat::F32:
            std::memcpy(dst, rows, n * 4);
            break;
        case WireFormat::F16:
            // F16 rows are plain arrays of halves: the SIMD conversion, not a
            // scalar loop on every sync.
            require_compute_traits(QuantType::F16, "wire").from_float(rows, dst, static_cast<int64_t>(n));
            break;
        case WireFormat::Q8_0: {
            const QuantTraits& q8 = require_compute_traits(QuantType::Q8_0, "wire");
            const uint64_t row_bytes = quant_row_bytes(QuantType::Q8_0, h.width);
            for (uint32_t t = 0; t < h.n_tok; ++t) q8.from_float(rows + static_cast<size_t>(t) * h.width, dst + t * row_bytes, h.width);
            break;
        }
        case WireFormat::Fixed:
            break;  // refused above
    }
}

StepHeader decode_step(std::span<const uint8_t> payload, std::vector<float>& rows, const char* peer) {
    StepHeader h;
    const uint8_t* src = parse_step(payload, h, peer);
    if (h.format == WireFormat::Fixed) throw make_error("{}: exact partial rows where float rows were due", peer);
    const size_t n = static_cast<size_t>(h.width) * h.n_tok;
    rows.resize(n);
    switch (h.format) {
        case WireFormat::F32:
            std::memcpy(rows.data(), src, n * 4);
            break;
        case WireFormat::F16:
            require_compute_traits(QuantType::F16, "wire").to_float(src, rows.data(), static_cast<int64_t>(n));
            break;
        case WireFormat::Q8_0: {
            const QuantTraits& q8 = require_compute_traits(QuantType::Q8_0, "wire");
            const uint64_t row_bytes = quant_row_bytes(QuantType::Q8_0, h.width);
            for (uint32_t t = 0; t < h.n_tok; ++t) q8.to_float(src + t * row_bytes, rows.data() + static_cast<size_t>(t) * h.width, h.width);
            break;
        }
        case WireFormat::Fixed:
            break;  // refused above
    }
    return h;
}

namespace {
// Bits of T's exponent field: all ones means infinite or NaN.
template <class T, class Bits>
void check_finite(const T* values, size_t n, const std::string& peer, Bits exponent) {
    // Integer tests with no early exit vectorize (a float compare chain
    // would not without fast-math); the index is found only on failure.
    Bits bad = 0;
    for (size_t i = 0; i < n; ++i) {
        Bits bits;
        std::memcpy(&bits, values + i, sizeof bits);
        bad |= static_cast<Bits>((bits & exponent) == exponent);
    }
    if (bad == 0) return;
    for (size_t i = 0; i < n; ++i) {
        if (!std::isfinite(values[i])) {
            throw make_error("{} sent a non-finite value ({} at index {} of {}): refusing its result", peer,
                             static_cast<double>(values[i]), i, n);
        }
    }
}
}  // namespace

void encode_seq_runs(std::span<const SeqRun> runs, std::vector<uint8_t>& out) {
    out.resize(4 + kSeqRunBytes * runs.size());
    store_u32(out.data(), static_cast<uint32_t>(runs.size()));
    for (size_t i = 0; i < runs.size(); ++i) {
        uint8_t* p = out.data() + 4 + kSeqRunBytes * i;
        store_u32(p, static_cast<uint32_t>(runs[i].seq));
        store_u32(p + 4, static_cast<uint32_t>(runs[i].pos0));
        store_u32(p + 8, static_cast<uint32_t>(runs[i].n_tok));
        store_u32(p + 12, runs[i].all_logits ? 1u : 0u);
    }
}

std::vector<SeqRun> decode_seq_runs(std::span<const uint8_t> payload, const char* peer) {
    if (payload.size() < 4) throw make_error("{}: seq-runs message of {} bytes is truncated", peer, payload.size());
    const uint32_t count = load_u32(payload.data());
    if (count < 1 || count > kMaxSeqRuns) throw make_error("{}: {} runs in one batch (1..{})", peer, count, kMaxSeqRuns);
    if (payload.size() != 4 + kSeqRunBytes * static_cast<uint64_t>(count)) {
        throw make_error("{}: seq-runs message of {} runs has {} bytes", peer, count, payload.size());
    }
    std::vector<SeqRun> runs(count);
    for (uint32_t i = 0; i < count; ++i) {
        const uint8_t* p = payload.data() + 4 + kSeqRunBytes * static_cast<size_t>(i);
        const uint32_t seq = load_u32(p), pos0 = load_u32(p + 4), n_tok = load_u32(p + 8), all = load_u32(p + 12);
        // Bounded here so the int fields cannot wrap; the receiver checks
        // them against its sequences and context.
        if (seq > kMaxSeqRuns || pos0 > (1u << 30) || n_tok < 1 || n_tok > (1u << 30) || all > 1) {
            throw make_error("{}: run {} (sequence {}, position {}, {} rows, flag {}) is out of range", peer, i, seq, pos0,
                             n_tok, all);
        }
        runs[i] = {static_cast<int>(seq), static_cast<int>(pos0), static_cast<int>(n_tok), all == 1};
    }
    return runs;
}

void encode_compaction(int seq, std::span<const int> kept, int n_used, std::vector<uint8_t>& out) {
    out.resize(12 + 4 * kept.size());
    store_u32(out.data(), static_cast<uint32_t>(seq));
    store_u32(out.data() + 4, static_cast<uint32_t>(n_used));
    store_u32(out.data() + 8, static_cast<uint32_t>(kept.size()));
    for (size_t j = 0; j < kept.size(); ++j) store_u32(out.data() + 12 + 4 * j, static_cast<uint32_t>(kept[j]));
}

ContextCompaction decode_compaction(std::span<const uint8_t> payload, const char* peer) {
    if (payload.size() < 12) throw make_error("{}: shift message of {} bytes is truncated", peer, payload.size());
    const uint32_t seq = load_u32(payload.data()), n_used = load_u32(payload.data() + 4), count = load_u32(payload.data() + 8);
    if (seq > kMaxSeqRuns || n_used > (1u << 30) || count > n_used) {
        throw make_error("{}: shift of sequence {} keeping {} of {} positions is out of range", peer, seq, count, n_used);
    }
    if (payload.size() != 12 + 4 * static_cast<uint64_t>(count)) {
        throw make_error("{}: shift message keeping {} positions has {} bytes", peer, count, payload.size());
    }
    ContextCompaction c{static_cast<int>(seq), static_cast<int>(n_used), std::vector<int>(count)};
    for (uint32_t j = 0; j < count; ++j) {
        const uint32_t p = load_u32(payload.data() + 12 + 4 * static_cast<size_t>(j));
        if (p >= n_used) throw make_error("{}: shift keeps position {} of {}", peer, p, n_used);
        c.kept[j] = static_cast<int>(p);
    }
    return c;
}

void encode_mass_request(int seq, int n_used, const int64_t* totals, std::vector<uint8_t>& out) {
    out.resize(8 + (totals != nullptr ? 8 * static_cast<size_t>(n_used) : 0));
    store_u32(out.data(), static_cast<uint32_t>(seq));
    store_u32(out.data() + 4, static_cast<uint32_t>(n_used));
    if (totals != nullptr) std::memcpy(out.data() + 8, totals, 8 * static_cast<size_t>(n_used));
}

MassRequest decode_mass_request(std::span<const uint8_t> payload, const char* peer) {
    if (payload.size() < 8) throw make_error("{}: attention request of {} bytes is truncated", peer, payload.size());
    const uint32_t seq = load_u32(payload.data()), n_used = load_u32(payload.data() + 4);
    if (seq > kMaxSeqRuns || n_used > (1u << 30)) {
        throw make_error("{}: attention request of sequence {}, {} positions is out of range", peer, seq, n_used);
    }
    MassRequest r{static_cast<int>(seq), static_cast<int>(n_used), {}};
    if (payload.size() != 8) {
        if (payload.size() != 8 + 8 * static_cast<uint64_t>(n_used)) {
            throw make_error("{}: attention request of {} positions has {} bytes", peer, n_used, payload.size());
        }
        r.totals.resize(n_used);
        std::memcpy(r.totals.data(), payload.data() + 8, 8 * static_cast<size_t>(n_used));
        for (const int64_t v : r.totals) {
            if (v < 0 || v > (int64_t{1} << 56)) throw make_error("{}: attention total {} is out of range", peer, v);
        }
    }
    return r;
}

void encode_mass(const int64_t* totals, int n, std::vector<uint8_t>& out) {
    out.resize(8 * static_cast<size_t>(n));
    std::memcpy(out.data(), totals, out.size());
}

void add_mass(std::span<const uint8_t> payload, int n, int64_t* out, const char* peer) {
    if (payload.size() != 8 * static_cast<uint64_t>(n)) {
        throw make_error("{}: attention of {} bytes where {} positions were asked", peer, payload.size(), n);
    }
    for (int p = 0; p < n; ++p) {
        int64_t v;
        std::memcpy(&v, payload.data() + 8 * static_cast<size_t>(p), 8);
        if (v < 0 || v > (int64_t{1} << 56)) throw make_error("{}: attention {} at position {} is out of range", peer, v, p);
        out[p] += v;
    }
}

void encode_sp_chunk(int pos0, uint32_t flags, std::span<const int32_t> tokens, std::vector<uint8_t>& out) {
    out.resize(12 + 4 * tokens.size());
    store_u32(out.data(), static_cast<uint32_t>(pos0));
    store_u32(out.data() + 4, flags);
    store_u32(out.data() + 8, static_cast<uint32_t>(tokens.size()));
    for (size_t i = 0; i < tokens.size(); ++i) store_u32(out.data() + 12 + 4 * i, static_cast<uint32_t>(tokens[i]));
}

SpChunk decode_sp_chunk(std::span<const uint8_t> payload, const char* peer) {
    if (payload.size() < 12) throw make_error("{}: prompt chunk of {} bytes is truncated", peer, payload.size());
    const uint32_t pos0 = load_u32(payload.data()), flags = load_u32(payload.data() + 4), count = load_u32(payload.data() + 8);
    if (pos0 > (1u << 30) || count < 1 || count > (1u << 30) || (flags & ~kSpWantLogits) != 0) {
        throw make_error("{}: prompt chunk of {} tokens at {} (flags {}) is out of range", peer, count, pos0, flags);
    }
    if (payload.size() != 12 + 4 * static_cast<uint64_t>(count)) {
        throw make_error("{}: prompt chunk of {} tokens has {} bytes", peer, count, payload.size());
    }
    SpChunk c{static_cast<int>(pos0), flags, std::vector<int32_t>(count)};
    for (uint32_t i = 0; i < count; ++i) c.tokens[i] = static_cast<int32_t>(load_u32(payload.data() + 12 + 4 * static_cast<size_t>(i)));
    return c;
}

void encode_sp_rows_header(const SpRowsHeader& h, uint8_t* out) {
    store_u32(out, static_cast<uint32_t>(h.layer));
    store_u32(out + 4, static_cast<uint32_t>(h.pos0));
    store_u32(out + 8, static_cast<uint32_t>(h.n));
}

SpRowsHeader decode_sp_rows_header(std::span<const uint8_t> payload, const char* peer) {
    if (payload.size() < kSpRowsHeaderBytes) throw make_error("{}: KV rows message of {} bytes is truncated", peer, payload.size());
    const uint32_t layer = load_u32(payload.data()), pos0 = load_u32(payload.data() + 4), n = load_u32(payload.data() + 8);
    if (layer > 65535 || pos0 > (1u << 30) || n < 1 || n > (1u << 30)) {
        throw make_error("{}: KV rows of layer {}, positions {} + {} are out of range", peer, layer, pos0, n);
    }
    return {static_cast<int>(layer), static_cast<int>(pos0), static_cast<int>(n)};
}

void require_finite(const float* values, size_t n, const std::string& peer) {
    check_finite(values, n, peer, uint32_t{0x7f800000u});
}
void require_finite(const double* values, size_t n, const std::string& peer) {
    check_finite(values, n, peer, uint64_t{0x7ff0000000000000ull});
}

}  // namespace tessera

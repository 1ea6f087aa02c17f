// The frame decoder: a 24-byte header, then a step payload (header + rows in
// F32/F16/Q8_0 and packed exact partials), the other binary messages (a
// sampler's need and candidate logits among them) and the same bytes opened
// as a sealed frame.
#include "cluster/session/head_candidates.h"
#include "cluster/session/messages.h"
#include "model/kv_codebooks.h"
#include "net/frame.h"
#include "net/seal.h"
#include "util/error.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <span>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    using namespace tessera;
    if (size < kFrameHeaderBytes) return 0;
    FrameHeaderBytes hb;
    std::memcpy(hb.data(), data, hb.size());
    const std::span<const uint8_t> payload(data + kFrameHeaderBytes, size - kFrameHeaderBytes);
    try {
        (void)decode_frame_header(hb, 1u << 20, "fuzz");
    } catch (const Error&) {
    }
    std::vector<float> rows;
    std::vector<double> exact;
    try {
        const StepHeader h = decode_step(payload, rows, "fuzz");
        require_finite(rows.data(), rows.size(), "fuzz");
        (void)h;
    } catch (const Error&) {
    }
    try {
        // A batch's sequence table: decoded with every bound checked.
        for (const SeqRun& r : decode_seq_runs(payload, "fuzz")) {
            if (r.seq < 0 || r.pos0 < 0 || r.n_tok < 1) __builtin_trap();
        }
    } catch (const Error&) {
    }
    try {
        // A compaction's kept positions: each below n_used.
        const ContextCompaction c = decode_compaction(payload, "fuzz");
        for (int p : c.kept) {
            if (p < 0 || p >= c.n_used) __builtin_trap();
        }
    } catch (const Error&) {
    }
    try {
        // An attention request, and an answer of its size added to totals.
        const MassRequest r = decode_mass_request(payload, "fuzz");
        if (r.n_used <= 4096) {
            std::vector<int64_t> totals(static_cast<size_t>(r.n_used), 0);
            add_mass(payload.subspan(std::min<size_t>(8, payload.size())), r.n_used, totals.data(), "fuzz");
        }
    } catch (const Error&) {
    }
    try {
        (void)decode_exact_step(payload, exact, "fuzz");
        require_finite(exact.data(), exact.size(), "fuzz");
    } catch (const Error&) {
    }
    try {
        // A prompt chunk of sequence-parallel prefill.
        const SpChunk c = decode_sp_chunk(payload, "fuzz");
        if (c.tokens.empty() || c.pos0 < 0) __builtin_trap();
    } catch (const Error&) {
    }
    try {
        const SpRowsHeader h = decode_sp_rows_header(payload, "fuzz");
        if (h.n < 1 || h.pos0 < 0 || h.layer < 0) __builtin_trap();
    } catch (const Error&) {
    }
    try {
        // A sampler's need, then candidate logits under it placed in rows
        // of a 300-token vocabulary (columns 100..299): never outside them.
        LogitsNeed need;
        if (decode_logits_need(payload, 300, need, "fuzz")) {
            if (need.top_k < 1 || need.top_k > LogitsNeed::kMaxTopK) __builtin_trap();
        } else {
            need.top_k = 3;
            need.tokens = {120, 250};
        }
        std::vector<float> logits(2 * 310, 1.0f);
        place_candidates(payload, 2, 200, 100, need, logits.data(), 310, "fuzz");
        for (size_t t = 0; t < 2; ++t) {
            for (size_t c = 0; c < 310; ++c) {
                const float v = logits[t * 310 + c];
                if ((c < 100 || c >= 300) ? v != 1.0f : !(std::isfinite(v) || v == -INFINITY)) __builtin_trap();
            }
        }
    } catch (const Error&) {
    }
    {
        // Packed codebook indices (3 bits each, 5 codes: some values name no code).
        static const KvCodebooks books(1, 8, 2, 5, "fuzz");
        const int n = static_cast<int>(payload.size() * 8 / static_cast<size_t>(books.bits_per_position()));
        if (n > 0 && books.packed_bytes(n) == payload.size()) {
            std::vector<float> k(static_cast<size_t>(n) * 8), v(k.size());
            try {
                books.decode(0, n, payload, k.data(), v.data());
            } catch (const Error&) {
            }
        }
    }
    // A sealed frame's body: must fail authentication, never read past it.
    static const SessionKeys keys = [] {
        SessionKeys k;
        k.send.fill(1);
        k.recv.fill(2);
        return k;
    }();
    static const auto codec = make_sealing_codec(keys, "fuzz");
    if (payload.size() >= kSealTagBytes) {
        std::vector<uint8_t> body(payload.begin(), payload.end());
        FrameHeader header;
        header.sequence = payload.size();
        try {
            codec->open(header, hb, body);
        } catch (const Error&) {
        }
    }
    return 0;
}

#include "cluster/sequence_parallel/kv_handoff.h"

#include "util/error.h"

namespace tessera {

uint64_t HeldKvRows::bytes() const {
    uint64_t total = 0;
    for (const auto& layer : layers) total += layer.size();
    return total;
}

HeldKvRows take_kv_rows(const SliceForward& from, const Slice& to, int positions) {
    const Slice& have = from.slice();
    if (to.layer_begin < have.layer_begin || to.layer_end > have.layer_end || to.kv_head_begin < have.kv_head_begin ||
        to.kv_head_end > have.kv_head_end || positions < 0 || positions > from.n_ctx()) {
        throw make_error("internal: the rows of {} ({} positions) from a cache of {}", describe_slice(to), positions,
                         describe_slice(have));
    }
    HeldKvRows rows;
    rows.slice = to;
    rows.positions = positions;
    rows.layers.resize(static_cast<size_t>(to.n_layers()));
    for (int layer = to.layer_begin; layer < to.layer_end; ++layer) {
        from.read_kv_rows(layer, 0, positions, to.kv_head_begin, to.kv_head_end,
                          rows.layers[static_cast<size_t>(layer - to.layer_begin)]);
    }
    return rows;
}

void put_kv_rows(SliceForward& to, const HeldKvRows& rows) {
    const Slice& s = to.slice();
    if (s.layer_begin != rows.slice.layer_begin || s.layer_end != rows.slice.layer_end ||
        s.kv_head_begin != rows.slice.kv_head_begin || s.kv_head_end != rows.slice.kv_head_end) {
        throw make_error("internal: rows of {} put into a slice of {}", describe_slice(rows.slice), describe_slice(s));
    }
    if (rows.positions == 0) return;
    for (int layer = s.layer_begin; layer < s.layer_end; ++layer) {
        to.write_kv_rows(layer, 0, rows.positions, rows.layers[static_cast<size_t>(layer - s.layer_begin)]);
    }
}

}  // namespace tessera

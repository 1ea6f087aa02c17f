// Elements of cached K and V rows decoded as the CPU's to_float decodes
// them (kv_rows.glsl's layouts). Include after declaring the caches as
// `kc` and `vc` (uint words) and push constants `p` with `head_dim`.

uint word_at(bool is_k, uint at) { return is_k ? kc[at] : vc[at]; }
uint byte_at(bool is_k, uint at) { return (word_at(is_k, at >> 2) >> ((at & 3u) * 8u)) & 0xffu; }
// Where element i's block starts, in bytes (a block type's row).
uint block_at(uint type, uint row, uint i) {
    return row * row_words(type, p.head_dim) * 4u + (i / 32u) * (type == kQ8_0 ? 34u : 18u);
}
float block_scale(bool is_k, uint o) { return unpackHalf2x16(byte_at(is_k, o) | (byte_at(is_k, o + 1u) << 8)).x; }
// Element i's code: Q8_0's signed byte, or Q4_0's nibble minus 8.
int block_code(bool is_k, uint type, uint o, uint i) {
    const uint j = i % 32u;
    if (type == kQ8_0) return int(byte_at(is_k, o + 2u + j) << 24) >> 24;
    const uint b = byte_at(is_k, o + 2u + j % 16u);
    return int(j < 16u ? (b & 15u) : (b >> 4)) - 8;
}

float cached(uint type, uint row, uint i, bool is_k) {
    const uint words = row_words(type, p.head_dim);
    if (type == kF32) return uintBitsToFloat(word_at(is_k, row * words + i));
    if (type == kF16) return unpackHalf2x16(word_at(is_k, row * words + i / 2u) >> (16u * (i % 2u))).x;
    const uint o = block_at(type, row, i);
    precise float v = block_scale(is_k, o) * float(block_code(is_k, type, o, i));
    return v;
}


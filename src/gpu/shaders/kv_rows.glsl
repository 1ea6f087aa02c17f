// The rows of a KV cache on the device: [kv_head][position] rows of head_dim
// values, each row in the cache's type and padded to whole words (so rows of
// Q8_0 and Q4_0 blocks never share a word): F32 (0), F16 (1), Q8_0 (2, 34
// bytes a block of 32), Q4_0 (3, 18 bytes a block). Elements decode as the
// CPU's to_float gives them (a block's d times its code, rounded once).
const uint kF32 = 0u, kF16 = 1u, kQ8_0 = 2u, kQ4_0 = 3u;

uint row_words(uint type, uint head_dim) {
    if (type == kF32) return head_dim;
    if (type == kF16) return head_dim / 2u;
    const uint bytes = head_dim / 32u * (type == kQ8_0 ? 34u : 18u);
    return (bytes + 3u) / 4u;
}

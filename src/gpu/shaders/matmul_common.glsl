// What every matrix product shader shares: its parameters and which dot an
// invocation computes. A product of `rows` weight rows by `tokens` activation
// rows; each row's columns (from block col_begin on) are cut into `units`
// dots of `blocks` blocks each (F32/F16: elements; the last one what is
// left of n_blocks), every dot in the
// canonical order from zero: units = 1 is the plain product, more are the
// reduction units of wo and w_down (model/reduction_units.h) that
// add_units.comp snaps and sums. Invocation x = r * units + u, y = token t;
// the dot goes to y[t * y_stride + r * units + u]. Activation rows hold only
// the product's own columns (x_stride blocks or floats apart).
#include "exact_fma.glsl"

layout(local_size_x = 64) in;
layout(std430, set = 0, binding = 0) readonly buffer W { uint w[]; };
layout(std430, set = 0, binding = 2) writeonly buffer Y { float y[]; };
layout(push_constant) uniform Params {
    uint blocks;      // blocks (F32/F16: elements) of one dot
    uint units;       // dots per row
    uint rows;
    uint row_blocks;  // blocks (elements) of a whole weight row
    uint col_begin;   // the first block (element) of a row this product reads; a multiple of
                      // row_blocks skips that many whole rows (an expert's band of a stacked matrix)
    uint x_stride;    // one activation row, in blocks (F32/F16: floats)
    uint y_stride;    // one output row, in floats
    uint tokens;
    uint n_blocks;    // blocks (elements) of the whole product: the last unit takes what is left
    uint x_begin;     // the first activation row it reads (token t reads row x_begin + t)
    uint y_begin;     // where its output starts in y, in floats
} p;

uint w_byte(uint o) { return (w[o >> 2] >> ((o & 3u) * 8u)) & 0xffu; }
int signed_byte(uint b) { return int(b << 24) >> 24; }

// The dot of weight row r's blocks [first, first + count) (counted from
// col_begin) with activation row t's same blocks.
float unit_dot(uint r, uint t, uint first, uint count);

void main() {
    const uint g = gl_GlobalInvocationID.x;
    const uint t = gl_GlobalInvocationID.y;
    if (g >= p.rows * p.units || t >= p.tokens) return;
    const uint r = g / p.units, u = g % p.units;
    const uint first = u * p.blocks;
    y[p.y_begin + t * p.y_stride + g] = unit_dot(r, p.x_begin + t, first, min(p.blocks, p.n_blocks - first));
}

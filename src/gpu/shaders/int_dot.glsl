// Packed 4x8-bit integer dot products (VK_KHR_shader_integer_dot_product)
// for the block products' exact integer sums. Built twice by CMake: with
// INTEGER_DOT, the SPIR-V instructions OpSDot and OpSUDot (glslang 11 has
// no GL_EXT_integer_dot_product, so they are declared through
// GL_EXT_spirv_intrinsics); without it, nothing: the shader keeps its plain
// byte-by-byte sums, for devices without the instructions (a module
// declaring their capability would not load there). The sums are exact
// integers either way, so the two give the same bits. Include it before any
// declaration: it brings an #extension.
#ifdef INTEGER_DOT
#extension GL_EXT_spirv_intrinsics : require
// The operand PackedVectorFormat4x8Bit (0): each uint holds four bytes.
spirv_instruction(extensions = ["SPV_KHR_integer_dot_product"], capabilities = [6019, 6018], id = 4450)
int spv_sdot(uint a, uint b, spirv_literal int packed_format);
spirv_instruction(extensions = ["SPV_KHR_integer_dot_product"], capabilities = [6019, 6018], id = 4452)
int spv_sudot(uint a, uint b, spirv_literal int packed_format);
// sum over the four bytes of signed a[i] * signed b[i]
int dot4_signed(uint a, uint b) { return spv_sdot(a, b, 0); }
// sum over the four bytes of signed a[i] * unsigned b[i]
int dot4_mixed(uint a, uint b) { return spv_sudot(a, b, 0); }
// Four signed codes (each within a byte) packed for dot4_signed.
uint pack4(int a, int b, int c, int d) {
    return (uint(a) & 0xffu) | ((uint(b) & 0xffu) << 8) | ((uint(c) & 0xffu) << 16) | (uint(d) << 24);
}
#endif

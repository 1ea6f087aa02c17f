// quant_dump: writes one GGUF per ggml quant type containing a fixed input, its
// quantization (ggml_quantize_chunk), the dequantization (type_traits->to_float)
// and CPU-backend vec_dot results against a few activation rows.
//
//   quant_dump <out_dir> [source-string]   -> writes <out_dir>/<TYPE>.gguf
//   quant_dump --check <file.gguf>...       -> reads files back, prints metadata /
//                                              tensors, re-verifies dequant + dot
//
// Links against ggml-base + ggml-cpu of a llama.cpp build, outside this
// repository (tests/data/SOURCES.md names the commit):
//   cmake -S LLAMA -B LLAMA/build -G Ninja -DCMAKE_BUILD_TYPE=Release -DLLAMA_CURL=OFF -DGGML_NATIVE=ON
//   ninja -C LLAMA/build ggml-base ggml-cpu
//   g++ -std=c++17 -O2 -ILLAMA/ggml/include tools/quant_dump/quant_dump.cpp -o quant_dump \
//       -LLLAMA/build/bin -lggml-base -lggml-cpu -Wl,-rpath,LLAMA/build/bin
//   ./quant_dump tests/data/quant
// CMake never builds it: the tests read its output, committed.

#include "ggml.h"
#include "ggml-cpu.h"
#include "gguf.h"

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

static const int64_t NCOL   = 512; // elements per row
static const int64_t NROW   = 8;   // rows of `input` / `quantized`
static const int64_t NACT   = 4;   // activation rows in `x`

// ---------------------------------------------------------------------------
// deterministic RNG: 64-bit LCG (Knuth MMIX constants), uniform from top 24 bits
// ---------------------------------------------------------------------------
struct lcg {
    uint64_t s;
    explicit lcg(uint64_t seed) : s(seed) {}
    uint32_t next24() {
        s = s * 6364136223846793005ULL + 1442695040888963407ULL;
        return (uint32_t)(s >> 40);            // 24 bits
    }
    // uniform in [0,1), exact multiple of 2^-24
    double uniform() { return (double) next24() * (1.0 / 16777216.0); }
    // Irwin-Hall approximation of N(0,1): sum of 12 uniforms - 6
    float normal() {
        double acc = 0.0;
        for (int i = 0; i < 12; ++i) acc += uniform();
        return (float)(acc - 6.0);
    }
};

static const uint64_t SEED_INPUT = 0x5EED0001ULL;
static const uint64_t SEED_X     = 0x5EED0002ULL;

static void make_input(std::vector<float> & v) {
    v.assign(NROW * NCOL, 0.0f);
    lcg r(SEED_INPUT);
    float * row;
    // row 0: N(0,1)-ish
    row = &v[0 * NCOL]; for (int i = 0; i < NCOL; ++i) row[i] = r.normal();
    // row 1: same values as row 0 times 0.01
    row = &v[1 * NCOL]; for (int i = 0; i < NCOL; ++i) row[i] = v[i] * 0.01f;
    // row 2: uniform in [-1,1] times 50
    row = &v[2 * NCOL]; for (int i = 0; i < NCOL; ++i) row[i] = (float)((2.0 * r.uniform() - 1.0) * 50.0);
    // row 3: all zeros
    // row 4: all positive, |N(0,1)| (exact zero replaced by 1e-3 so it is strictly positive)
    row = &v[4 * NCOL]; for (int i = 0; i < NCOL; ++i) { float a = std::fabs(r.normal()); row[i] = a > 0.0f ? a : 1e-3f; }
    // row 5: N(0,1) with outliers +20,-20,+20,-20 at 7,100,300,511
    row = &v[5 * NCOL]; for (int i = 0; i < NCOL; ++i) row[i] = r.normal();
    row[7] = 20.0f; row[100] = -20.0f; row[300] = 20.0f; row[511] = -20.0f;
    // row 6: all negative, -|N(0,1)| (exact zero replaced by -1e-3)
    row = &v[6 * NCOL]; for (int i = 0; i < NCOL; ++i) { float a = std::fabs(r.normal()); row[i] = a > 0.0f ? -a : -1e-3f; }
    // row 7: ramp from -1 to 1 inclusive
    row = &v[7 * NCOL]; for (int i = 0; i < NCOL; ++i) row[i] = (float)(-1.0 + 2.0 * (double) i / (double)(NCOL - 1));
}

static void make_x(std::vector<float> & v) {
    v.assign(NACT * NCOL, 0.0f);
    lcg r(SEED_X);
    for (int c = 0; c < NACT; ++c) {
        for (int i = 0; i < NCOL; ++i) {
            float f = r.normal();
            v[c * NCOL + i] = c == 3 ? f * 10.0f : f;
        }
    }
}

struct type_entry { const char * name; ggml_type type; };
static const type_entry TYPES[] = {
    {"Q4_0",    GGML_TYPE_Q4_0},
    {"Q4_1",    GGML_TYPE_Q4_1},
    {"Q5_0",    GGML_TYPE_Q5_0},
    {"Q5_1",    GGML_TYPE_Q5_1},
    {"Q8_0",    GGML_TYPE_Q8_0},
    {"Q2_K",    GGML_TYPE_Q2_K},
    {"Q3_K",    GGML_TYPE_Q3_K},
    {"Q4_K",    GGML_TYPE_Q4_K},
    {"Q5_K",    GGML_TYPE_Q5_K},
    {"Q6_K",    GGML_TYPE_Q6_K},
    {"IQ4_NL",  GGML_TYPE_IQ4_NL},
    {"IQ4_XS",  GGML_TYPE_IQ4_XS},
    {"MXFP4",   GGML_TYPE_MXFP4},
    {"BF16",    GGML_TYPE_BF16},
    {"IQ3_XXS", GGML_TYPE_IQ3_XXS},
    {"IQ3_S",   GGML_TYPE_IQ3_S},
    {"IQ2_XXS", GGML_TYPE_IQ2_XXS},
    {"IQ2_XS",  GGML_TYPE_IQ2_XS},
    {"IQ2_S",   GGML_TYPE_IQ2_S},
    {"IQ1_S",   GGML_TYPE_IQ1_S},
    {"IQ1_M",   GGML_TYPE_IQ1_M},
    {"Q1_0",    GGML_TYPE_Q1_0},
    {"NVFP4",   GGML_TYPE_NVFP4},
    {"Q2_0",    GGML_TYPE_Q2_0},
    {"TQ1_0",   GGML_TYPE_TQ1_0},
    {"TQ2_0",   GGML_TYPE_TQ2_0},
};

// dot[c][r] = CPU vec_dot(quantized row r, from_float(x row c)), stored at c*NROW + r
static void compute_dot(ggml_type type, const uint8_t * q, const float * x, float * dot) {
    const ggml_type_traits_cpu * tc  = ggml_get_type_traits_cpu(type);
    const ggml_type              vdt = tc->vec_dot_type;
    const ggml_type_traits_cpu * tv  = ggml_get_type_traits_cpu(vdt);
    const size_t qrow_size = ggml_row_size(type, NCOL);
    const size_t xrow_size = ggml_row_size(vdt,  NCOL);
    std::vector<uint8_t> xq(xrow_size);
    for (int c = 0; c < NACT; ++c) {
        tv->from_float(x + c * NCOL, xq.data(), NCOL);
        for (int r = 0; r < NROW; ++r) {
            float s = 0.0f;
            tc->vec_dot((int) NCOL, &s, 0, q + r * qrow_size, 0, xq.data(), 0, 1);
            dot[c * NROW + r] = s;
        }
    }
}

static int dump(const char * out_dir, const std::string & source) {
    std::vector<float> input, x;
    make_input(input);
    make_x(x);

    int n_written = 0;
    for (const type_entry & te : TYPES) {
        const ggml_type type = te.type;
        const ggml_type_traits     * tt = ggml_get_type_traits(type);
        const ggml_type_traits_cpu * tc = ggml_get_type_traits_cpu(type);
        if (tt == nullptr || tt->to_float == nullptr || tc == nullptr || tc->vec_dot == nullptr) {
            fprintf(stderr, "skip %s: missing traits\n", te.name);
            continue;
        }
        const ggml_type vdt = tc->vec_dot_type;

        const size_t qsize = ggml_row_size(type, NCOL) * NROW;
        const size_t mem = (size_t)(NROW * NCOL * 4) * 2 + qsize + NACT * NCOL * 4 + NROW * NACT * 4 + 16 * ggml_tensor_overhead() + 4096;
        ggml_init_params ip = { mem, nullptr, false };
        ggml_context * ctx = ggml_init(ip);

        ggml_tensor * t_in  = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, NCOL, NROW);
        ggml_tensor * t_q   = ggml_new_tensor_2d(ctx, type,          NCOL, NROW);
        ggml_tensor * t_dq  = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, NCOL, NROW);
        ggml_tensor * t_x   = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, NCOL, NACT);
        ggml_tensor * t_dot = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, NROW, NACT);
        ggml_set_name(t_in,  "input");
        ggml_set_name(t_q,   "quantized");
        ggml_set_name(t_dq,  "dequantized");
        ggml_set_name(t_x,   "x");
        ggml_set_name(t_dot, "dot");

        memcpy(t_in->data, input.data(), ggml_nbytes(t_in));
        memcpy(t_x->data,  x.data(),     ggml_nbytes(t_x));

        const bool need_imatrix = ggml_quantize_requires_imatrix(type);
        std::vector<float> imatrix(NCOL, 1.0f);
        ggml_quantize_init(type);
        const size_t written = ggml_quantize_chunk(type, input.data(), t_q->data, 0, NROW, NCOL,
                                                   need_imatrix ? imatrix.data() : nullptr);
        if (written != ggml_nbytes(t_q)) {
            fprintf(stderr, "%s: ggml_quantize_chunk wrote %zu bytes, expected %zu\n", te.name, written, ggml_nbytes(t_q));
            return 1;
        }
        tt->to_float(t_q->data, (float *) t_dq->data, NROW * NCOL);
        compute_dot(type, (const uint8_t *) t_q->data, x.data(), (float *) t_dot->data);

        gguf_context * g = gguf_init_empty();
        gguf_set_val_str(g, "quant_dump.type",         ggml_type_name(type));
        gguf_set_val_str(g, "quant_dump.source",       source.c_str());
        gguf_set_val_str(g, "quant_dump.vec_dot_type", ggml_type_name(vdt));
        if (need_imatrix) {
            gguf_set_val_str(g, "quant_dump.imatrix", "ones");
        }
        gguf_add_tensor(g, t_in);
        gguf_add_tensor(g, t_q);
        gguf_add_tensor(g, t_dq);
        gguf_add_tensor(g, t_x);
        gguf_add_tensor(g, t_dot);

        std::string path = std::string(out_dir) + "/" + te.name + ".gguf";
        if (!gguf_write_to_file(g, path.c_str(), false)) {
            fprintf(stderr, "failed to write %s\n", path.c_str());
            return 1;
        }
        printf("wrote %-40s type=%-8s vec_dot_type=%-5s quantized=%zu bytes%s\n", path.c_str(), ggml_type_name(type),
               ggml_type_name(vdt), ggml_nbytes(t_q), need_imatrix ? " imatrix=ones" : "");
        gguf_free(g);
        ggml_free(ctx);
        ++n_written;
    }
    ggml_quantize_free();
    printf("%d files written\n", n_written);
    return 0;
}

static int check(int n, char ** files) {
    int n_bad = 0;
    for (int f = 0; f < n; ++f) {
        ggml_context * ctx = nullptr;
        gguf_init_params gp = { false, &ctx };
        gguf_context * g = gguf_init_from_file(files[f], gp);
        if (!g) { printf("%s: INVALID (gguf_init_from_file failed)\n", files[f]); ++n_bad; continue; }
        printf("%s: gguf v%u, %lld kv, %lld tensors\n", files[f], gguf_get_version(g),
               (long long) gguf_get_n_kv(g), (long long) gguf_get_n_tensors(g));
        for (int64_t i = 0; i < gguf_get_n_kv(g); ++i) {
            if (gguf_get_kv_type(g, i) == GGUF_TYPE_STRING) {
                printf("  kv  %-24s = %s\n", gguf_get_key(g, i), gguf_get_val_str(g, i));
            }
        }
        for (int64_t i = 0; i < gguf_get_n_tensors(g); ++i) {
            ggml_tensor * t = ggml_get_tensor(ctx, gguf_get_tensor_name(g, i));
            printf("  tensor %-12s type=%-8s ne={%lld,%lld} size=%zu offset=%zu\n", gguf_get_tensor_name(g, i),
                   ggml_type_name(gguf_get_tensor_type(g, i)), (long long) t->ne[0], (long long) t->ne[1],
                   gguf_get_tensor_size(g, i), gguf_get_tensor_offset(g, i));
        }
        // re-verify
        ggml_tensor * t_in  = ggml_get_tensor(ctx, "input");
        ggml_tensor * t_q   = ggml_get_tensor(ctx, "quantized");
        ggml_tensor * t_dq  = ggml_get_tensor(ctx, "dequantized");
        ggml_tensor * t_x   = ggml_get_tensor(ctx, "x");
        ggml_tensor * t_dot = ggml_get_tensor(ctx, "dot");
        bool ok = t_in && t_q && t_dq && t_x && t_dot;
        if (ok) {
            const ggml_type type = t_q->type;
            std::vector<float> dq(NROW * NCOL), dot(NROW * NACT);
            ggml_get_type_traits(type)->to_float(t_q->data, dq.data(), NROW * NCOL);
            compute_dot(type, (const uint8_t *) t_q->data, (const float *) t_x->data, dot.data());
            const bool dq_eq  = memcmp(dq.data(),  t_dq->data,  ggml_nbytes(t_dq))  == 0;
            const bool dot_eq = memcmp(dot.data(), t_dot->data, ggml_nbytes(t_dot)) == 0;
            // also: requantizing the stored input must reproduce the stored quantized bytes
            std::vector<uint8_t> q2(ggml_nbytes(t_q));
            std::vector<float> im(NCOL, 1.0f);
            ggml_quantize_chunk(type, (const float *) t_in->data, q2.data(), 0, NROW, NCOL,
                                ggml_quantize_requires_imatrix(type) ? im.data() : nullptr);
            const bool q_eq = memcmp(q2.data(), t_q->data, q2.size()) == 0;
            // rmse of dequantized vs input, per row, and dot vs fp32 reference
            double max_rel_dot = 0.0;
            for (int c = 0; c < NACT; ++c) for (int r = 0; r < NROW; ++r) {
                double ref = 0.0, nrm = 0.0;
                const float * dr = (const float *) t_dq->data + r * NCOL;
                const float * xr = (const float *) t_x->data + c * NCOL;
                for (int i = 0; i < NCOL; ++i) { ref += (double) dr[i] * xr[i]; nrm += std::fabs((double) dr[i] * xr[i]); }
                const double d = std::fabs(((const float *) t_dot->data)[c * NROW + r] - ref);
                if (nrm > 0) max_rel_dot = std::fmax(max_rel_dot, d / nrm);
            }
            printf("  rmse(dequantized - input) per row:");
            for (int r = 0; r < NROW; ++r) {
                double e = 0.0;
                for (int i = 0; i < NCOL; ++i) {
                    const double d = ((const float *) t_dq->data)[r * NCOL + i] - ((const float *) t_in->data)[r * NCOL + i];
                    e += d * d;
                }
                printf(" %.4g", std::sqrt(e / NCOL));
            }
            printf("\n  requant==stored:%s  to_float==stored:%s  vec_dot==stored:%s  max |dot - dequant.x|/sum|dequant*x| = %.3g\n",
                   q_eq ? "yes" : "NO", dq_eq ? "yes" : "NO", dot_eq ? "yes" : "NO", max_rel_dot);
            ok = q_eq && dq_eq && dot_eq;
        }
        printf("  => %s\n", ok ? "OK" : "FAIL");
        if (!ok) ++n_bad;
        gguf_free(g);
        ggml_free(ctx);
    }
    ggml_quantize_free();
    return n_bad ? 1 : 0;
}

int main(int argc, char ** argv) {
    ggml_cpu_init();
    if (argc >= 3 && strcmp(argv[1], "--check") == 0) {
        return check(argc - 2, argv + 2);
    }
    if (argc < 2 || argv[1][0] == '-') {
        fprintf(stderr, "usage: %s <out_dir> [source-string]\n       %s --check <file.gguf>...\n", argv[0], argv[0]);
        return 2;
    }
    const std::string source = argc >= 3 ? argv[2]
        : "unslothai/llama.cpp@d32676d77426540327835040d5d3279728f0b4c8 (upstream ggml-org/llama.cpp@82bb48500a9a6b3374da2cf5811695369278e4d3)";
    return dump(argv[1], source);
}

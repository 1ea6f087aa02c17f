// The importance-matrix reader (tessera quantize --imatrix) on arbitrary
// bytes, in both of llama-imatrix's forms (GGUF and legacy .dat): an Error
// or a matrix of finite values, never a crash, a hang or undefined behaviour.
#include "fuzz_common.h"
#include "model/importance_matrix.h"
#include "util/error.h"

#include <cmath>
#include <cstdlib>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const tessera::fuzz::MemoryFile file(data, size);
    try {
        const tessera::ImportanceMatrix m = tessera::read_importance_matrix(file.path());
        for (const auto& [name, values] : m.entries) {
            for (float v : values) {
                if (!std::isfinite(v)) std::abort();  // the reader promises finite values
            }
        }
    } catch (const tessera::Error&) {
    }
    return 0;
}

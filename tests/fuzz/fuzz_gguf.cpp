// The GGUF reader and model load on arbitrary bytes: an Error or a model,
// never a crash, a hang or undefined behaviour.
#include "fuzz_common.h"
#include "model/gguf_file.h"
#include "model/llama_model.h"
#include "model/vocab.h"
#include "util/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const tessera::fuzz::MemoryFile file(data, size);
    try {
        const tessera::LlamaModel model(file.path());
        (void)tessera::load_vocab(model.file());
        (void)model.file().fingerprint_hex();
    } catch (const tessera::Error&) {
    }
    return 0;
}

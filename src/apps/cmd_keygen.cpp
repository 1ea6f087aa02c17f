// tessera keygen: a fresh cluster key, to copy to every node of a plan.
#include "apps/commands.h"
#include "net/wire_key.h"

#include <cstdio>
#include <memory>

namespace tessera {

void add_keygen_command(CLI::App& app) {
    auto path = std::make_shared<std::string>();
    CLI::App* cmd = app.add_subcommand("keygen", "Write a new random cluster key (mode 0600) for --key");
    cmd->add_option("-o,--output", *path, "Key file to create (an existing file is never replaced)")->required();
    cmd->callback([path] {
        write_new_key_file(*path);
        std::fprintf(stderr, "wrote a new key to %s (mode 0600); copy it to every node and give each --key %s\n",
                     path->c_str(), path->c_str());
    });
}

}  // namespace tessera

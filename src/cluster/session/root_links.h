// The root's first words with the nodes of any plan (tensor-parallel ranks,
// pipeline stages, sequence-parallel nodes): connect to each, prove the
// cluster key (which also times the round trip), say hello with the model's
// fingerprint, then read every node's reply. All nodes are greeted before any
// reply is read, so they prepare at once. Each plan then checks the replies
// its own way (a different model, a busy node, no model file, memory).
#pragma once

#include "cluster/session/session_messages.h"
#include "net/channel.h"
#include "net/tcp.h"
#include "net/wire_key.h"
#include "util/function_ref.h"

#include <nlohmann/json.hpp>

#include <memory>
#include <string>
#include <vector>

namespace tessera {

// How long the root waits for a node's reply while a session is set up (hello,
// ready): a node may load (and time) its model, or receive its slice, first.
constexpr int kSetupReplyTimeoutMs = 60000;

struct RootLink {
    std::unique_ptr<FrameChannel> channel;
    double round_trip_ms = 0.0;  // measured by the key handshake
    double handshake_ms = 0.0;   // connect and key handshake together
    HelloReply hello;
};

struct RootLinkSettings {
    int connect_timeout_ms = 5000;
    ChannelLimits limits;
    const WireKey* key = nullptr;  // null: plain frames
};

// Node i (0-based) is named name(i) in errors and gets the hello
// {"fingerprint", "rank": i + 1} plus the fields extra(i, its channel) adds.
// Throws an Error naming the node that failed.
std::vector<RootLink> connect_nodes(const std::vector<HostPort>& addresses, const RootLinkSettings& settings,
                                    const std::string& fingerprint, FunctionRef<std::string(size_t)> name,
                                    FunctionRef<void(size_t, const FrameChannel&, nlohmann::json&)> extra);

}  // namespace tessera

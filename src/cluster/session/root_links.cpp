#include "cluster/session/root_links.h"

#include "cluster/session/json_messages.h"
#include "net/handshake.h"
#include "util/error.h"
#include "util/timer.h"

namespace tessera {

std::vector<RootLink> connect_nodes(const std::vector<HostPort>& addresses, const RootLinkSettings& settings,
                                    const std::string& fingerprint, FunctionRef<std::string(size_t)> name,
                                    FunctionRef<void(size_t, const FrameChannel&, nlohmann::json&)> extra) {
    std::vector<RootLink> links(addresses.size());
    for (size_t i = 0; i < addresses.size(); ++i) {
        RootLink& link = links[i];
        try {
            const double connecting = now_seconds();
            link.channel = std::make_unique<FrameChannel>(TcpStream::connect(addresses[i], settings.connect_timeout_ms),
                                                          settings.limits);
            link.round_trip_ms = 1e3 * authenticate_as_client(*link.channel, settings.key, settings.limits.io_timeout_ms);
            link.handshake_ms = 1e3 * (now_seconds() - connecting);
            nlohmann::json hello = hello_json(fingerprint);
            hello["rank"] = i + 1;
            extra(i, *link.channel, hello);
            send_json(*link.channel, SessionMessage::kHello, hello);
        } catch (const Error& e) {
            throw make_error("{}: {}", name(i), e.what());
        }
    }
    for (size_t i = 0; i < links.size(); ++i) {
        const std::string who = name(i);
        links[i].hello = parse_hello_reply(recv_json(*links[i].channel, SessionMessage::kHelloReply, who, kSetupReplyTimeoutMs), who);
    }
    return links;
}

}  // namespace tessera

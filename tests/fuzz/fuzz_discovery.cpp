// Keyed discovery's packets as a worker and a root receive them from anyone
// on the network: any bytes opened as a probe (then through the worker's
// gate) and as a reply, with a fixed key. Each must end in a verdict, never a
// crash, a read past the datagram or an exception.
#include "net/discovery_gate.h"
#include "net/discovery_packets.h"

#include <span>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    using namespace tessera;
    static const DiscoveryKeys keys = [] {
        WireKey key;
        key.bytes.fill(7);
        return discovery_keys(key);
    }();
    static DiscoveryGate gate(300000, 1e6, 1e6, 1024);
    const std::span<const uint8_t> packet(data, size);
    PacketVerdict why;
    if (const auto probe = open_probe(keys, packet, why)) (void)gate.admit(*probe, probe->time_ms);
    (void)open_reply(keys, packet, why);
    return 0;
}

// The handshake messages of a session as typed values, parsed from a peer's
// JSON with every field checked (cluster/session/json_messages.h): what a worker
// reads from a root (hello, assign) and a root from a worker (hello-reply).
// One parser per message, shared by the worker, the roots and the fuzzers.
#pragma once

#include "cluster/session/json_messages.h"
#include "attn/kv_cache.h"
#include "attn/sparse_pattern.h"
#include "cluster/session/messages.h"
#include "model/slice.h"
#include "net/tcp.h"
#include "ops/quant_type.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace tessera {

// What a root may ask of a worker: a context of 4M positions and batches of
// 8192 at most (and never more than the worker's free memory, checked later).
constexpr int64_t kMaxContext = 1 << 22;
constexpr int64_t kMaxBatch = 8192;
constexpr int64_t kMaxSequences = 256;  // serve --parallel

// The version of these messages and the frames after them. A root and a
// worker exchange it (with the release, util/version.h) in their hello and
// serve each other only when it is the same: a mismatch is one error naming
// both releases and which end to upgrade, never a confusing failure later.
// Raise it with any change a peer of the previous release would misread.
// 1: releases before 0.9, which sent no version; 2: before kHeadNeed; 3: before the mixed MoE split; 4: before
// the balanced one (a worker of 4 would ignore "tail_deals" and compute every turn of a shared part)
constexpr int kProtocolVersion = 5;

// A root and a worker that speak different protocols (or one that predates
// the exchange): the one error both ends report.
class VersionMismatch : public Error {
public:
    using Error::Error;
};

// The fields every hello and hello-reply carries: {"protocol", "version"}.
json protocol_fields();

// Throws VersionMismatch when a hello or hello-reply from `who` carries
// another protocol (or none); `peer_role` is what `who` is ("worker",
// "root") and names the end to upgrade.
void require_same_protocol(const json& j, const std::string& who, const char* peer_role);

struct HelloMessage {
    std::string fingerprint;  // validated hex
    bool shm = false;         // the root would take a shared-memory link
};

// The root's hello: the model's fingerprint and the protocol fields.
json hello_json(const std::string& fingerprint);

// Checks the protocol first (VersionMismatch), then the fields.
HelloMessage parse_hello(const json& j, const std::string& peer);

// A slice as an assign message carries it (parse_assign reads it back).
json slice_to_json(const Slice& s);

// The slice a stage's ready message reports (its leader's share, as the
// leader planned its group), or `assigned` where it reports none (an older
// worker): the ranges checked for order and size, with `assigned`'s embeds,
// outputs and vocabulary rows; an Error naming the field where the layers are
// not those it was assigned.
Slice parse_reported_slice(const JsonFields& ready, const Slice& assigned);

struct AssignMessage {
    bool stage = false;  // role "stage" (else "tensor" or "sequence")
    bool sequence = false;  // role "sequence": the whole model, chunks of prompts (sequence-parallel prefill)
    std::string codebooks;  // role "sequence": the digest of the codebooks its rows travel by (empty: exact)
    Slice slice;         // ranges checked for order and size, not yet against a model
    bool last = false, prev = false;
    std::optional<HostPort> next;  // a stage's next stage
    int n_ctx = 0, n_batch = 0;
    int n_seq = 1;  // sequences with their own KV cache (serve --parallel)
    KvCacheTypes kv_types;
    SparseOptions sparse;  // disabled unless the assign has "sparse"
    bool track_attention = false;
    // The root allows this node to stream layers its memory cannot hold
    // (false: --no-offload, refuse instead).
    bool offload = false;
    WireFormat partial_format = WireFormat::F32;
    bool shm = false;
    std::vector<HostPort> group;       // a stage led as a tensor-parallel group
    std::vector<double> group_weights;
    std::optional<MoeSplit> moe_split;  // the group's split of a mixture of experts (none: the leader chooses)
    // A tensor-parallel rank: its rank, every worker's address (ranks 1..N-1)
    // and the session's token its mesh peers prove; how long a peer may take
    // per row of a step before it counts as stalled.
    int rank = 1;
    std::vector<HostPort> mesh;
    std::string mesh_token;
    double row_budget_ms = 0.0;
    int partial_bands = 1;  // bands each partial is sent in (PartialExchange::set_bands)
    PartialTopology topology = PartialTopology::kAllToAll;  // "exchange"
    // A rank or stage taking over generation from sequence-parallel prefill
    // in the same session ("handoff_positions"): its cache keeps the K/V rows
    // of positions [0, handoff_positions) of its heads and layers from the
    // whole-model cache it prefilled (the root first sends the rows that
    // cache lacks). 0: a fresh rank or stage.
    int handoff_positions = 0;
    // The first of them the root sends ("handoff_from", at most
    // handoff_positions): the node's cache holds the positions before it.
    int handoff_from = 0;
};

constexpr int kMaxPartialBands = 16;

// A KV cache type as the assign message names it ("f16", "q8_0"), and back;
// a name that is not a cache type is an error naming the peer.
std::string kv_type_text(QuantType type);
QuantType parse_kv_type(const std::string& text, const std::string& peer);

// Sparse attention's options as the assign carries them ("sparse", only
// when enabled).
nlohmann::json sparse_json(const SparseOptions& options);

AssignMessage parse_assign(const json& j, const std::string& peer);

struct HelloReply {
    bool ok = false, busy = false, has_model = false;
    std::string error, fingerprint;
    double probe_seconds = -1.0;  // negative: not measured
    double disk_read_bps = 0.0;   // its model file's disk, read sequentially (0: not measured)
    uint64_t free_memory = 0;
    std::string cpu_target;  // the SIMD target its kernels run on ("" from an older worker)
    std::string device;      // the GPU it computes on ("" : its CPU)
    std::string shm_name, shm_nonce;  // both or neither
};

// Checks the protocol first (VersionMismatch: a worker of another release
// refuses the session with its own protocol fields; one before 0.9 answers
// without them), then the fields.
HelloReply parse_hello_reply(const json& j, const std::string& peer);

// A reply that refuses the session as the Error a root reports: NodeBusy for
// a busy worker, both fingerprints (and the root's model file) for a worker
// holding another model, else the worker's own reason. Does nothing for ok.
void require_hello_ok(const HelloReply& reply, const std::string& who, const std::string& fingerprint,
                      const std::string& model_path);

// A rank of a tensor-parallel group introducing itself to a higher rank.
struct MeshHello {
    std::string token;  // the session's (32 hex digits)
    int rank = 0;
};

MeshHello parse_mesh_hello(const json& j, const std::string& peer);
// A fresh random session token.
std::string new_mesh_token();

}  // namespace tessera

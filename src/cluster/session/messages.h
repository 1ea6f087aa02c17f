// The messages of a session between a root and its workers on a
// FrameChannel, whatever role the plan gives a worker: a tensor-parallel rank
// (root = rank 0, workers = ranks 1..N-1, as laid out below), a pipeline
// stage (kAssign's role "stage", then kSeqRuns/kResidual rows from the
// previous stage and on to the next), or a sequence-parallel node (role
// "sequence": its chunk's rows and the K/V rows of earlier chunks).
//
// Handshake (not the hot path, so JSON payloads a person can read in a dump):
//   (first, on every connection: the key handshake of net/handshake.h; from
//   then on every frame is sealed)
//   root -> worker  kHello      {protocol, fingerprint, rank, n_ranks, shm}
//   worker -> root  kHelloReply {ok, fingerprint, threads, free_memory, probe_seconds, error, busy,
//                                shm_name, shm_nonce (a same-host worker's shared-memory link)}
//   root <-> worker kLinkProbe  (optional: pings and bulk frames that time the link, link_probe.h;
//                                a survey ends here with kShutdown)
//   root -> worker  kAssign     {slice, n_ctx, kv_type_k, kv_type_v, n_batch, partial_format, shm (taken)}
//   (from here on, frames of a taken link travel through shared memory)
//   worker -> root  kReady      {ok, error} or {ok: false, need_slice: true}, then
//   root -> worker  kSliceBegin {bytes}, kSliceData* (bytes of a slice file), kSliceEnd {bytes, checksum},
//   worker -> root  kReady      {ok, error}
//   (assign also names every rank's address, this worker's rank and a session token: each
//   worker connects to the workers of higher rank, sends kMeshHello {token, rank}, and from
//   then on the ranks are a full mesh; the root's channels are its links)
// Per batch (binary):
//   root -> worker  kSeqRuns            the batch's runs (sequence, first position, rows)
//   root -> worker  kResidual           StepHeader + the residual rows x (F32)
// Per layer, attention then FFN, every rank to every other (partial_exchange.h):
//   rank -> rank    kPartial            StepHeader (layer field: 2 * layer + part) + the rank's
//                                       partial (Fixed: exact; Q8_0 or F16: --fast)
// Per token, after the last layer (a group splitting the output head):
//   root -> worker  kHead               the output-normed rows
//   worker -> root  kPartial            the logits of the rank's vocab rows
//   (or, after kHeadNeed named a sampler's top-k and tokens, kCandidates:
//   only those, head_candidates.h; a need holds until the next kHeadNeed)
// Either side: kHeartbeat (a worker sends them while it computes a long step,
// so a stalled worker is told apart from a slow one), kError {message} from a
// worker that failed, kShutdown from the root.
#pragma once

#include "model/layer_block.h"
#include "ops/quant_type.h"

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace tessera {

enum class SessionMessage : uint16_t {
    kHello = 1,
    kHelloReply = 2,
    kAssign = 3,
    kReady = 4,
    kSliceData = 5,
    kSliceEnd = 6,
    kSliceBegin = 7,  // {bytes}: the size of the slice file that follows, checked against the cache's room first
    kResidual = 10,   // the residual rows entering a group's layers, once per batch
    kMeshHello = 11,  // a rank introducing itself to a higher rank of its group
    kPartial = 12,
    kStageInput = 13,  // pipeline: residual rows into a stage (StepHeader.layer holds StageFlags)
    kLogits = 14,      // pipeline: the last stage's logits, straight to the root (kCandidates under a kHeadNeed)
    kStageHello = 15,  // pipeline: a stage introducing itself to the next one
    kHead = 16,        // the output-normed rows, to the workers holding rows of the output head
    kSeqRuns = 17,     // the sequences of the next batch's rows (continuous batching): SeqRun table
    kLinkProbe = 18,   // before kAssign: a ping echoed back or a bulk frame acknowledged (link_probe.h)
    kShift = 19,       // a context shift or eviction of one sequence (ContextCompaction), in order with the steps
    kHeartbeat = 20,
    kError = 21,
    kShutdown = 22,
    kMass = 23,  // the attention each position received: asked (MassRequest), answered (i64 per position)
    kSpChunk = 24,  // sequence-parallel prefill: a node's chunk of the prompt (SpChunk)
    kSpRows = 25,   // sequence-parallel prefill: one layer's K/V rows of some positions (SpRowsHeader + rows)
    kStatus = 26,       // instead of kHello: what the worker holds and does (tessera status), busy or not
    kStatusReply = 27,  // its answer (cluster/session/worker_status.h)
    kHeadNeed = 28,     // which logits the root reads from the next kHead on (cluster/session/head_candidates.h)
    kCandidates = 29,   // a worker's logits under such a need, instead of kPartial's whole rows
};

const char* tp_message_name(uint16_t type);

// What the root wants back from the last stage for a batch of positions.
// kWantRunLogits: the logits of each run's last row (a batch over the runs
// of the kSeqRuns sent ahead of it, step flag kStepOverRuns).
enum StageFlags : uint32_t { kWantLastLogits = 1, kWantAllLogits = 2, kWantRunLogits = 4 };

// How activation and partial rows travel. F32 rows and Fixed partials
// (exact sums, ops/fixed_sum.h, as packed integers: fixed_rows.h) are exact;
// Q8_0 and F16 are --fast's smaller encodings.
enum class WireFormat : uint16_t { F32 = 0, F16 = 1, Q8_0 = 2, Fixed = 3 };

const char* wire_format_name(WireFormat format);

// A step's rows are the runs of the last kSeqRuns (pos0 unused), not one
// run of sequence 0 from pos0.
constexpr uint16_t kStepOverRuns = 1;

// How a tensor-parallel group sums its partials (cluster/tensor_parallel/partial_exchange.h):
// the assign's "exchange", "all-to-all" or "reduce-scatter".
enum class PartialTopology { kAllToAll, kReduceScatter };
const char* partial_topology_name(PartialTopology t);
// An Error for any other name.
PartialTopology parse_partial_topology(const std::string& name);

struct StepHeader {
    uint32_t layer = 0;
    uint32_t pos0 = 0;
    uint32_t n_tok = 0;
    uint32_t width = 0;  // floats per row
    WireFormat format = WireFormat::F32;
    uint16_t flags = 0;  // kStepOverRuns (shares the format's 32-bit word)
};

constexpr size_t kStepHeaderBytes = 20;

// Bytes of n_tok rows of `width` floats in `format` (Q8_0 needs width % 32 ==
// 0; Fixed: the most they can take).
uint64_t wire_rows_bytes(WireFormat format, uint32_t width, uint32_t n_tok);

// Appends header + rows (n_tok * width floats) encoded in header.format to out
// (cleared first; its capacity is reused).
void encode_step(const StepHeader& header, const float* rows, std::vector<uint8_t>& out);

// Parses a step payload: checks that its size matches the header exactly and
// that the format is known; decodes the rows into `rows` (resized). `peer`
// names the sender in errors. Fixed rows are refused here.
StepHeader decode_step(std::span<const uint8_t> payload, std::vector<float>& rows, const char* peer);

// The same for exact partial rows (header.format Fixed; their size is what
// their blocks take, checked while decoding).
void encode_exact_step(const StepHeader& header, const double* rows, std::vector<uint8_t>& out);
// Blocks of zeros take a byte per 32 values, so a small frame could claim
// billions: more than max_values (checked before anything is allocated) is
// refused.
constexpr uint64_t kMaxExactValues = uint64_t{1} << 23;
StepHeader decode_exact_step(std::span<const uint8_t> payload, std::vector<double>& rows, const char* peer,
                             uint64_t max_values = kMaxExactValues);

// A batch's runs: u32 count (1..kMaxSeqRuns), then (seq, pos0, n_tok,
// all_logits 0/1) as u32 each. Decoding checks the size and that every run has rows; the
// receiver checks sequences and positions against what it keeps.
constexpr uint32_t kMaxSeqRuns = 4096;
constexpr size_t kSeqRunBytes = 16;
void encode_seq_runs(std::span<const SeqRun> runs, std::vector<uint8_t>& out);
std::vector<SeqRun> decode_seq_runs(std::span<const uint8_t> payload, const char* peer);

// A compaction (LayerBlock::compact_context): seq, n_used, the count of kept
// positions as u32, then each kept position as u32. Decoding checks the size
// and bounds the values so they cannot wrap; the receiver checks them against
// its sequences and context.
struct ContextCompaction {
    int seq = 0, n_used = 0;
    std::vector<int> kept;
};
void encode_compaction(int seq, std::span<const int> kept, int n_used, std::vector<uint8_t>& out);
ContextCompaction decode_compaction(std::span<const uint8_t> payload, const char* peer);

// kMass: a request names seq and n_used (u32 each), and within a pipeline
// carries the running totals of the stages before (n_used i64); an answer is
// n_used i64 totals.
struct MassRequest {
    int seq = 0, n_used = 0;
    std::vector<int64_t> totals;  // empty, or n_used running totals
};
void encode_mass_request(int seq, int n_used, const int64_t* totals, std::vector<uint8_t>& out);
MassRequest decode_mass_request(std::span<const uint8_t> payload, const char* peer);
void encode_mass(const int64_t* totals, int n, std::vector<uint8_t>& out);
// Adds an answer of exactly n totals to out.
void add_mass(std::span<const uint8_t> payload, int n, int64_t* out, const char* peer);

// Sequence-parallel prefill (cluster/sequence_parallel/sp_prefill_decoder.h). kSpChunk: u32
// pos0, u32 flags (kSpWantLogits: the node answers with its last row's
// logits), u32 count, then count i32 tokens. Decoding checks the size and
// bounds; the node checks positions and tokens against its model.
constexpr uint32_t kSpWantLogits = 1;
struct SpChunk {
    int pos0 = 0;
    uint32_t flags = 0;
    std::vector<int32_t> tokens;
};
void encode_sp_chunk(int pos0, uint32_t flags, std::span<const int32_t> tokens, std::vector<uint8_t>& out);
SpChunk decode_sp_chunk(std::span<const uint8_t> payload, const char* peer);

// kSpRows: u32 layer, u32 pos0, u32 count, then the rows as
// SliceForward::read_kv_rows gives them. Decoding checks the header's
// bounds; the receiver checks the rows' size against its cache.
struct SpRowsHeader {
    int layer = 0, pos0 = 0, n = 0;
};
constexpr size_t kSpRowsHeaderBytes = 12;
void encode_sp_rows_header(const SpRowsHeader& h, uint8_t* out);
SpRowsHeader decode_sp_rows_header(std::span<const uint8_t> payload, const char* peer);

// Throws an Error naming the peer if any value is NaN or infinite: a
// broken or hostile node must not turn every later token into garbage.
void require_finite(const float* values, size_t n, const std::string& peer);
void require_finite(const double* values, size_t n, const std::string& peer);

}  // namespace tessera

#include "cluster/sequence_parallel/sp_node.h"

#include "cluster/session/heartbeat.h"
#include "cluster/session/json_messages.h"
#include "cluster/session/session_messages.h"
#include "cluster/sequence_parallel/sp_rows.h"
#include "cluster/session/messages.h"
#include "net/send_queue.h"
#include "util/error.h"

#include <mutex>
#include <vector>

namespace tessera {

namespace {

constexpr int kIdlePollMs = 1000;
// The root computes the first chunk's layers while a node waits for them: a
// layer of a long chunk on a slow root may take this long.
constexpr int kRowsTimeoutMs = 300000;

class ChunkServer {
public:
    ChunkServer(FrameChannel& control, SliceForward& forward, const KvCodebooks* books)
        : control_(control), forward_(forward), codec_(forward, books), sender_(control) {}

    // Returns false when the root ended the session.
    bool serve(const SpChunk& chunk) {
        const ModelHParams& hp = forward_.hparams();
        const std::string& peer = control_.peer();
        const auto n = static_cast<int>(chunk.tokens.size());
        if (static_cast<int64_t>(chunk.pos0) + n > forward_.n_ctx()) {
            throw make_error("{}: a prompt chunk of {} tokens at {} exceeds the context of {}", peer, n, chunk.pos0,
                             forward_.n_ctx());
        }
        const auto n_embd = static_cast<size_t>(hp.n_embd);
        x_.resize(static_cast<size_t>(n) * n_embd);
        forward_.embed(chunk.tokens, x_.data());  // checks the tokens
        const int n_layers = forward_.slice().n_layers();
        have_.assign(static_cast<size_t>(n_layers), 0);
        const int n_batch = forward_.n_batch();
        for (int layer = 0; layer < n_layers; ++layer) {
            while (have_[static_cast<size_t>(layer)] < chunk.pos0) {
                if (!receive_rows(layer, chunk.pos0)) return false;
            }
            for (int b = 0; b < n; b += n_batch) {
                const SeqRun run{0, chunk.pos0 + b, std::min(n_batch, n - b)};
                forward_.forward_layer(layer, x_.data() + static_cast<size_t>(b) * n_embd, std::span<const SeqRun>(&run, 1));
                std::vector<uint8_t> out;
                codec_.encode(layer, run.pos0, run.n_tok, out);
                sender_.push(static_cast<uint16_t>(SessionMessage::kSpRows), std::move(out));
            }
        }
        if ((chunk.flags & kSpWantLogits) != 0) {
            logits_.resize(static_cast<size_t>(hp.n_vocab));
            forward_.logits(x_.data() + static_cast<size_t>(n - 1) * n_embd, 1, logits_.data());
            StepHeader h;
            h.pos0 = static_cast<uint32_t>(chunk.pos0 + n - 1);
            h.n_tok = 1;
            h.width = static_cast<uint32_t>(hp.n_vocab);
            std::vector<uint8_t> out;
            encode_step(h, logits_.data(), out);
            sender_.push(static_cast<uint16_t>(SessionMessage::kLogits), std::move(out));
        }
        sender_.drain();
        held_ = chunk.pos0 + n;
        return true;
    }

    // Generation handed to a tensor-parallel group or a pipeline: the rows of
    // positions [from, positions) of the layers [layer_begin, layer_end) the
    // node keeps arrive (kSpRows, each layer's in order), so its cache holds
    // the whole prompt there. The positions before `from` must be this node's.
    void receive_handoff_rows(int from, int positions, int layer_begin, int layer_end) {
        const std::string& peer = control_.peer();
        if (from > held_ || positions > forward_.n_ctx()) {
            throw make_error("{}: a handoff of positions {}..{} to a node whose cache holds {} of a context of {}", peer,
                             from, positions, held_, forward_.n_ctx());
        }
        const int n_layers = forward_.slice().n_layers();
        if (layer_begin < 0 || layer_end > n_layers || layer_begin > layer_end) {
            throw make_error("{}: a handoff of layers {}..{} of a model of {}", peer, layer_begin, layer_end, n_layers);
        }
        // Layers outside the range need none: rows of them are refused.
        have_.assign(static_cast<size_t>(n_layers), positions);
        for (int layer = layer_begin; layer < layer_end; ++layer) have_[static_cast<size_t>(layer)] = from;
        for (int layer = layer_begin; layer < layer_end; ++layer) {
            while (have_[static_cast<size_t>(layer)] < positions) {
                if (!receive_rows(layer, positions)) throw make_error("{}: the root ended the session mid-handoff", peer);
            }
        }
        held_ = positions;
    }

private:
    // Stores the next kSpRows (rows of any layer from `layer` on, before
    // `chunk_pos0`, in order); false on the root's shutdown.
    bool receive_rows(int layer, int chunk_pos0) {
        const std::string& peer = control_.peer();
        control_.recv(frame_, kRowsTimeoutMs);
        const auto type = static_cast<SessionMessage>(frame_.type);
        if (type == SessionMessage::kShutdown) return false;
        if (type == SessionMessage::kHeartbeat) return true;
        if (type == SessionMessage::kError) (void)parse_json_message(frame_, SessionMessage::kSpRows, peer);  // throws "failed"
        if (type != SessionMessage::kSpRows) throw make_error("{}: unexpected {} message during a prompt chunk", peer, tp_message_name(frame_.type));
        const SpRowsHeader h = decode_sp_rows_header(frame_.payload, peer.c_str());
        const int n_layers = forward_.slice().n_layers();
        if (h.layer < layer || h.layer >= n_layers || h.pos0 != have_[static_cast<size_t>(h.layer)] ||
            static_cast<int64_t>(h.pos0) + h.n > chunk_pos0) {
            throw make_error("{}: KV rows of layer {} at {}..{} where layer {}'s rows from {} up to {} were due", peer,
                             h.layer, h.pos0, static_cast<int64_t>(h.pos0) + h.n, h.layer,
                             h.layer < n_layers && h.layer >= 0 ? have_[static_cast<size_t>(h.layer)] : -1, chunk_pos0);
        }
        codec_.store(h, frame_.payload, peer);
        have_[static_cast<size_t>(h.layer)] += h.n;
        return true;
    }

    FrameChannel& control_;
    SliceForward& forward_;
    SpRowCodec codec_;
    SendQueue sender_;
    Frame frame_;
    std::vector<float> x_, logits_;
    std::vector<int> have_;
    int held_ = 0;  // the cache holds positions [0, held_) as a single node would (the last chunk's end)
};

}  // namespace

std::optional<AssignMessage> serve_prompt_chunks(FrameChannel& control, SliceForward& forward,
                                                const KvCodebooks* books, int root_silence_ms, SessionPulse* pulse,
                                                const std::function<void(const std::string&)>& log) {
    send_json(control, SessionMessage::kReady, {{"ok", true}});
    if (log) {
        log(fmt::format("serving prompt chunks of the whole model to {}, rows {}", control.peer(),
                        books != nullptr ? fmt::format("as codebook indices ({} bits a position and layer)",
                                                       books->bits_per_position())
                                         : std::string("exact")));
    }
    // Heartbeats while a chunk runs: the root tells a node computing a long
    // chunk from a stalled one (and between prompts, when the root generates
    // alone and reads nothing from here, none pile up).
    std::mutex unused;
    Heartbeat heartbeat(control, unused);
    ChunkServer server(control, forward, books);
    Frame frame;
    RootSilence root(root_silence_ms, control.peer(), pulse);
    for (;;) {
        if (!control.poll(kIdlePollMs)) {
            root.check();
            continue;
        }
        control.recv(frame);
        root.heard();
        const auto type = static_cast<SessionMessage>(frame.type);
        if (type == SessionMessage::kHeartbeat) continue;
        if (type == SessionMessage::kShutdown) return std::nullopt;
        if (type == SessionMessage::kAssign) {
            // Generation goes on on a tensor-parallel group or a pipeline of these nodes.
            const AssignMessage assign = parse_assign(parse_json_message(frame, SessionMessage::kAssign, control.peer()),
                                                      control.peer());
            if (assign.sequence || !assign.group.empty() || assign.n_ctx != forward.n_ctx() ||
                assign.kv_types != forward.kv_cache().types() || assign.n_seq != 1) {
                throw make_error("{}: a handoff must assign a tensor-parallel rank or a pipeline stage of its own, with "
                                 "this node's context ({}) and cache types", control.peer(), forward.n_ctx());
            }
            heartbeat.set_busy(true);
            server.receive_handoff_rows(assign.handoff_from, assign.handoff_positions, assign.slice.layer_begin,
                                        assign.slice.layer_end);
            return assign;
        }
        if (type != SessionMessage::kSpChunk) {
            throw make_error("{}: unexpected {} message", control.peer(), tp_message_name(frame.type));
        }
        heartbeat.set_busy(true);
        const SpChunk chunk = decode_sp_chunk(frame.payload, control.peer().c_str());
        if (pulse != nullptr) pulse->rows += chunk.tokens.size();
        const bool more = server.serve(chunk);
        heartbeat.set_busy(false);
        if (!more) return std::nullopt;
    }
}

}  // namespace tessera

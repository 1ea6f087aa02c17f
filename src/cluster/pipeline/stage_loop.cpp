#include "cluster/pipeline/stage_loop.h"

#include "cluster/session/head_candidates.h"
#include "cluster/session/heartbeat.h"
#include "cluster/session/json_messages.h"
#include "cluster/session/messages.h"
#include "cluster/session/session_messages.h"
#include "net/handshake.h"
#include "util/error.h"
#include "util/timer.h"

#include <poll.h>

#include <memory>
#include <mutex>

namespace tessera {

namespace {

constexpr int kLinkTimeoutMs = 30000;
constexpr int kIdlePollMs = 1000;
constexpr int kShutdownGraceMs = 2000;

}  // namespace

void serve_stage(FrameChannel& control, const AcceptPrevious& accept_previous, LayerBlock& block,
                 SliceRunner& forward, const StageLinks& links, const ChannelLimits& limits,
                 const std::function<void(const std::string&)>& log) {
    // Links first: take the previous stage (it connects to this worker's
    // port), then connect to the next one.
    std::unique_ptr<FrameChannel> prev, next;
    Frame frame;
    if (links.has_prev) {
        PreviousStage previous = accept_previous(kLinkTimeoutMs);
        prev = std::move(previous.channel);
        const JsonFields hello(previous.hello, prev->peer(), "stage-hello");
        if (hello.string("fingerprint", 64) != links.fingerprint) {
            throw make_error("{}: the previous stage runs another model", prev->peer());
        }
    }
    if (links.next) {
        next = std::make_unique<FrameChannel>(TcpStream::connect(*links.next, kLinkTimeoutMs), limits);
        authenticate_as_client(*next, links.key, limits.io_timeout_ms);
        send_json(*next, SessionMessage::kStageHello, {{"fingerprint", links.fingerprint}});
    }
    // Its slice as it runs: a group's leader plans its members' shares, and
    // its own, itself (the root sized it without their memory).
    send_json(control, SessionMessage::kReady, {{"ok", true}, {"slice", slice_to_json(forward.slice())}});
    if (log) log(fmt::format("stage {} linked", describe_slice(forward.slice())));

    // Heartbeats to the root all session long: rows may be in flight from
    // any stage, and the root names the stage that falls silent.
    std::mutex send_mutex;
    Heartbeat heartbeat(control, send_mutex);
    heartbeat.set_busy(true);
    FrameChannel& input = prev ? *prev : control;
    const ModelHParams& hp = forward.hparams();
    std::vector<float> x, logits, run_rows;
    std::vector<uint8_t> out;
    std::vector<SeqRun> runs;  // the last kSeqRuns from the previous stage
    LogitsNeed need;           // the last kHeadNeed's, when has_need
    bool has_need = false;
    // The root beats on the control channel all session long, even while
    // rows come only from the previous stage.
    RootSilence root(links.root_silence_ms, control.peer(), links.pulse);
    for (;;) {
        pollfd fds[2] = {{control.fd(), POLLIN, 0}, {input.fd(), POLLIN, 0}};
        const int n_fds = prev ? 2 : 1;
        if (::poll(fds, static_cast<nfds_t>(n_fds), kIdlePollMs) <= 0 ||
            (fds[0].revents & (POLLIN | POLLHUP | POLLERR)) == 0) {
            root.check();
        }
        if ((fds[0].revents | (n_fds == 2 ? fds[1].revents : 0)) == 0) continue;
        FrameChannel& from = (n_fds == 2 && (fds[1].revents & (POLLIN | POLLHUP | POLLERR)) != 0) ? input : control;
        try {
            from.recv(frame);
            if (&from == &control) root.heard();
        } catch (const Error&) {
            // At the end of a session the previous stage may hang up before
            // the root's goodbye reaches this one: that goodbye decides. A
            // beat the root sent just before it may come first.
            if (&from == &control) throw;
            const int64_t until = steady_ms() + kShutdownGraceMs;
            for (;;) {
                const int64_t left = until - steady_ms();
                if (left <= 0 || !control.poll(static_cast<int>(left))) throw;
                control.recv(frame);
                if (frame.type == static_cast<uint16_t>(SessionMessage::kShutdown)) return;
                if (frame.type != static_cast<uint16_t>(SessionMessage::kHeartbeat)) throw;
            }
        }
        const auto type = static_cast<SessionMessage>(frame.type);
        if (type == SessionMessage::kHeartbeat) continue;
        if (type == SessionMessage::kShutdown && &from == &control) return;
        if (type == SessionMessage::kSeqRuns && &from == &input) {
            // The next batch's sequences (continuous batching), passed on
            // ahead of its rows.
            runs = decode_seq_runs(frame.payload, from.peer().c_str());
            if (next) next->send(static_cast<uint16_t>(SessionMessage::kSeqRuns), frame.payload);
            continue;
        }
        if (type == SessionMessage::kHeadNeed && &from == &input) {
            // Held until the next; used by the last stage, in order with the rows.
            has_need = decode_logits_need(frame.payload, hp.n_vocab, need, from.peer().c_str());
            if (next) next->send(static_cast<uint16_t>(SessionMessage::kHeadNeed), frame.payload);
            continue;
        }
        if (type == SessionMessage::kShift && &from == &input) {
            // In order with the steps: this stage's layers, then the next's.
            const ContextCompaction c = decode_compaction(frame.payload, from.peer().c_str());
            block.compact_context(c.seq, c.kept, c.n_used);
            if (next) next->send(static_cast<uint16_t>(SessionMessage::kShift), frame.payload);
            continue;
        }
        if (type == SessionMessage::kMass && &from == &input) {
            // The running totals plus this stage's; the last stage answers the root.
            MassRequest r = decode_mass_request(frame.payload, from.peer().c_str());
            if (r.n_used > forward.n_ctx() || r.totals.size() != static_cast<size_t>(r.n_used)) {
                throw make_error("{}: attention of {} positions asked with {} totals (context {})", from.peer(),
                                 r.n_used, r.totals.size(), forward.n_ctx());
            }
            block.add_attention_mass(r.seq, r.n_used, r.totals.data());
            if (next) {
                encode_mass_request(r.seq, r.n_used, r.totals.data(), out);
                next->send(static_cast<uint16_t>(SessionMessage::kMass), out);
            } else {
                encode_mass(r.totals.data(), r.n_used, out);
                std::lock_guard<std::mutex> lock(send_mutex);
                control.send(static_cast<uint16_t>(SessionMessage::kMass), out);
            }
            continue;
        }
        if (type != SessionMessage::kStageInput) {
            throw make_error("{}: unexpected {} message", from.peer(), tp_message_name(frame.type));
        }
        const StepHeader step = decode_step(frame.payload, x, from.peer().c_str());
        require_finite(x.data(), x.size(), from.peer());
        const int n_tok = static_cast<int>(step.n_tok);
        const bool over_runs = (step.flags & kStepOverRuns) != 0;
        if (step.width != static_cast<uint32_t>(hp.n_embd) || n_tok < 1 || n_tok > forward.n_batch() ||
            (!over_runs && step.pos0 + step.n_tok > static_cast<uint32_t>(forward.n_ctx()))) {
            throw make_error("{}: stage input of {} rows x {} at {} does not fit (width {}, batch {}, context {})",
                             from.peer(), step.n_tok, step.width, step.pos0, hp.n_embd, forward.n_batch(),
                             forward.n_ctx());
        }
        if (links.pulse != nullptr) links.pulse->rows += static_cast<uint64_t>(n_tok);
        if (over_runs) {
            // Sequences and positions checked against this stage's caches.
            if (forward.check_runs(runs) != n_tok) {
                throw make_error("{}: stage input of {} rows over runs of other rows", from.peer(), n_tok);
            }
            block.forward_layers(x.data(), runs);
        } else {
            block.forward_layers(x.data(), static_cast<int>(step.pos0), n_tok);
        }
        if (next) {
            encode_step(step, x.data(), out);
            next->send(static_cast<uint16_t>(SessionMessage::kStageInput), out);
            continue;
        }
        // The last stage: logits of the rows the root asked for, to the root.
        if ((step.layer & (kWantLastLogits | kWantAllLogits | kWantRunLogits)) == 0) continue;
        const bool all = (step.layer & kWantAllLogits) != 0;
        int rows = all ? n_tok : 1;
        if ((step.layer & kWantRunLogits) != 0) {
            if (!over_runs) throw make_error("{}: run logits asked for a batch without runs", from.peer());
            // Each run's last row, or every row of a run with all_logits,
            // gathered for one product.
            const size_t n_embd = static_cast<size_t>(hp.n_embd);
            run_rows.clear();
            int begin = 0;
            for (const SeqRun& r : runs) {
                const int first = r.all_logits ? begin : begin + r.n_tok - 1;
                run_rows.insert(run_rows.end(), x.begin() + static_cast<std::ptrdiff_t>(first * n_embd),
                                x.begin() + static_cast<std::ptrdiff_t>((begin + r.n_tok) * n_embd));
                begin += r.n_tok;
            }
            rows = static_cast<int>(run_rows.size() / n_embd);
        }
        logits.resize(static_cast<size_t>(rows) * hp.n_vocab);
        const float* rows_in = (step.layer & kWantRunLogits) != 0 ? run_rows.data()
                               : all                              ? x.data()
                                   : x.data() + static_cast<size_t>(n_tok - 1) * hp.n_embd;
        forward.logits(rows_in, rows, logits.data());
        if (has_need) {
            require_finite(logits.data(), logits.size(), "this stage's logits");
            encode_candidates(logits.data(), rows, hp.n_vocab, 0, need, out);
            std::lock_guard<std::mutex> lock(send_mutex);
            control.send(static_cast<uint16_t>(SessionMessage::kCandidates), out);
            continue;
        }
        StepHeader reply = step;
        reply.n_tok = static_cast<uint32_t>(rows);
        reply.width = static_cast<uint32_t>(hp.n_vocab);
        reply.format = WireFormat::F32;
        encode_step(reply, logits.data(), out);
        std::lock_guard<std::mutex> lock(send_mutex);
        control.send(static_cast<uint16_t>(SessionMessage::kLogits), out);
    }
}

}  // namespace tessera

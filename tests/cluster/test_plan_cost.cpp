// The planner's link costs: a link probe measures the round trip and the
// rate a peer really gives (a peer that answers late is measured late), a
// worker refuses probes that would make it work for a peer, and the cost
// model picks tensor parallel over fast links, one node over slow ones, and
// never a plan whose nodes lack the memory.
#include "cluster/planner/link_probe.h"
#include "cluster/planner/plan_cost.h"
#include "cluster/planner/planner.h"
#include "cluster/session/messages.h"
#include "model/random_model.h"
#include "net/tcp.h"
#include "test_paths.h"
#include "util/error.h"

#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <thread>

namespace tessera {

namespace {

struct ChannelPair {
    std::unique_ptr<FrameChannel> root, worker;
};

ChannelPair connect_pair() {
    TcpListener listener(parse_host_port("127.0.0.1:0"));
    TcpStream client = TcpStream::connect({"127.0.0.1", listener.port()}, 2000);
    TcpStream server = listener.accept(2000);
    return {std::make_unique<FrameChannel>(std::move(client), ChannelLimits{}),
            std::make_unique<FrameChannel>(std::move(server), ChannelLimits{})};
}

// Answers probes as a worker does, each after `delay_ms`, until the root
// shuts the session.
std::thread answer_probes(FrameChannel& channel, int delay_ms) {
    return std::thread([&channel, delay_ms] {
        Frame frame;
        int answered = 0;
        for (;;) {
            channel.recv(frame, 5000);
            if (frame.type == static_cast<uint16_t>(SessionMessage::kShutdown)) return;
            std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms));
            answer_link_probe(channel, frame, answered, "root");
        }
    });
}

void shut(FrameChannel& channel) { channel.send(static_cast<uint16_t>(SessionMessage::kShutdown), std::span<const uint8_t>()); }

Frame probe_frame(std::vector<uint8_t> payload) {
    Frame f;
    f.type = static_cast<uint16_t>(SessionMessage::kLinkProbe);
    f.payload = std::move(payload);
    return f;
}

}  // namespace

TEST(LinkProbe, MeasuresTheRoundTripAndRateThePeerGives) {
    ChannelPair fast = connect_pair();
    std::thread a = answer_probes(*fast.worker, 0);
    const LinkCost loopback = measure_link(*fast.root, "worker", 5000);
    shut(*fast.root);
    a.join();
    EXPECT_GT(loopback.rtt_seconds, 0.0);
    EXPECT_LT(loopback.rtt_seconds, 0.005);
    EXPECT_GT(loopback.bytes_per_second, 10e6);

    // A peer that answers every probe 5 ms late: each ping takes at least
    // that, and the 4 timed bulk frames (1 MiB), answered one after another,
    // take at least 20 ms less half the measured round trip: at most 1 MiB /
    // 17.5 ms when the pings took 5 ms. (A loaded machine oversleeps: pings
    // of 13 ms once gave 62 MB/s, within the bound of their own round trip.)
    ChannelPair slow = connect_pair();
    std::thread b = answer_probes(*slow.worker, 5);
    const LinkCost late = measure_link(*slow.root, "worker", 5000);
    shut(*slow.root);
    b.join();
    EXPECT_GE(late.rtt_seconds, 0.005);
    EXPECT_LT(late.rtt_seconds, 0.1);
    if (late.rtt_seconds < 0.039) {
        EXPECT_LT(late.bytes_per_second, 1048576 / (0.020 - late.rtt_seconds / 2));
    }
}

TEST(LinkProbe, AWorkerRefusesProbesThatWouldMakeItWork) {
    ChannelPair p = connect_pair();
    int answered = 0;
    EXPECT_THROW(answer_link_probe(*p.worker, probe_frame({}), answered, "root"), Error);
    EXPECT_THROW(answer_link_probe(*p.worker, probe_frame({7, 0}), answered, "root"), Error);
    EXPECT_THROW(answer_link_probe(*p.worker, probe_frame(std::vector<uint8_t>(kMaxPingBytes + 1, kProbePing)), answered,
                                   "root"),
                 Error);
    EXPECT_THROW(answer_link_probe(*p.worker, probe_frame(std::vector<uint8_t>(kMaxBulkProbeBytes + 1, kProbeBulk)),
                                   answered, "root"),
                 Error);
    answered = 0;
    for (int i = 0; i < kMaxProbeFrames; ++i) answer_link_probe(*p.worker, probe_frame({kProbePing, 1}), answered, "root");
    EXPECT_THROW(answer_link_probe(*p.worker, probe_frame({kProbePing, 1}), answered, "root"), Error);
}

// The root's side against a broken or hostile worker: a wrong echo, an
// answer of another type or size, and silence are each an Error naming the
// worker (silence: the channel's error naming its address), silence within
// the timeout.
TEST(LinkProbe, AWrongOrSilentAnswerIsAnErrorNamingTheWorker) {
    const auto expect_error = [](const std::function<void(FrameChannel&)>& worker_side, const char* want) {
        ChannelPair p = connect_pair();
        std::thread t([&] {
            try {
                worker_side(*p.worker);
            } catch (const Error&) {
            }
        });
        const auto start = std::chrono::steady_clock::now();
        try {
            measure_link(*p.root, "worker 10.0.0.2:9999", 300);
            ADD_FAILURE() << "no error for: " << want;
        } catch (const Error& e) {
            EXPECT_NE(std::string(e.what()).find(want), std::string::npos) << e.what();
        }
        EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(3));
        p.root->close();
        t.join();
    };
    expect_error([](FrameChannel& c) {
        Frame f;
        c.recv(f, 2000);
        f.payload[1] ^= 1;
        c.send(f.type, f.payload);
    }, "worker 10.0.0.2:9999: echoed a different ping");
    expect_error([](FrameChannel& c) {
        Frame f;
        c.recv(f, 2000);
        c.send(static_cast<uint16_t>(SessionMessage::kHeartbeat), f.payload);
    }, "worker 10.0.0.2:9999: answered a link probe with a heartbeat frame");
    expect_error([](FrameChannel& c) {
        Frame f;
        c.recv(f, 2000);
        c.send(f.type, std::vector<uint8_t>(1 << 16, 0));
    }, "of 65536 bytes");
    expect_error([](FrameChannel& c) {
        Frame f;
        c.recv(f, 2000);
        std::this_thread::sleep_for(std::chrono::milliseconds(1000));
    }, "no data for 300 ms");
}

namespace {

const LlamaModel& cost_model() {
    static const LlamaModel model = [] {
        const std::string path = test::scratch_dir("plan_cost") + "/m.gguf";
        RandomModelSpec spec;
        spec.n_embd = 512;
        spec.n_layer = 8;
        spec.n_head = 8;
        spec.n_head_kv = 4;
        spec.n_ff = 1536;
        spec.n_vocab = 1000;
        spec.type = QuantType::Q8_0;
        write_random_model(spec, path);
        return LlamaModel(path);
    }();
    return model;
}

// Nodes whose probe takes 5 ms per layer (slow boards: a token computes for
// ~75 ms on one), each worker behind `link`.
std::vector<NodeFacts> nodes(size_t workers, LinkCost link, uint64_t memory = uint64_t{1} << 34) {
    std::vector<NodeFacts> out = {{"root", 0.005, memory, {}}};
    for (size_t i = 0; i < workers; ++i) out.push_back({"10.0.0." + std::to_string(i + 2) + ":9999", 0.005, memory, link});
    return out;
}

}  // namespace

TEST(PlanCost, FastLinksChooseTensorParallelAndSlowOnesOneNode) {
    const LlamaModel& model = cost_model();
    const std::vector<NodeFacts> lan = nodes(3, {1e-4, 125e6});
    const std::vector<PlanOption> options = plan_options(model, lan, false, 256, QuantType::F16);
    // One node; 3 sizes of tensor-parallel groups and of pipelines; hybrids
    // of 3 (a group of 2 and a stage) and 4 nodes (groups of 2 and 3).
    ASSERT_EQ(options.size(), 10u);
    EXPECT_EQ(options[0].kind, PlanKind::Single);
    EXPECT_EQ(options[0].network_seconds, 0.0);
    const PlanOption& best = best_option(options);
    EXPECT_EQ(best.kind, PlanKind::TensorParallel);
    EXPECT_EQ(best.stages[0].size(), 4u);
    EXPECT_EQ(describe_option(best, lan), "tensor parallel: root,10.0.0.2:9999,10.0.0.3:9999,10.0.0.4:9999");
    EXPECT_LT(best.compute_seconds, options[0].compute_seconds / 3);
    for (const PlanOption& o : options) {
        if (o.kind == PlanKind::Pipeline) {
            // A pipeline runs every layer in turn: no faster than one node.
            EXPECT_GE(o.seconds(), options[0].seconds());
            EXPECT_EQ(describe_option(o, lan).rfind("pipeline: root / ", 0), 0u);
        }
    }

    // 20 ms of round trip: 16 exchanges per token cost more than the compute
    // they split.
    const std::vector<NodeFacts> far = nodes(3, {0.02, 125e6});
    const std::vector<PlanOption> far_options = plan_options(model, far, false, 256, QuantType::F16);
    EXPECT_EQ(best_option(far_options).kind, PlanKind::Single);
    EXPECT_EQ(describe_option(best_option(far_options), far), "one node");
}

TEST(PlanCost, FasterLinksAndFewerBytesCostLess) {
    const LlamaModel& model = cost_model();
    const auto tp2 = [&](LinkCost link, bool fast) { return plan_options(model, nodes(1, link), fast, 256, QuantType::F16)[1]; };
    ASSERT_EQ(tp2({1e-3, 12.5e6}, false).kind, PlanKind::TensorParallel);
    EXPECT_LT(tp2({1e-4, 12.5e6}, false).network_seconds, tp2({1e-3, 12.5e6}, false).network_seconds);
    EXPECT_LT(tp2({1e-3, 125e6}, false).network_seconds, tp2({1e-3, 12.5e6}, false).network_seconds);
    EXPECT_LT(tp2({1e-3, 12.5e6}, true).network_seconds, tp2({1e-3, 12.5e6}, false).network_seconds);
    EXPECT_EQ(tp2({1e-3, 12.5e6}, true).compute_seconds, tp2({1e-3, 12.5e6}, false).compute_seconds);
}

// The exchange of a tensor-parallel plan, chosen from the links: on
// 100 Mbit, 4 nodes' exact partials cost less through a reduce-scatter (half
// the bytes a link carries, a second hop), in bands where the nodes compute
// long enough for a segment's transfer to hide behind the next band (these
// slow boards), whole where they compute in no time; 2 nodes' whole through
// the all-to-all; fast partials always go all-to-all, whole.
TEST(PlanCost, TheExchangeIsChosenFromTheLinks) {
    const LlamaModel& model = cost_model();
    const auto tp = [&](size_t workers, bool fast, double probe_seconds = 0.005) {
        std::vector<NodeFacts> group = nodes(workers, {1e-4, 12.5e6});
        for (NodeFacts& n : group) n.probe_seconds = probe_seconds;
        for (const PlanOption& o : plan_options(model, group, fast, 256, QuantType::F16)) {
            if (o.kind == PlanKind::TensorParallel && o.stages[0].size() == workers + 1) return o;
        }
        throw make_error("no tensor-parallel plan of {} nodes", workers + 1);
    };
    EXPECT_EQ(tp(3, false).exchange, PartialTopology::kReduceScatter);
    EXPECT_EQ(tp(3, false).partial_bands, 4);
    EXPECT_EQ(tp(3, false, 1e-7).exchange, PartialTopology::kReduceScatter);
    EXPECT_EQ(tp(3, false, 1e-7).partial_bands, 1);
    // 2 nodes: whole partials all-to-all; on boards this slow, each rank's
    // half goes to the other while it computes its own.
    EXPECT_EQ(tp(1, false, 1e-7).exchange, PartialTopology::kAllToAll);
    EXPECT_EQ(tp(1, false).exchange, PartialTopology::kReduceScatter);
    EXPECT_EQ(tp(1, false).partial_bands, 2);
    EXPECT_EQ(tp(3, true).exchange, PartialTopology::kAllToAll);
    EXPECT_EQ(tp(3, true).partial_bands, 1);
    // The bands' sync against the whole reduce-scatter's: with no compute
    // to hide behind, the same frames and the bands' dispatches; compute as
    // long as the transfers hides all of the scatter phase but the last
    // segment.
    const LinkCost link{1e-4, 12.5e6};
    const double P = 12500.0, x = P / (4 * 12.5e6), fixed = 2 * kSyncSoftwareSeconds + 3 * kBandDispatchSeconds;
    EXPECT_NEAR(banded_reduce_scatter_seconds(4, 0.0, P, link), fixed + 1e-4 + 6 * x, 1e-12);
    EXPECT_NEAR(banded_reduce_scatter_seconds(4, x, P, link), fixed + 1e-4 + 3 * x, 1e-12);
}

TEST(PlanCost, NodesWithoutTheMemoryAreNeverChosen) {
    const LlamaModel& model = cost_model();
    const SliceFootprint whole = slice_footprint(model, full_slice(model.hparams()), 256, QuantType::F16);
    // Each node holds 80% of the model: one node alone does not fit, any
    // split in two does (with the planner's margin), even over links so slow
    // that one node would win.
    std::vector<NodeFacts> far = nodes(1, {0.05, 1e6}, whole.total() * 8 / 10);
    // (--no-offload: no node may stream layers it cannot hold.)
    const std::vector<PlanOption> options = plan_options(model, far, false, 256, QuantType::F16, false);
    EXPECT_FALSE(options[0].fits);
    EXPECT_NE(options[0].why_not.find("root needs"), std::string::npos) << options[0].why_not;
    EXPECT_NE(best_option(options).kind, PlanKind::Single);
    EXPECT_TRUE(best_option(options).fits);

    // 10% each: nothing fits, and the refusal says why.
    far = nodes(1, {0.05, 1e6}, whole.total() / 10);
    const std::vector<PlanOption> none = plan_options(model, far, false, 256, QuantType::F16, false);
    EXPECT_THROW(best_option(none), PlanRefused);
    // Not even by streaming: 10% is below the floor of two layers and the rest.
    EXPECT_THROW(best_option(plan_options(model, far, false, 256, QuantType::F16, true)), PlanRefused);
}

// With offload, a node short of memory for its share streams layers from
// disk: the option fits, says who streams, and costs at least the streamed
// bytes at that node's disk speed; so a slow disk loses to a pipeline over a
// slow link, a fast one wins.
TEST(PlanCost, ANodeShortOfMemoryStreamsAtItsDiskSpeed) {
    const LlamaModel& model = cost_model();
    const SliceFootprint whole = slice_footprint(model, full_slice(model.hparams()), 256, QuantType::F16);
    std::vector<NodeFacts> far = nodes(1, {0.05, 1e6}, whole.total() * 7 / 10);
    const auto with_disk = [&](double rate) {
        for (NodeFacts& n : far) n.disk_read_bps = rate;
        return plan_options(model, far, false, 256, QuantType::F16, true);
    };
    const std::vector<PlanOption> slow = with_disk(10e6), fast = with_disk(10e9);
    ASSERT_TRUE(slow[0].fits);
    EXPECT_EQ(slow[0].kind, PlanKind::Single);
    EXPECT_NE(slow[0].streaming.find("root streams "), std::string::npos) << slow[0].streaming;
    EXPECT_NE(slow[0].streaming.find("at 10 MB/s"), std::string::npos) << slow[0].streaming;
    const MemoryFit fit = memory_fit(whole, 0, far[0].free_memory, true);
    ASSERT_TRUE(fit.streamed);
    EXPECT_GE(slow[0].compute_seconds, static_cast<double>(fit.streamed_bytes) / 10e6);
    EXPECT_LT(fast[0].compute_seconds, slow[0].compute_seconds);
    EXPECT_NE(best_option(slow).kind, PlanKind::Single);
    EXPECT_EQ(best_option(fast).kind, PlanKind::Single);
    // Split in two, each half fits: nobody streams.
    for (const PlanOption& o : slow) {
        if (o.kind == PlanKind::Pipeline) {
            EXPECT_TRUE(o.streaming.empty()) << o.streaming;
        }
    }
}

// A mixture of experts whose 256-channel units do not divide among two
// ranks: a whole-model group takes the balanced split where every host has
// the memory for its members' shares of it, else the mixed one; ranks on
// one host (the root and a worker at a loopback address) share its memory.
TEST(PlanCost, TheBalancedSplitIsCostedWhereEveryHostHoldsIt) {
    static const LlamaModel model = [] {
        const std::string path = test::scratch_dir("plan_cost") + "/moe.gguf";
        RandomModelSpec spec;
        spec.arch = "qwen3moe";
        spec.n_embd = 1024;
        spec.n_layer = 4;
        spec.n_head = 8;
        spec.n_head_kv = 2;
        spec.n_ff = 768;
        spec.n_expert = 64;
        spec.n_expert_used = 4;
        spec.n_vocab = 1000;
        spec.type = QuantType::Q4_K;
        spec.zero_weights = true;  // sizes only: ~340 MB of experts, no time
        write_random_model(spec, path);
        return LlamaModel(path);
    }();
    const ModelHParams& hp = model.hparams();
    const ReductionUnits units = reduction_units(model);
    ASSERT_EQ(units.ffn_channels, 256);
    const std::vector<double> two = {1, 1};
    uint64_t balanced = 0, mixed = 0;  // the larger share of each
    for (const Slice& s : plan_tensor_parallel(hp, two, units, MoeSplit::kBalanced)) {
        balanced = std::max(balanced, slice_footprint(model, s, 256, QuantType::F16).total());
    }
    for (const Slice& s : plan_tensor_parallel(hp, two, units, MoeSplit::kMixed)) {
        mixed = std::max(mixed, slice_footprint(model, s, 256, QuantType::F16).total());
    }
    // The dealt third of every expert: far more than the planner's margins.
    ASSERT_GT(balanced, mixed + 4 * headroom_margin(balanced));
    const auto tp2 = [&](std::string worker, uint64_t memory) {
        std::vector<NodeFacts> facts = nodes(1, {1e-4, 125e6}, memory);
        facts[1].name = std::move(worker);
        const std::vector<PlanOption> options = plan_options(model, facts, false, 256, QuantType::F16, false);
        EXPECT_EQ(options[1].kind, PlanKind::TensorParallel);
        return describe_option(options[1], facts);
    };
    const uint64_t plenty = uint64_t{1} << 34;
    EXPECT_EQ(tp2("10.0.0.2:9999", plenty), "tensor parallel: root,10.0.0.2:9999 (experts split by balanced)");
    // Each machine holds a mixed share but not a balanced one.
    const uint64_t between = (balanced + mixed) / 2 + headroom_margin(balanced);
    EXPECT_EQ(tp2("10.0.0.2:9999", between), "tensor parallel: root,10.0.0.2:9999 (experts split by mixed)");
    // Two machines' worth each: enough apart, not for two balanced shares on one.
    EXPECT_EQ(tp2("10.0.0.2:9999", 2 * between), "tensor parallel: root,10.0.0.2:9999 (experts split by balanced)");
    EXPECT_EQ(tp2("127.0.0.1:9999", 2 * between), "tensor parallel: root,127.0.0.1:9999 (experts split by mixed)");
    EXPECT_EQ(tp2("127.0.0.1:9999", plenty), "tensor parallel: root,127.0.0.1:9999 (experts split by balanced)");

    // A hybrid plan's group decides the same way for its own layers (its
    // leader does in a run): a group of two, then a stage of one.
    const auto hybrid = [&](uint64_t memory) {
        const std::vector<NodeFacts> facts = nodes(2, {1e-4, 125e6}, memory);
        for (const PlanOption& o : plan_options(model, facts, false, 256, QuantType::F16, false)) {
            if (o.kind == PlanKind::Hybrid) return std::make_pair(o, describe_option(o, facts));
        }
        ADD_FAILURE() << "no hybrid option";
        return std::make_pair(PlanOption(), std::string());
    };
    const auto [roomy, roomy_text] = hybrid(plenty);
    EXPECT_EQ(roomy_text, "hybrid: root,10.0.0.2:9999 / 10.0.0.3:9999 (stage 0: experts split by balanced)");
    ASSERT_EQ(roomy.stage_layers.size(), 2u);
    const std::pair<int, int> layers = {0, roomy.stage_layers[0]};
    uint64_t group_balanced = 0, group_mixed = 0;  // the larger share of each, over the group's layers
    for (const Slice& s : plan_stage_group(hp, layers, two, units, true, false, MoeSplit::kBalanced)) {
        group_balanced = std::max(group_balanced, slice_footprint(model, s, 256, QuantType::F16).total());
    }
    for (const Slice& s : plan_stage_group(hp, layers, two, units, true, false, MoeSplit::kMixed)) {
        group_mixed = std::max(group_mixed, slice_footprint(model, s, 256, QuantType::F16).total());
    }
    ASSERT_GT(group_balanced, group_mixed + 4 * headroom_margin(group_balanced));
    const auto [tight, tight_text] = hybrid((group_balanced + group_mixed) / 2 + headroom_margin(group_balanced));
    EXPECT_TRUE(tight.fits) << tight.why_not;
    EXPECT_EQ(tight_text, "hybrid: root,10.0.0.2:9999 / 10.0.0.3:9999 (stage 0: experts split by mixed)");
}

}  // namespace tessera

#include "apps/parallel_flags.h"

#include "cluster/session/session_messages.h"

#include <cstdio>

namespace tessera {

void add_parallel_flags(CLI::App* cmd, ParallelOptions& o) {
    cmd->add_option("--workers", o.workers, "Tensor parallel: workers HOST:PORT,HOST:PORT,... (tessera worker)");
    cmd->add_option("--local", o.local, "Tensor parallel on this machine: N processes (N-1 workers started here)")
        ->capture_default_str()
        ->check(CLI::Range(1, 64));
    cmd->add_option("--stages", o.stages,
                    "Pipeline / hybrid plan: stages separated by '/', each a ','-list of nodes led by its first; the "
                    "first stage starts with root (e.g. root,H:P/H:P)");
    cmd->add_option("--cluster", o.cluster, "Pipeline / hybrid plan from a cluster file (TOML: [[stage]] nodes, layers, "
                                            "weights, weight)");
    cmd->add_option("--stage-layers", o.stage_layers, "Layers per stage, root first (default: sized by measured speed)")
        ->delimiter(',');
    cmd->add_option("--weights", o.weights,
                    "Share of each rank (tensor parallel) or stage (pipeline), root first (default: measured speed; equal "
                    "for --local); after a lost node, ranks keep theirs and a spare takes the lost one's")
        ->delimiter(',');
    cmd->add_flag("--fast", o.fast, "Q8_0 partials on the wire (approximate; every rank adds the same rounded partials)");
    cmd->add_flag("--exact", o.exact, "F32 on the wire: greedy output equals a single node's (the default)");
    cmd->add_flag("--mmap", o.mmap,
                  "Compute from the mapped model file instead of a private copy of the weights (loads faster, "
                  "generates slower)");
    cmd->add_flag("--no-offload", o.no_offload,
                  "Refuse a plan where a node's share of the weights does not fit its memory (default: that node "
                  "keeps what fits and streams its later layers from disk every token)");
    cmd->add_option("--device", o.device,
                    "Where this process computes (a single node, the root's pipeline stage or tensor-parallel rank): "
                    "cpu (default) or vulkan[:N], the Nth Vulkan device of `tessera devices`");
    cmd->add_option("--gpu-layers", o.gpu_layers,
                    "With --device vulkan: the first N layers on the GPU, the rest on the CPU (default: all); also -ngl");
    cmd->add_flag("--tcp", o.tcp_only,
                  "Workers on this host talk over TCP too (default: through shared memory once connected)");
    cmd->add_option("--key", o.key_file,
                    "Key file shared by every node (tessera keygen): seal every frame; default: $TESSERA_KEY_FILE, "
                    "else plain frames");
    cmd->add_option("--step-timeout-ms", o.step_timeout_ms,
                    "Drop a worker that sends heartbeats but no result for this long (default: sized from its measured "
                    "speed)")
        ->check(CLI::Range(0, 3600000));
    cmd->add_option("--exchange", o.exchange,
                    "Tensor parallel: how the ranks sum their partials: all-to-all (one hop, every partial to every "
                    "rank), reduce-scatter (two hops, 2(N-1)/N of a partial per link; exact only) or auto "
                    "(reduce-scatter for exact partials from 4 ranks)")
        ->check(CLI::IsMember({"auto", "all-to-all", "reduce-scatter"}));
    cmd->add_option("--moe-split", o.moe_split,
                    "Tensor parallel of a mixture of experts: channels (every rank its share of every expert's "
                    "channels: each token's work balanced), experts (whole experts per rank, every channel), mixed "
                    "(channels, split another way for each of as many groups of experts as ranks: for channels that "
                    "do not divide evenly), balanced (channels, and the units that do not divide held by every "
                    "rank and dealt per token: every token's work even, for more memory per rank) or auto (every group, "
                    "the whole model's or a pipeline stage's, takes balanced where every machine has the memory for "
                    "its ranks' shares of it, else the lowest expected load on the busiest rank, for these ranks' "
                    "shares; a stage's leader decides for its group); the same bits every way")
        ->check(CLI::IsMember({"auto", "channels", "experts", "mixed", "balanced"}));
    cmd->add_option("--partial-bands", o.partial_bands,
                    "Tensor parallel: send each rank's partial of a step in N bands, each as soon as the product has "
                    "it, so its transfer overlaps the rest of the product (for slow links; each band costs a frame)")
        ->check(CLI::Range(1, kMaxPartialBands));
    cmd->add_option("--spare", o.spares,
                    "Spare nodes HOST:PORT,... (tessera worker) that take the place of a node lost mid-run");
    cmd->add_option("--recover-ms", o.recover_ms,
                    "How long to try to recover a lost connection or node before giving up (0: fail at once)")
        ->capture_default_str()
        ->check(CLI::Range(0, 3600000));
    cmd->add_flag("--auto", o.auto_plan,
                  "Survey --workers (speed, free memory, each link's round trip and rate) and run the fastest plan of "
                  "them that fits: one node, tensor parallel, pipeline or hybrid (tessera plan --auto prints them without running)");
    cmd->add_flag("--discover", o.discover,
                  "Find the workers on the local network that hold this cluster's key (tessera worker --advertise; "
                  "sealed UDP probes: IPv4 broadcast and multicast, IPv6 link-local multicast), then survey them and "
                  "run the fastest plan as --auto does");
    cmd->add_option("--discover-ms", o.discover_ms, "How long --discover waits for answers, in ms")
        ->capture_default_str()
        ->check(CLI::Range(100, 60000));
    cmd->add_option("--discovery-port", o.discovery_port, "The UDP port of --discover (the workers' --discovery-port)")
        ->capture_default_str()
        ->check(CLI::Range(1, 65535));
    cmd->add_option("--prefill", o.prefill,
                    "How a prompt is computed: 'plan' (on the plan that generates) or 'sp' (sequence parallel: each "
                    "node of --local/--workers holds the whole model and computes a chunk of the prompt; generation "
                    "goes on on the root)")
        ->capture_default_str()
        ->check(CLI::IsMember({"plan", "sp"}));
    cmd->add_option("--generate", o.generate,
                    "With --prefill sp: where generation goes on after the prompt: 'root' (the root alone), 'tp' (a "
                    "tensor-parallel group of the same nodes, each keeping its heads' rows of the prompt's cache) or "
                    "'pipeline' (stages in node order, each keeping its layers' rows; --stage-layers sizes them)")
        ->capture_default_str()
        ->check(CLI::IsMember({"root", "tp", "pipeline"}));
    cmd->add_option("--codebooks", o.codebooks,
                    "With --prefill sp: K/V rows travel as indices of these codebooks (tessera vq-fit; every worker "
                    "started with the same --codebooks), not exactly: fewer bytes, approximate prompt cache");
    cmd->add_option("--timeout-ms", o.timeout_ms, "Network timeout for connects, reads and writes, in ms")
        ->capture_default_str()
        ->check(CLI::Range(100, 600000));
}

// ", streams ~N MiB of its layers from disk per token (its memory
// holds the rest)" where a node's share does not fit its memory.
std::string streamed_note(uint64_t streamed_bytes) {
    if (streamed_bytes == 0) return "";
    return fmt::format(", streams ~{:.1f} MiB of its layers from disk per token (memory holds the rest; "
                       "--no-offload refuses instead)", streamed_bytes / 1048576.0);
}

void print_ranks(const TensorParallelDecoder& decoder) {
    for (size_t r = 0; r < decoder.ranks().size(); ++r) {
        const TpRankInfo& info = decoder.ranks()[r];
        std::fprintf(stderr, "rank %zu %s: %s, weight %.2f, %.1f MiB%s%s%s%s\n", r, info.address.c_str(),
                     describe_slice(info.slice).c_str(), info.weight, info.footprint_bytes / 1048576.0,
                     info.shared_memory ? ", shared memory" : "", streamed_note(info.streamed_bytes).c_str(),
                     info.device.empty() ? "" : ", on ", info.device.c_str());
    }
}

}  // namespace tessera

namespace tessera {

void print_stages(const PipelineDecoder& decoder) {
    for (size_t s = 0; s < decoder.stages().size(); ++s) {
        const StageInfo& info = decoder.stages()[s];
        std::string group;
        for (const std::string& member : info.group) group += " + " + member;
        std::fprintf(stderr, "stage %zu %s%s: %s, weight %.2f, %.1f MiB%s%s%s\n", s, info.address.c_str(), group.c_str(),
                     describe_slice(info.slice).c_str(), info.weight, info.footprint_bytes / 1048576.0,
                     streamed_note(info.streamed_bytes).c_str(), info.device.empty() ? "" : ", on ",
                     info.device.c_str());
    }
}

void print_sequence_nodes(const SpPrefillDecoder& decoder) {
    for (size_t i = 0; i < decoder.nodes().size(); ++i) {
        const SpNodeInfo& info = decoder.nodes()[i];
        std::fprintf(stderr, "prefill node %zu %s: the whole model, weight %.2f%s\n", i, info.address.c_str(),
                     info.weight, i == 0 && !decoder.hands_off() ? ", generates" : "");
    }
    std::fprintf(stderr, "prefill exchange: %s\n", decoder.describe_exchange().c_str());
    if (decoder.hands_off()) {
        std::fprintf(stderr, "generation: %s of the %zu nodes after the prompt, each keeping its %s rows of the "
                             "prompt's cache (%s)\n", decoder.hands_to_pipeline() ? "a pipeline" : "a tensor-parallel group",
                     decoder.nodes().size(), decoder.hands_to_pipeline() ? "layers'" : "heads'",
                     decoder.compressed() ? "other nodes' positions as rebuilt from codebook indices" : "exact");
    }
}

void print_sequence_chunks(const SpPrefillDecoder& decoder) {
    const SpHandoffInfo& h = decoder.handoff();
    if (decoder.group() != nullptr) {
        std::fprintf(stderr, "generation handed to %zu ranks after %d positions: %.2f MiB of K/V rows sent, %.1f ms\n",
                     decoder.group()->ranks().size(), h.positions, h.bytes_sent / 1048576.0, h.seconds * 1e3);
        print_ranks(*decoder.group());
    }
    if (decoder.pipeline() != nullptr) {
        std::fprintf(stderr, "generation handed to %zu stages after %d positions: %.2f MiB of K/V rows sent, %.1f ms\n",
                     decoder.pipeline()->stages().size(), h.positions, h.bytes_sent / 1048576.0, h.seconds * 1e3);
        print_stages(*decoder.pipeline());
    }
    if (decoder.prompts() == 0) return;
    // Bytes as each node saw them: every node's pass through the root.
    uint64_t root_sent = 0, root_received = 0;
    for (size_t i = 1; i < decoder.nodes().size(); ++i) {
        root_sent += decoder.nodes()[i].bytes_sent;
        root_received += decoder.nodes()[i].bytes_received;
    }
    for (size_t i = 0; i < decoder.nodes().size(); ++i) {
        const SpNodeInfo& info = decoder.nodes()[i];
        const uint64_t sent = i == 0 ? root_sent : info.bytes_received;
        const uint64_t received = i == 0 ? root_received : info.bytes_sent;
        std::fprintf(stderr, "prefill node %zu %s: positions %d..%d (%d), sent %.2f MiB, received %.2f MiB\n", i,
                     info.address.c_str(), info.last_chunk.pos0, info.last_chunk.pos0 + info.last_chunk.n_tok,
                     info.last_chunk.n_tok, sent / 1048576.0, received / 1048576.0);
    }
}

void print_plan(const DecoderSetup& setup) {
    if (!setup.plan_report.empty()) std::fprintf(stderr, "%s", setup.plan_report.c_str());
    if (!setup.device.empty()) std::fprintf(stderr, "the root computes on %s\n", setup.device.c_str());
    if (setup.streamed_bytes > 0) std::fprintf(stderr, "single node%s\n", streamed_note(setup.streamed_bytes).c_str());
    if (setup.sequence_parallel != nullptr) print_sequence_nodes(*setup.sequence_parallel);
    if (setup.tensor_parallel != nullptr) print_ranks(*setup.tensor_parallel);
    if (setup.pipeline != nullptr) print_stages(*setup.pipeline);
}

nlohmann::json plan_json(const DecoderSetup& setup) {
    nlohmann::json nodes = nlohmann::json::array();
    if (setup.pipeline != nullptr) {
        for (size_t s = 0; s < setup.pipeline->stages().size(); ++s) {
            const StageInfo& info = setup.pipeline->stages()[s];
            nodes.push_back({{"role", "stage " + std::to_string(s)}, {"address", info.address},
                             {"group", info.group}, {"slice", describe_slice(info.slice)}, {"weight", info.weight},
                             {"mib", info.footprint_bytes / 1048576.0},
                             {"streamed_mib_per_token", info.streamed_bytes / 1048576.0},
                             {"device", info.device.empty() ? "cpu" : info.device}});
        }
    } else if (setup.tensor_parallel != nullptr) {
        for (size_t r = 0; r < setup.tensor_parallel->ranks().size(); ++r) {
            const TpRankInfo& info = setup.tensor_parallel->ranks()[r];
            nodes.push_back({{"role", "rank " + std::to_string(r)}, {"address", info.address},
                             {"slice", describe_slice(info.slice)}, {"weight", info.weight},
                             {"mib", info.footprint_bytes / 1048576.0},
                             {"streamed_mib_per_token", info.streamed_bytes / 1048576.0},
                             {"device", info.device.empty() ? "cpu" : info.device}});
        }
    } else {
        nodes.push_back({{"role", "single"}, {"address", "this process"}, {"slice", "the whole model"},
                         {"weight", 1.0}, {"streamed_mib_per_token", setup.streamed_bytes / 1048576.0},
                         {"device", setup.device.empty() ? "cpu" : setup.device}});
    }
    return nodes;
}

}  // namespace tessera

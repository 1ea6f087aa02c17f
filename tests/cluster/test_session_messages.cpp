// Fields of the session's messages read as hostile input: the hello-reply's
// cpu_target (the SIMD target a worker's kernels run on) and disk_read_bps
// (its disk's read rate, for the cost of streamed layers), the assign's
// offload; an older peer leaves each out; a wrong type, an oversized string
// or a number out of range is an Error, never an exception of another kind;
// the assign's handoff positions (a rank taking over from sequence-parallel
// prefill) stay inside the context; a slice's experts and a group's split.
#include "cluster/session/session_messages.h"
#include "util/error.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <string>
#include <utility>
#include <vector>

namespace tessera {

namespace {

// The assign of a pipeline stage as a root of this version sends it, less
// the optional fields the tests add.
nlohmann::json stage_assign() {
    return {{"role", "stage"},
            {"slice", {{"layers", {0, 2}}, {"kv_heads", {0, 4}}, {"ffn", {0, 64}}}},
            {"n_ctx", 64},
            {"n_batch", 8},
            {"kv_type_k", "f16"},
            {"kv_type_v", "f16"},
            {"partial_format", 0}};
}

// A hello-reply of this release with the required fields only.
nlohmann::json reply_base() {
    nlohmann::json j = {{"ok", true}, {"free_memory", 1024}, {"has_model", true}};
    j.update(protocol_fields());
    return j;
}

}  // namespace

// The protocol is checked before anything else in the hello and its reply,
// read leniently (any JSON), and a mismatch is a VersionMismatch naming the
// peer's release, cut short and printable.
TEST(SessionMessages, HelloAndReplyRequireThisProtocol) {
    nlohmann::json hello = hello_json(std::string(16, 'a'));
    EXPECT_NO_THROW(parse_hello(hello, "root"));
    EXPECT_NO_THROW(parse_hello_reply(reply_base(), "worker"));
    const std::vector<nlohmann::json> others = {
        nlohmann::json(nullptr), nlohmann::json("2"), nlohmann::json(2.5), nlohmann::json(kProtocolVersion + 1),
        nlohmann::json(-7), nlohmann::json(int64_t{1} << 40), nlohmann::json::array({kProtocolVersion})};
    for (const nlohmann::json& p : others) {
        nlohmann::json h = hello;
        h["protocol"] = p;
        EXPECT_THROW(parse_hello(h, "root"), VersionMismatch) << p.dump();
        nlohmann::json r = reply_base();
        r["protocol"] = p;
        r["ok"] = "not even a boolean";  // the protocol decides first
        EXPECT_THROW(parse_hello_reply(r, "worker"), VersionMismatch) << p.dump();
    }
    nlohmann::json r = reply_base();
    r.erase("protocol");
    r["version"] = std::string(300, 'v') + "\n\x01";
    try {
        parse_hello_reply(r, "worker w");
        ADD_FAILURE() << "no protocol accepted";
    } catch (const VersionMismatch& e) {
        const std::string m = e.what();
        EXPECT_EQ(m.find('\n'), std::string::npos) << m;
        EXPECT_LT(m.size(), 300u) << m;
        EXPECT_NE(m.find("worker w runs tessera vvvv"), std::string::npos) << m;
    }
    EXPECT_THROW(parse_hello(nlohmann::json::array(), "root"), VersionMismatch);
}

TEST(SessionMessages, HelloReplyCpuTargetIsAShortStringOrAbsent) {
    const nlohmann::json base = reply_base();
    nlohmann::json j = base;
    j["cpu_target"] = "AVX2";
    EXPECT_EQ(parse_hello_reply(j, "peer").cpu_target, "AVX2");
    EXPECT_EQ(parse_hello_reply(base, "peer").cpu_target, "");  // an older worker
    for (const nlohmann::json& bad :
         {nlohmann::json(5), nlohmann::json::array({"AVX2"}), nlohmann::json(true), nlohmann::json(std::string(33, 'A'))}) {
        j["cpu_target"] = bad;
        EXPECT_THROW(parse_hello_reply(j, "peer"), Error) << bad.dump();
    }
}

// A worker on a GPU names it (worker --device vulkan); an older worker, or
// one on its CPU, says nothing.
TEST(SessionMessages, HelloReplyDeviceIsABoundedStringOrAbsent) {
    const nlohmann::json base = reply_base();
    nlohmann::json j = base;
    j["device"] = "vulkan:0 NVIDIA H100";
    EXPECT_EQ(parse_hello_reply(j, "peer").device, "vulkan:0 NVIDIA H100");
    EXPECT_EQ(parse_hello_reply(base, "peer").device, "");
    for (const nlohmann::json& bad : {nlohmann::json(0), nlohmann::json::array({"vulkan:0"}), nlohmann::json(false),
                                      nlohmann::json::object(), nlohmann::json(std::string(257, 'g'))}) {
        j["device"] = bad;
        EXPECT_THROW(parse_hello_reply(j, "peer"), Error) << bad.dump();
    }
}

TEST(SessionMessages, HelloReplyDiskRateIsABoundedNumberOrAbsent) {
    const nlohmann::json base = reply_base();
    nlohmann::json j = base;
    j["disk_read_bps"] = 1.5e9;
    EXPECT_EQ(parse_hello_reply(j, "peer").disk_read_bps, 1.5e9);
    EXPECT_EQ(parse_hello_reply(base, "peer").disk_read_bps, 0.0);  // not measured
    for (const nlohmann::json& bad : {nlohmann::json(-1.0), nlohmann::json(1e300), nlohmann::json("fast"),
                                      nlohmann::json::array({1}), nlohmann::json(nullptr)}) {
        j["disk_read_bps"] = bad;
        EXPECT_THROW(parse_hello_reply(j, "peer"), Error) << bad.dump();
    }
}

TEST(SessionMessages, AssignOffloadIsABooleanOrAbsent) {
    const nlohmann::json base = stage_assign();
    EXPECT_FALSE(parse_assign(base, "root").offload);  // an older root: refuse, do not stream
    nlohmann::json j = base;
    j["offload"] = true;
    EXPECT_TRUE(parse_assign(j, "root").offload);
    for (const nlohmann::json& bad : {nlohmann::json(1), nlohmann::json("yes"), nlohmann::json::object()}) {
        j["offload"] = bad;
        EXPECT_THROW(parse_assign(j, "root"), Error) << bad.dump();
    }
}

// A slice's experts (the expert split) and a group's split: ranges in order,
// a split by name; an older root sends neither.
TEST(SessionMessages, AssignExpertsAndMoeSplit) {
    const nlohmann::json base = stage_assign();
    const AssignMessage plain = parse_assign(base, "root");
    EXPECT_EQ(plain.slice.n_experts(), 0);
    EXPECT_FALSE(plain.moe_split.has_value());
    nlohmann::json j = base;
    j["slice"]["experts"] = {3, 7};
    j["moe_split"] = "experts";
    const AssignMessage m = parse_assign(j, "root");
    EXPECT_EQ(m.slice.expert_begin, 3);
    EXPECT_EQ(m.slice.expert_end, 7);
    EXPECT_EQ(m.moe_split, MoeSplit::kExperts);
    j["moe_split"] = "channels";
    EXPECT_EQ(parse_assign(j, "root").moe_split, MoeSplit::kChannels);
    for (const nlohmann::json& bad : {nlohmann::json("auto"), nlohmann::json("rows"), nlohmann::json(1)}) {
        j["moe_split"] = bad;
        EXPECT_THROW(parse_assign(j, "root"), Error) << bad.dump();
    }
    j["moe_split"] = "experts";
    for (const nlohmann::json& bad : {nlohmann::json({7, 3}), nlohmann::json({-1, 2}), nlohmann::json({0, 1 << 30}),
                                      nlohmann::json("0-3")}) {
        j["slice"]["experts"] = bad;
        EXPECT_THROW(parse_assign(j, "root"), Error) << bad.dump();
    }
    // The mixed split: a second part's experts and channels, both or neither,
    // round trip through slice_to_json.
    j["slice"]["experts"] = {0, 4};
    j["moe_split"] = "mixed";
    j["slice"]["tails"] = {{4, 6, 256, 768}, {6, 8, 512, 768}};
    const AssignMessage mixed = parse_assign(j, "root");
    EXPECT_EQ(mixed.moe_split, MoeSplit::kMixed);
    ASSERT_EQ(mixed.slice.tails.size(), 2u);
    EXPECT_EQ(mixed.slice.tails[0], (ExpertPart{4, 6, 256, 768}));
    EXPECT_EQ(mixed.slice.tails[1], (ExpertPart{6, 8, 512, 768}));
    EXPECT_EQ(slice_to_json(mixed.slice)["tails"], j["slice"]["tails"]);
    EXPECT_FALSE(slice_to_json(plain.slice).contains("tails"));
    for (const nlohmann::json& bad :
         {nlohmann::json({{8, 4, 0, 256}}), nlohmann::json({{4, 8, 768, 256}}), nlohmann::json({{-1, 2, 0, 256}}),
          nlohmann::json({{4, 8, 0}}), nlohmann::json({4, 8, 0, 256}), nlohmann::json("4-8"),
          nlohmann::json({{4, 8, 0, 256.5}}), nlohmann::json(std::vector<nlohmann::json>(64, {4, 8, 0, 256}))}) {
        j["slice"]["tails"] = bad;
        EXPECT_THROW(parse_assign(j, "root"), Error) << bad.dump();
    }
    // The balanced split: the shared tail's turn, one [count, index] row per
    // tail, sent only where a tail is dealt.
    j["moe_split"] = "balanced";
    j["slice"]["experts"] = {0, 8};
    j["slice"]["ffn"] = {0, 256};
    j["slice"]["tails"] = {{0, 8, 512, 768}};
    j["slice"]["tail_deals"] = {{2, 1}};
    const AssignMessage balanced = parse_assign(j, "root");
    EXPECT_EQ(balanced.moe_split, MoeSplit::kBalanced);
    ASSERT_EQ(balanced.slice.tails.size(), 1u);
    EXPECT_EQ(balanced.slice.tails[0], (ExpertPart{0, 8, 512, 768, 2, 1}));
    EXPECT_EQ(slice_to_json(balanced.slice)["tail_deals"], j["slice"]["tail_deals"]);
    EXPECT_FALSE(slice_to_json(mixed.slice).contains("tail_deals"));
    for (const nlohmann::json& bad :
         {nlohmann::json({{2, 2}}), nlohmann::json({{0, 0}}), nlohmann::json({{2, -1}}), nlohmann::json({{65, 1}}),
          nlohmann::json({{2}}), nlohmann::json({2, 1}), nlohmann::json({{2, 1}, {2, 0}}), nlohmann::json::array(),
          nlohmann::json("2/1"), nlohmann::json({{2, 0.5}})}) {
        j["slice"]["tail_deals"] = bad;
        EXPECT_THROW(parse_assign(j, "root"), Error) << bad.dump();
    }
}

// A stage's ready message reports the share its leader planned: read with
// the assigned embeds, outputs and vocabulary rows; an older worker's (no
// slice) keeps the assigned one; other layers, or ranges out of order, are
// refused by name.
TEST(SessionMessages, ReadyReportsTheLeadersShare) {
    Slice assigned;
    assigned.layer_begin = 2;
    assigned.layer_end = 4;
    assigned.kv_head_end = 2;
    assigned.ffn_end = 512;
    assigned.expert_end = 8;
    assigned.embeds = false;
    assigned.outputs = true;
    assigned.vocab_end = 1000;
    const nlohmann::json older = {{"ok", true}};
    EXPECT_EQ(describe_slice(parse_reported_slice(JsonFields(older, "w", "ready"), assigned)),
              describe_slice(assigned));
    Slice planned = assigned;
    planned.ffn_begin = 0;
    planned.ffn_end = 256;
    planned.tails.push_back({0, 8, 512, 768, 2, 1});
    nlohmann::json ready = {{"ok", true}, {"slice", slice_to_json(planned)}};
    ready["slice"]["vocab"] = {0, 0};  // the leader's head rows are not its to change
    const Slice read = parse_reported_slice(JsonFields(ready, "w", "ready"), assigned);
    EXPECT_EQ(describe_slice(read), describe_slice(planned));
    EXPECT_TRUE(read.outputs);
    EXPECT_FALSE(read.embeds);
    for (const nlohmann::json& layers : {nlohmann::json({0, 2}), nlohmann::json({2, 3})}) {
        nlohmann::json moved = ready;
        moved["slice"]["layers"] = layers;
        try {
            parse_reported_slice(JsonFields(moved, "10.0.0.2:9999", "ready"), assigned);
            ADD_FAILURE() << "layers " << layers.dump() << " taken";
        } catch (const Error& e) {
            EXPECT_NE(std::string(e.what()).find("layers"), std::string::npos) << e.what();
            EXPECT_NE(std::string(e.what()).find("10.0.0.2:9999"), std::string::npos) << e.what();
        }
    }
    for (const nlohmann::json& bad : {nlohmann::json({512, 256}), nlohmann::json("0-256"), nlohmann::json({0, 1 << 30})}) {
        nlohmann::json wrong = ready;
        wrong["slice"]["ffn"] = bad;
        EXPECT_THROW(parse_reported_slice(JsonFields(wrong, "w", "ready"), assigned), Error) << bad.dump();
    }
    nlohmann::json not_object = ready;
    not_object["slice"] = "layers 2-4";
    EXPECT_THROW(parse_reported_slice(JsonFields(not_object, "w", "ready"), assigned), Error);
}

TEST(SessionMessages, AssignHandoffPositionsStayInsideTheContext) {
    const nlohmann::json base = {
        {"slice", {{"layers", {0, 2}}, {"kv_heads", {1, 2}}, {"ffn", {0, 64}}}},
        {"n_ctx", 64},
        {"n_batch", 8},
        {"kv_type_k", "f16"},
        {"kv_type_v", "f16"},
        {"partial_format", 3},
        {"rank", 1},
        {"mesh", {"127.0.0.1:9"}},
        {"mesh_token", "0123456789abcdef0123456789abcdef"}};
    const AssignMessage fresh = parse_assign(base, "root");  // an older root, or a plain group
    EXPECT_EQ(fresh.handoff_positions, 0);
    EXPECT_EQ(fresh.handoff_from, 0);
    nlohmann::json j = base;
    j["handoff_positions"] = 64;
    j["handoff_from"] = 40;
    const AssignMessage m = parse_assign(j, "root");
    EXPECT_EQ(m.handoff_positions, 64);
    EXPECT_EQ(m.handoff_from, 40);
    // Past the context, negative, of another type, or rows sent from past
    // the positions kept: refused.
    for (const auto& [positions, from] : std::vector<std::pair<nlohmann::json, nlohmann::json>>{
             {65, 0}, {-1, 0}, {"64", 0}, {1e9, 0}, {nullptr, 0}, {64, 65}, {64, -1}, {32, 40}, {64, 1.5}}) {
        j["handoff_positions"] = positions;
        j["handoff_from"] = from;
        EXPECT_THROW(parse_assign(j, "root"), Error) << positions.dump() << " " << from.dump();
    }
}

}  // namespace tessera

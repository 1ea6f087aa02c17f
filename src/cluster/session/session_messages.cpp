#include "cluster/session/session_messages.h"

#include "cluster/session/slice_cache.h"
#include "util/error.h"
#include "util/version.h"

#include <sodium.h>

#include <algorithm>
#include <cctype>

namespace tessera {

namespace {

constexpr int64_t kMaxLayers = 1 << 16;
constexpr int64_t kMaxUnits = 1 << 24;  // heads, channels, vocab rows
constexpr size_t kMaxAddress = 300;

Slice parse_slice(const JsonFields& s) {
    Slice slice;
    std::tie(slice.layer_begin, slice.layer_end) = s.range("layers", 0, kMaxLayers);
    std::tie(slice.kv_head_begin, slice.kv_head_end) = s.range("kv_heads", 0, kMaxUnits);
    std::tie(slice.ffn_begin, slice.ffn_end) = s.range("ffn", 0, kMaxUnits);
    if (s.has("vocab")) std::tie(slice.vocab_begin, slice.vocab_end) = s.range("vocab", 0, kMaxUnits);
    if (s.has("experts")) std::tie(slice.expert_begin, slice.expert_end) = s.range("experts", 0, kMaxUnits);
    if (s.has("tails")) {
        // [[expert_begin, expert_end, ffn_begin, ffn_end], ...]: ranges in
        // order, checked against the model by validate_slice.
        for (const std::vector<int64_t>& t : s.integer_rows("tails", kMaxExpertParts - 1, 4, 0, kMaxUnits)) {
            if (t[0] > t[1] || t[2] > t[3]) s.refuse("tails", "holds a part whose ranges end before they begin");
            const auto at = [&](size_t k) { return static_cast<int32_t>(t[k]); };
            slice.tails.push_back({at(0), at(1), at(2), at(3)});
        }
    }
    if (s.has("tail_deals")) {
        // [[deal_count, deal_index], ...], one per tail (the balanced split).
        const std::vector<std::vector<int64_t>> deals =
            s.integer_rows("tail_deals", kMaxExpertParts - 1, 2, 0, kMaxExpertParts);
        if (deals.size() != slice.tails.size()) s.refuse("tail_deals", "does not have one row per tail");
        for (size_t i = 0; i < deals.size(); ++i) {
            if (deals[i][0] < 1 || deals[i][1] >= deals[i][0]) s.refuse("tail_deals", "holds a turn outside its deal");
            slice.tails[i].deal_count = static_cast<int32_t>(deals[i][0]);
            slice.tails[i].deal_index = static_cast<int32_t>(deals[i][1]);
        }
    }
    slice.embeds = false;
    slice.outputs = false;
    return slice;
}

bool is_token(const std::string& s) {
    return s.size() == 32 && s.find_first_not_of("0123456789abcdef") == std::string::npos;
}

}  // namespace

json slice_to_json(const Slice& s) {
    json j = {{"layers", {s.layer_begin, s.layer_end}},
              {"kv_heads", {s.kv_head_begin, s.kv_head_end}},
              {"ffn", {s.ffn_begin, s.ffn_end}},
              {"experts", {s.expert_begin, s.expert_end}},
              {"vocab", {s.vocab_begin, s.vocab_end}}};
    if (!s.tails.empty()) {
        json tails = json::array();
        json deals = json::array();
        bool dealt = false;
        for (const ExpertPart& t : s.tails) {
            tails.push_back({t.expert_begin, t.expert_end, t.ffn_begin, t.ffn_end});
            deals.push_back({t.deal_count, t.deal_index});
            dealt = dealt || t.dealt();
        }
        j["tails"] = tails;
        if (dealt) j["tail_deals"] = deals;
    }
    return j;
}

Slice parse_reported_slice(const JsonFields& ready, const Slice& assigned) {
    if (!ready.has("slice")) return assigned;
    const JsonFields fields = ready.object("slice");
    Slice slice = parse_slice(fields);
    if (slice.layer_begin != assigned.layer_begin || slice.layer_end != assigned.layer_end) {
        fields.refuse("layers", "are not the layers its stage was assigned");
    }
    slice.embeds = assigned.embeds;
    slice.outputs = assigned.outputs;
    slice.vocab_begin = assigned.vocab_begin;
    slice.vocab_end = assigned.vocab_end;
    return slice;
}

MeshHello parse_mesh_hello(const json& j, const std::string& peer) {
    const JsonFields f(j, peer, "mesh-hello");
    MeshHello m;
    m.token = f.string("token", 32);
    if (!is_token(m.token)) throw make_error("{}: mesh hello carries no valid session token", peer);
    m.rank = static_cast<int>(f.integer("rank", 1, 256));
    return m;
}

std::string new_mesh_token() {
    uint8_t bytes[16];
    randombytes_buf(bytes, sizeof bytes);
    std::string out;
    for (uint8_t b : bytes) out += fmt::format("{:02x}", b);
    return out;
}

json protocol_fields() { return {{"protocol", kProtocolVersion}, {"version", tessera_version()}}; }

void require_same_protocol(const json& j, const std::string& who, const char* peer_role) {
    // Read leniently: whatever else a peer of another release sends, these
    // two fields decide, and the error must name them.
    int protocol = 1;
    std::string version;
    if (j.is_object()) {
        const auto p = j.find("protocol");
        if (p != j.end()) protocol = p->is_number_integer() ? static_cast<int>(std::clamp<int64_t>(p->get<int64_t>(), -1, 1 << 20)) : -1;
        const auto v = j.find("version");
        if (v != j.end() && v->is_string()) version = v->get<std::string>().substr(0, 32);
        for (char& c : version) {
            if (!std::isprint(static_cast<unsigned char>(c))) c = '?';
        }
    }
    if (protocol == kProtocolVersion) return;
    const std::string theirs = protocol == 1 && version.empty()
                                   ? std::string("a release before 0.9 (protocol 1)")
                                   : fmt::format("tessera {} (protocol {})", version.empty() ? "?" : version, protocol);
    const bool upgrade_them = protocol < kProtocolVersion;
    const std::string self_role = std::string(peer_role) == "root" ? "worker" : "root";
    throw VersionMismatch(fmt::format("{} runs {}, this {} tessera {} (protocol {}): upgrade {} to tessera {}", who,
                                      theirs, self_role, tessera_version(), kProtocolVersion,
                                      upgrade_them ? fmt::format("that {}", peer_role) : fmt::format("this {}", self_role),
                                      upgrade_them ? std::string(tessera_version()) : (version.empty() ? "?" : version)));
}

json hello_json(const std::string& fingerprint) {
    json j = protocol_fields();
    j["fingerprint"] = fingerprint;
    return j;
}

HelloMessage parse_hello(const json& j, const std::string& peer) {
    require_same_protocol(j, fmt::format("root {}", peer), "root");
    const JsonFields f(j, peer, "hello");
    HelloMessage m;
    m.fingerprint = f.string("fingerprint", 64);
    if (!is_fingerprint(m.fingerprint)) throw make_error("{}: hello names no valid model fingerprint", peer);
    m.shm = f.boolean("shm", false);
    return m;
}

std::string kv_type_text(QuantType type) {
    std::string name = quant_type_name(type);
    for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return name;
}

QuantType parse_kv_type(const std::string& text, const std::string& peer) {
    const std::optional<QuantType> type = parse_quant_type(text);
    if (!type || !is_kv_cache_type(*type) || kv_type_text(*type) != text) {
        throw make_error("{}: unknown KV cache type '{}' (f32, f16, q8_0 or q4_0)", peer, text);
    }
    return *type;
}

json sparse_json(const SparseOptions& o) {
    return {{"window", o.window}, {"block", o.block}, {"globals", o.globals}, {"log_stride", o.log_stride},
            {"landmarks", landmark_mode_name(o.landmarks)}};
}

AssignMessage parse_assign(const json& j, const std::string& peer) {
    const JsonFields f(j, peer, "assign");
    AssignMessage m;
    const std::string role = f.string("role", 16, "tensor");
    if (role != "tensor" && role != "stage" && role != "sequence") throw make_error("{}: unknown role '{}'", peer, role);
    m.stage = role == "stage";
    m.sequence = role == "sequence";
    if (m.sequence && f.has("codebooks")) {
        m.codebooks = f.string("codebooks", 16);
        if (m.codebooks.size() != 16 || m.codebooks.find_first_not_of("0123456789abcdef") != std::string::npos) {
            throw make_error("{}: assign names codebooks by an invalid digest", peer);
        }
    }
    m.slice = parse_slice(f.object("slice"));
    m.last = f.boolean("last", false);
    m.prev = f.boolean("prev", false);
    if (f.has("next")) m.next = parse_host_port(f.string("next", kMaxAddress));
    m.n_ctx = static_cast<int>(f.integer("n_ctx", 1, kMaxContext));
    m.n_batch = static_cast<int>(f.integer("n_batch", 1, kMaxBatch));
    if (f.has("n_seq")) m.n_seq = static_cast<int>(f.integer("n_seq", 1, kMaxSequences));
    if (static_cast<int64_t>(m.n_ctx) * m.n_seq > kMaxContext) {
        throw make_error("{}: {} sequences of {} positions exceed {} positions in all", peer, m.n_seq, m.n_ctx, kMaxContext);
    }
    m.kv_types = {parse_kv_type(f.string("kv_type_k", 8), peer), parse_kv_type(f.string("kv_type_v", 8), peer)};
    m.partial_format = static_cast<WireFormat>(f.integer("partial_format", 0, static_cast<int>(WireFormat::Fixed)));
    m.shm = f.boolean("shm", false);
    if (f.has("group")) {
        for (const std::string& member : f.strings("group", 256, kMaxAddress)) m.group.push_back(parse_host_port(member));
    }
    m.track_attention = f.boolean("track_attention", false);
    m.offload = f.boolean("offload", false);
    if (f.has("sparse")) {
        const JsonFields s = f.object("sparse");
        m.sparse.enabled = true;
        m.sparse.window = static_cast<int>(s.integer("window", 1, kMaxContext));
        m.sparse.block = static_cast<int>(s.integer("block", 1, kMaxContext));
        m.sparse.globals = static_cast<int>(s.integer("globals", 0, kMaxContext));
        m.sparse.log_stride = s.boolean("log_stride", true);
        const std::string landmarks = s.string("landmarks", 8);
        if (landmarks == "all") {
            m.sparse.landmarks = LandmarkMode::kAll;
        } else if (landmarks == "log") {
            m.sparse.landmarks = LandmarkMode::kLog;
        } else if (landmarks == "off") {
            m.sparse.landmarks = LandmarkMode::kOff;
        } else {
            throw make_error("{}: unknown landmark mode '{}' (all, log or off)", peer, landmarks);
        }
    }
    if (f.has("group_weights")) m.group_weights = f.numbers("group_weights", 257, 1e-6, 1e6);
    if (f.has("moe_split")) {
        const std::string split = f.string("moe_split", 16);
        if (split != "channels" && split != "experts" && split != "mixed" && split != "balanced") {
            throw make_error("{}: unknown moe_split '{}'", peer, split);
        }
        m.moe_split = parse_moe_split(split);
    }
    if (!m.stage && !m.sequence) {
        m.rank = static_cast<int>(f.integer("rank", 1, 256));
        for (const std::string& a : f.strings("mesh", 256, kMaxAddress)) m.mesh.push_back(parse_host_port(a));
        if (m.rank > static_cast<int>(m.mesh.size())) {
            throw make_error("{}: rank {} of a group of {} workers", peer, m.rank, m.mesh.size());
        }
        m.mesh_token = f.string("mesh_token", 32);
        if (!is_token(m.mesh_token)) throw make_error("{}: assign carries no valid session token", peer);
        m.row_budget_ms = f.number("row_budget_ms", 0.0, 1e7, 0.0);
        if (f.has("partial_bands")) m.partial_bands = static_cast<int>(f.integer("partial_bands", 1, kMaxPartialBands));
        if (f.has("exchange")) {
            const std::string name = f.string("exchange", 32);
            try {
                m.topology = parse_partial_topology(name);
            } catch (const Error& e) {
                throw make_error("{}: {}", peer, e.what());
            }
            if (m.topology == PartialTopology::kReduceScatter && m.partial_format != WireFormat::Fixed) {
                throw make_error("{}: a reduce-scatter exchange of partials that are not exact", peer);
            }
        }
    }
    if (!m.sequence) {
        m.handoff_positions = static_cast<int>(f.integer("handoff_positions", 0, m.n_ctx, 0));
        m.handoff_from = static_cast<int>(f.integer("handoff_from", 0, m.handoff_positions, 0));
    }
    return m;
}

HelloReply parse_hello_reply(const json& j, const std::string& peer) {
    require_same_protocol(j, peer, "worker");
    const JsonFields f(j, peer, "hello-reply");
    HelloReply r;
    r.ok = f.boolean("ok", false);
    r.busy = f.boolean("busy", false);
    r.error = f.string("error", 4096, "");
    r.fingerprint = f.string("fingerprint", 64, "");
    if (!r.ok) return r;
    r.has_model = f.boolean("has_model", true);
    r.probe_seconds = f.number("probe_seconds", 0.0, 1e6, -1.0);
    r.disk_read_bps = f.number("disk_read_bps", 0.0, 1e15, 0.0);
    r.free_memory = static_cast<uint64_t>(f.integer("free_memory", 0, INT64_MAX));
    r.cpu_target = f.string("cpu_target", 32, "");
    r.device = f.string("device", 256, "");
    if (f.has("shm_name") || f.has("shm_nonce")) {
        r.shm_name = f.string("shm_name", 64);
        r.shm_nonce = f.string("shm_nonce", 64);
    }
    return r;
}

void require_hello_ok(const HelloReply& f, const std::string& who, const std::string& fingerprint,
                      const std::string& model_path) {
    if (f.ok) return;
    if (f.busy) throw NodeBusy(fmt::format("{} is busy serving another root", who));
    if (!f.fingerprint.empty()) {
        throw make_error("{} holds a different model (fingerprint {} != {} of {})", who, f.fingerprint, fingerprint,
                         model_path);
    }
    throw make_error("{} refused the session: {}", who, f.error);
}

}  // namespace tessera

#include "cluster/planner/cluster_spec.h"

#include "util/error.h"

#include <toml++/toml.h>

#include <fstream>
#include <sstream>

namespace tessera {

namespace {

std::vector<std::string> split(const std::string& text, char sep) {
    std::vector<std::string> out;
    std::stringstream in(text);
    std::string item;
    while (std::getline(in, item, sep)) out.push_back(item);
    if (!text.empty() && text.back() == sep) out.emplace_back();
    return out;
}

void add_node(ClusterStage& stage, const std::string& name, const std::string& where) {
    try {
        stage.nodes.push_back(parse_host_port(name));
    } catch (const Error& e) {
        throw make_error("{}: {}", where, e.what());
    }
}

void check(const ClusterSpec& spec, const std::string& where) {
    if (spec.stages.empty()) throw make_error("{}: no stages", where);
    size_t with_layers = 0;
    size_t with_weight = 0;
    for (size_t s = 0; s < spec.stages.size(); ++s) {
        const ClusterStage& stage = spec.stages[s];
        if (s > 0 && stage.nodes.empty()) throw make_error("{}: stage {} has no nodes", where, s);
        const size_t members = stage.nodes.size() + (s == 0 ? 1 : 0);
        if (!stage.weights.empty() && stage.weights.size() != members) {
            throw make_error("{}: stage {} has {} nodes but {} weights", where, s, members, stage.weights.size());
        }
        for (double w : stage.weights) {
            if (!(w > 0)) throw make_error("{}: stage {}: weight {} is not positive", where, s, w);
        }
        if (stage.layers < 0) throw make_error("{}: stage {}: {} layers", where, s, stage.layers);
        if (stage.weight < 0) throw make_error("{}: stage {}: weight {} is negative", where, s, stage.weight);
        with_layers += stage.layers > 0 ? 1 : 0;
        with_weight += stage.weight > 0 ? 1 : 0;
    }
    if (with_layers != 0 && with_layers != spec.stages.size()) {
        throw make_error("{}: give layers for every stage or for none", where);
    }
    if (with_weight != 0 && with_weight != spec.stages.size()) {
        throw make_error("{}: give a weight for every stage or for none", where);
    }
}

}  // namespace

size_t ClusterSpec::n_workers() const {
    size_t n = 0;
    for (const ClusterStage& s : stages) n += s.nodes.size();
    return n;
}

ClusterSpec parse_stages_option(const std::string& text) {
    const std::string where = "--stages \"" + text + "\"";
    ClusterSpec spec;
    const std::vector<std::string> stages = split(text, '/');
    for (size_t s = 0; s < stages.size(); ++s) {
        ClusterStage stage;
        const std::vector<std::string> nodes = split(stages[s], ',');
        if (s == 0 && (nodes.empty() || nodes[0] != "root")) {
            throw make_error("{}: the first stage starts with \"root\" (this process)", where);
        }
        for (size_t n = 0; n < nodes.size(); ++n) {
            if (nodes[n].empty()) throw make_error("{}: an empty node name in stage {}", where, s);
            if (nodes[n] == "root" && (s != 0 || n != 0)) {
                throw make_error("{}: \"root\" can only lead the first stage", where);
            }
            if (nodes[n] != "root") add_node(stage, nodes[n], where);
        }
        spec.stages.push_back(std::move(stage));
    }
    check(spec, where);
    return spec;
}

std::string format_stages_option(const ClusterSpec& spec) {
    std::string out;
    for (size_t s = 0; s < spec.stages.size(); ++s) {
        if (s > 0) out += '/';
        std::string stage = s == 0 ? "root" : "";
        for (const HostPort& node : spec.stages[s].nodes) {
            if (!stage.empty()) stage += ',';
            stage += node.str();
        }
        out += stage;
    }
    return out;
}

ClusterSpec load_cluster_file(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw make_error("{}: cannot read the cluster file", path);
    std::stringstream text;
    text << in.rdbuf();
    return parse_cluster_toml(text.str(), path);
}

ClusterSpec parse_cluster_toml(const std::string& text, const std::string& path) {
    toml::table table;
    try {
        table = toml::parse(text, path);
    } catch (const toml::parse_error& e) {
        throw make_error("{}:{}:{}: {}", path, e.source().begin.line, e.source().begin.column, e.description());
    }
    const toml::array* stages = table["stage"].as_array();
    if (stages == nullptr) throw make_error("{}: no [[stage]] tables", path);
    ClusterSpec spec;
    for (size_t s = 0; s < stages->size(); ++s) {
        const toml::table* t = (*stages)[s].as_table();
        const std::string where = path + ": stage " + std::to_string(s);
        if (t == nullptr) throw make_error("{}: not a table", where);
        for (const auto& [key, value] : *t) {
            if (key != "nodes" && key != "layers" && key != "weights" && key != "weight") {
                throw make_error("{}: unknown key '{}' (nodes, layers, weights, weight)", where, key.str());
            }
        }
        ClusterStage stage;
        const toml::array* nodes = (*t)["nodes"].as_array();
        if (nodes == nullptr || nodes->empty()) throw make_error("{}: 'nodes' must be a list of addresses", where);
        for (size_t n = 0; n < nodes->size(); ++n) {
            const std::optional<std::string> name = (*nodes)[n].value<std::string>();
            if (!name) throw make_error("{}: node {} is not a string", where, n);
            if ((*name == "root") != (s == 0 && n == 0)) {
                throw make_error("{}: \"root\" leads the first stage and no other", where);
            }
            if (*name != "root") add_node(stage, *name, where);
        }
        // value_exact, not value: toml++'s value<int64_t>() casts a float such as 1e22
        // to an integer, which overflows (undefined behaviour, found by fuzz_cluster_spec).
        if (const auto layers = (*t)["layers"].value_exact<int64_t>()) {
            if (*layers < 0 || *layers > 1'000'000) throw make_error("{}: 'layers' is out of range: {}", where, *layers);
            stage.layers = static_cast<int>(*layers);
        } else if ((*t).contains("layers")) {
            throw make_error("{}: 'layers' must be an integer", where);
        }
        if (const auto weight = (*t)["weight"].value<double>()) stage.weight = *weight;
        else if ((*t).contains("weight")) throw make_error("{}: 'weight' must be a number", where);
        if (const toml::array* weights = (*t)["weights"].as_array()) {
            for (const auto& w : *weights) {
                const std::optional<double> v = w.value<double>();
                if (!v) throw make_error("{}: 'weights' must be numbers", where);
                stage.weights.push_back(*v);
            }
        } else if ((*t).contains("weights")) {
            throw make_error("{}: 'weights' must be a list of numbers", where);
        }
        spec.stages.push_back(std::move(stage));
    }
    check(spec, path);
    return spec;
}

}  // namespace tessera

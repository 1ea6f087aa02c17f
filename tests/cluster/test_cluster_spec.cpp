// Plans a person writes: --stages strings and TOML cluster files, and the
// clear errors for malformed ones.
#include "cluster/planner/cluster_spec.h"
#include "cluster/planner/planner.h"
#include "test_paths.h"
#include "util/error.h"

#include "test_errors.h"

#include <gtest/gtest.h>

#include <fstream>

namespace tessera {

using test::error_of;

namespace {

std::string write_file(const std::string& name, const std::string& text) {
    const std::string path = test::scratch_dir("cluster_spec") + "/" + name;
    std::ofstream(path) << text;
    return path;
}

}  // namespace

TEST(ClusterSpec, StagesOptionNamesStagesAndGroups) {
    const ClusterSpec spec = parse_stages_option("root,10.0.0.2:9000/10.0.0.3:9000,10.0.0.4:9001/10.0.0.5:9000");
    ASSERT_EQ(spec.stages.size(), 3u);
    ASSERT_EQ(spec.stages[0].nodes.size(), 1u);
    EXPECT_EQ(spec.stages[0].nodes[0].str(), "10.0.0.2:9000");
    ASSERT_EQ(spec.stages[1].nodes.size(), 2u);
    EXPECT_EQ(spec.stages[1].nodes[1].str(), "10.0.0.4:9001");
    EXPECT_EQ(spec.n_workers(), 4u);
    EXPECT_TRUE(parse_stages_option("root").tensor_parallel_only());
}

TEST(ClusterSpec, StagesOptionErrorsSayWhatIsWrong) {
    EXPECT_NE(error_of([] { parse_stages_option("10.0.0.2:9000/root"); }).find("starts with \"root\""),
              std::string::npos);
    EXPECT_NE(error_of([] { parse_stages_option("root/root"); }).find("only lead the first stage"), std::string::npos);
    EXPECT_NE(error_of([] { parse_stages_option("root//10.0.0.2:1"); }).find("stage 1 has no nodes"),
              std::string::npos);
    EXPECT_NE(error_of([] { parse_stages_option("root,,10.0.0.2:1"); }).find("empty node"), std::string::npos);
    EXPECT_NE(error_of([] { parse_stages_option("root/nonsense"); }), test::kNoError);
}

TEST(ClusterSpec, ClusterFileReadsStagesLayersAndWeights) {
    const std::string path = write_file("ok.toml", R"(# a hybrid plan
[[stage]]
nodes = ["root", "127.0.0.1:9001"]
layers = 3
weights = [2, 1]

[[stage]]
nodes = ["127.0.0.1:9002"]
layers = 2
)");
    const ClusterSpec spec = load_cluster_file(path);
    ASSERT_EQ(spec.stages.size(), 2u);
    EXPECT_EQ(spec.stages[0].layers, 3);
    EXPECT_EQ(spec.stages[0].weights, (std::vector<double>{2, 1}));
    EXPECT_EQ(spec.stages[1].nodes[0].str(), "127.0.0.1:9002");
    EXPECT_EQ(spec.stages[1].layers, 2);
}

TEST(ClusterSpec, ClusterFileErrorsNameTheFileAndTheProblem) {
    EXPECT_NE(error_of([&] { load_cluster_file(write_file("syntax.toml", "[[stage]\nnodes = 1\n")); })
                  .find("syntax.toml:"),
              std::string::npos);
    EXPECT_NE(error_of([&] { load_cluster_file(write_file("none.toml", "title = 'x'\n")); }).find("no [[stage]]"),
              std::string::npos);
    EXPECT_NE(error_of([&] {
                  load_cluster_file(write_file("key.toml", "[[stage]]\nnodes = [\"root\"]\nlayer = 3\n"));
              }).find("unknown key 'layer'"),
              std::string::npos);
    EXPECT_NE(error_of([&] {
                  load_cluster_file(write_file("root.toml", "[[stage]]\nnodes = [\"127.0.0.1:1\"]\n"));
              }).find("\"root\" leads the first stage"),
              std::string::npos);
    EXPECT_NE(error_of([&] {
                  load_cluster_file(write_file("weights.toml", "[[stage]]\nnodes = [\"root\", \"127.0.0.1:1\"]\n"
                                                               "weights = [1]\n"));
              }).find("2 nodes but 1 weights"),
              std::string::npos);
    EXPECT_NE(error_of([&] {
                  load_cluster_file(write_file("layers.toml", "[[stage]]\nnodes = [\"root\"]\nlayers = 2\n"
                                                              "[[stage]]\nnodes = [\"127.0.0.1:1\"]\n"));
              }).find("every stage or for none"),
              std::string::npos);
    // A float where the layer count goes once overflowed inside toml++'s cast (fuzz finding).
    EXPECT_NE(error_of([&] {
                  load_cluster_file(write_file("float.toml", "[[stage]]\nnodes = [\"root\"]\n"
                                                             "layers = 1177777777777777777777.5\n"));
              }).find("'layers' must be an integer"),
              std::string::npos);
    EXPECT_NE(error_of([&] {
                  load_cluster_file(write_file("huge.toml", "[[stage]]\nnodes = [\"root\"]\n"
                                                            "layers = 9000000000\n"));
              }).find("'layers' is out of range"),
              std::string::npos);
    EXPECT_NE(error_of([&] { load_cluster_file("/nonexistent/cluster.toml"); }), test::kNoError);
}

TEST(PipelinePlanner, LayerBlocksFollowWeightsOrCounts) {
    const std::vector<double> w = {1, 1, 2};
    const auto blocks = plan_layer_blocks(22, w);
    ASSERT_EQ(blocks.size(), 3u);
    EXPECT_EQ(blocks[0].first, 0);
    EXPECT_EQ(blocks[2].second, 22);
    EXPECT_EQ(blocks[0].second - blocks[0].first, 6);  // 5.5 rounds to the lower rank first
    EXPECT_EQ(blocks[2].second - blocks[2].first, 11);
    const std::vector<int> counts = {10, 12};
    const auto given = plan_layer_blocks(22, {}, counts);
    EXPECT_EQ(given[1], (std::pair<int, int>{10, 22}));
    // Every stage keeps at least one layer, even with a tiny weight.
    const std::vector<double> tiny = {100, 0.01};
    EXPECT_EQ(plan_layer_blocks(4, tiny)[1].second - plan_layer_blocks(4, tiny)[1].first, 1);
    EXPECT_THROW(plan_layer_blocks(2, std::vector<double>{1, 1, 1}), Error);
    EXPECT_THROW(plan_layer_blocks(22, {}, std::vector<int>{10, 10}), Error);
    EXPECT_THROW(plan_layer_blocks(22, {}, std::vector<int>{22, 0}), Error);
}

}  // namespace tessera

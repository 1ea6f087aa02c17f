// /metrics in Prometheus' text format: cumulative histogram buckets, the
// request counters, and one line per node of the plan.
#include "serve/metrics.h"

#include <gtest/gtest.h>

#include <sstream>

namespace tessera {
namespace {

TEST(Metrics, HistogramBucketsAreCumulative) {
    Histogram h;
    for (double s : {0.01, 0.07, 0.3, 3.0, 100.0}) h.observe(s);
    std::ostringstream o;
    h.write(o, "x");
    const std::string text = o.str();
    EXPECT_NE(text.find("# TYPE x histogram\n"), std::string::npos);
    EXPECT_NE(text.find("x_bucket{le=\"0.05\"} 1\n"), std::string::npos) << text;
    EXPECT_NE(text.find("x_bucket{le=\"0.1\"} 2\n"), std::string::npos) << text;
    EXPECT_NE(text.find("x_bucket{le=\"0.5\"} 3\n"), std::string::npos) << text;
    EXPECT_NE(text.find("x_bucket{le=\"5\"} 4\n"), std::string::npos) << text;
    EXPECT_NE(text.find("x_bucket{le=\"60\"} 4\n"), std::string::npos) << text;
    EXPECT_NE(text.find("x_bucket{le=\"+Inf\"} 5\n"), std::string::npos) << text;
    EXPECT_NE(text.find("x_count 5\n"), std::string::npos) << text;
}

TEST(Metrics, PageHoldsCountersAndEveryNode) {
    Metrics m;
    m.requests = 3;
    m.errors = 1;
    m.prompt_tokens = 40;
    m.cached_tokens = 12;
    m.generated_tokens = 9;
    m.latency.observe(0.2);
    BatcherStats b;
    b.batches = 7;
    b.nodes = {{"root", "rank 0", 5, 0.5}, {"10.0.0.2:9000", "rank 1", 5, 0.25}};
    const std::string text = m.text(b);
    for (const char* line :
         {"tessera_batches_total 7\n", "tessera_requests_total 3\n", "tessera_request_errors_total 1\n",
          "tessera_prompt_tokens_total 40\n", "tessera_prompt_tokens_cached_total 12\n",
          "tessera_generated_tokens_total 9\n", "tessera_node_steps_total{node=\"root\",role=\"rank 0\"} 5\n",
          "tessera_node_step_seconds_total{node=\"10.0.0.2:9000\",role=\"rank 1\"} 0.25\n",
          "tessera_request_seconds_count 1\n", "tessera_time_to_first_token_seconds_count 0\n"}) {
        EXPECT_NE(text.find(line), std::string::npos) << line << " in\n" << text;
    }
}

}  // namespace
}  // namespace tessera

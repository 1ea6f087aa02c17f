#include "serve/metrics.h"

#include <sstream>

namespace tessera {

void Histogram::observe(double seconds) {
    std::lock_guard<std::mutex> lock(mutex_);
    size_t b = 0;
    while (b < std::size(kBuckets) && seconds > kBuckets[b]) ++b;
    ++counts_[b];
    sum_ += seconds;
}

void Histogram::write(std::ostream& o, const char* name) {
    std::lock_guard<std::mutex> lock(mutex_);
    o << "# TYPE " << name << " histogram\n";
    uint64_t cumulative = 0;
    for (size_t b = 0; b < std::size(kBuckets); ++b) {
        cumulative += counts_[b];
        o << name << "_bucket{le=\"" << kBuckets[b] << "\"} " << cumulative << "\n";
    }
    cumulative += counts_[std::size(kBuckets)];
    o << name << "_bucket{le=\"+Inf\"} " << cumulative << "\n";
    o << name << "_sum " << sum_ << "\n" << name << "_count " << cumulative << "\n";
}

std::string Metrics::text(const BatcherStats& b) {
    std::ostringstream o;
    o << "# TYPE tessera_batches_total counter\ntessera_batches_total " << b.batches << "\n";
    o << "# TYPE tessera_batch_rows_total counter\ntessera_batch_rows_total " << b.rows << "\n";
    o << "# TYPE tessera_batch_sequences_total counter\ntessera_batch_sequences_total " << b.sequences << "\n";
    o << "# TYPE tessera_batch_seconds_total counter\ntessera_batch_seconds_total " << b.seconds << "\n";
    o << "# TYPE tessera_batch_last_seconds gauge\ntessera_batch_last_seconds " << b.last_seconds << "\n";
    // Per node of the plan: its sync steps (tensor parallel: the root's own
    // partials, a worker's from broadcast to partial) or batches (pipeline:
    // the root's layers; the last stage: rows out to logits in).
    o << "# TYPE tessera_node_steps_total counter\n";
    for (const NodeStepTime& n : b.nodes) {
        o << "tessera_node_steps_total{node=\"" << n.node << "\",role=\"" << n.role << "\"} " << n.steps << "\n";
    }
    o << "# TYPE tessera_node_step_seconds_total counter\n";
    for (const NodeStepTime& n : b.nodes) {
        o << "tessera_node_step_seconds_total{node=\"" << n.node << "\",role=\"" << n.role << "\"} " << n.seconds << "\n";
    }
    o << "# TYPE tessera_requests_total counter\ntessera_requests_total " << requests << "\n";
    o << "# TYPE tessera_request_errors_total counter\ntessera_request_errors_total " << errors << "\n";
    o << "# TYPE tessera_prompt_tokens_total counter\ntessera_prompt_tokens_total " << prompt_tokens << "\n";
    o << "# TYPE tessera_prompt_tokens_cached_total counter\ntessera_prompt_tokens_cached_total " << cached_tokens
      << "\n";
    o << "# TYPE tessera_generated_tokens_total counter\ntessera_generated_tokens_total " << generated_tokens << "\n";
    latency.write(o, "tessera_request_seconds");
    ttft.write(o, "tessera_time_to_first_token_seconds");
    return o.str();
}

}  // namespace tessera

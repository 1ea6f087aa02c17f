// --auto: the planner chooses from link costs. The workers of --workers are
// surveyed (speed probe, free memory, each link's round trip and rate,
// cluster/planner/worker_survey.h), every plan of the root and some of them is
// costed (cluster/planner/plan_cost.h), and the fastest that fits is run: one node,
// tensor parallel, pipeline, or hybrid.
#pragma once

#include "cluster/planner/plan_cost.h"
#include "cluster/planner/parallel_options.h"
#include "model/llama_model.h"
#include "model/slice_forward.h"

#include <string>
#include <vector>

namespace tessera {

struct PlanSurvey {
    std::vector<NodeFacts> nodes;  // the root first
    std::vector<PlanOption> options;
    size_t chosen = 0;  // index into options
};

// Surveys options.workers and costs each plan for `config` (its context and
// sequences size the KV caches). The root's speed is probed with n_threads.
PlanSurvey survey_plans(const LlamaModel& model, const ForwardConfig& config, int n_threads,
                        const ParallelOptions& options);

// The table a person reads: each node's facts, each option's predicted
// tok/s (compute and network parts), and the chosen one with why.
std::string format_survey(const PlanSurvey& survey);

// `options` rewritten to run the chosen plan (--workers or --stages; none
// for one node), --auto cleared.
ParallelOptions chosen_plan_options(const PlanSurvey& survey, const ParallelOptions& options);

}  // namespace tessera

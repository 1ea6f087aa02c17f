// --auto's last step: the options a run gets from the chosen plan carry the
// exchange the costing chose, its bands included, unless the user asked for
// an exchange or bands; the survey's table names them.
#include "cluster/planner/auto_plan.h"

#include <gtest/gtest.h>

namespace tessera {

namespace {

// The root and three workers; option 1, a tensor-parallel group of all four
// through the reduce-scatter in bands, is chosen.
PlanSurvey banded_survey() {
    PlanSurvey survey;
    survey.nodes.push_back({"root", 0.005, uint64_t{1} << 34, {}});
    for (int i = 2; i <= 4; ++i) {
        survey.nodes.push_back({"10.0.0." + std::to_string(i) + ":9999", 0.005, uint64_t{1} << 34, {1e-4, 12.5e6}});
    }
    PlanOption single;
    single.compute_seconds = 0.08;
    PlanOption group;
    group.kind = PlanKind::TensorParallel;
    group.stages = {{0, 1, 2, 3}};
    group.exchange = PartialTopology::kReduceScatter;
    group.partial_bands = 4;
    group.compute_seconds = 0.02;
    group.network_seconds = 0.01;
    survey.options = {single, group};
    survey.chosen = 1;
    return survey;
}

}  // namespace

TEST(AutoPlan, TheChosenGroupKeepsItsExchangeAndBandsUnlessAskedOtherwise) {
    const PlanSurvey survey = banded_survey();
    ParallelOptions given;
    given.auto_plan = true;
    ParallelOptions run = chosen_plan_options(survey, given);
    EXPECT_FALSE(run.auto_plan);
    EXPECT_EQ(run.workers, "10.0.0.2:9999,10.0.0.3:9999,10.0.0.4:9999");
    EXPECT_EQ(run.exchange, "reduce-scatter");
    EXPECT_EQ(run.partial_bands, 4);
    EXPECT_NE(format_survey(survey).find("reduce-scatter in bands"), std::string::npos) << format_survey(survey);

    // Bands asked for stay as asked.
    given.partial_bands = 2;
    EXPECT_EQ(chosen_plan_options(survey, given).partial_bands, 2);
    // So does an exchange asked for, without the costing's bands.
    given.partial_bands = 1;
    given.exchange = "all-to-all";
    run = chosen_plan_options(survey, given);
    EXPECT_EQ(run.exchange, "all-to-all");
    EXPECT_EQ(run.partial_bands, 1);
}

}  // namespace tessera

// The slurm peer configuration in `estuary simulate` (docs/peers.md "slurm"): EASY backfill with
// walltime limits and preemption by REQUEUE (lower priority first), run through the whole
// simulator with invariants checked at every event time, with hand-derived timelines.
#include <gtest/gtest.h>

#include "sim/scenario.h"
#include "sim/simulate.h"
#include "tests/testing/sim_run.h"

namespace estuary {
namespace {

using testing::RunScenarioText;
using testing::StartOf;

const std::string kCluster = std::string(ESTUARY_SOURCE_DIR) + "/examples/clusters/two-asw.yaml";
// The recipe as examples/backfill-mix.yaml writes it.
const std::string kSlurm =
    "{name: slurm, policy: best-fit, queue: priority, align: false, topology: false, preempt: {grace_s: 60}, "
    "backfill: easy}";
const std::string kPlain = "{name: plain, policy: best-fit, queue: priority, align: false, topology: false}";

// Eight 8-GPU nodes (examples/clusters/two-asw.yaml):
//   big0   4 nodes, 1000 s of work, walltime 1000, at 0
//   big1   8 nodes, 500 s, walltime 600, at 10 — waits for big0
//   short  2 nodes, 200 s, walltime 300, at 20
//   long   2 nodes, 1500 s, walltime 2000, at 20
std::string Gangs(const std::string& conf) {
  return "name: t\nduration_s: 5000\ncluster:\n  spec: " + kCluster +
         "\njobs:\n"
         "  - {name: big0, submit_s: 0, duration_s: 1000, walltime_s: 1000, replicas: 4, gpus: 8}\n"
         "  - {name: big1, submit_s: 10, duration_s: 500, walltime_s: 600, replicas: 8, gpus: 8}\n"
         "  - {name: short, submit_s: 20, duration_s: 200, walltime_s: 300, replicas: 2, gpus: 8}\n"
         "  - {name: long, submit_s: 20, duration_s: 1500, walltime_s: 2000, replicas: 2, gpus: 8}\n"
         "configurations:\n  - " +
         conf + "\n";
}

TEST(Slurm, BackfillRunsAShortJobBeforeTheBigOneAndKeepsALongOneFromDelayingIt) {
  // big1 is planned at 1000 (big0's walltime) on all eight nodes. At 40 (the planning 30 s after
  // 10) short would end by 40 + 300 = 340 <= 1000: it runs 40-240; long (40 + 2000 > 1000) waits.
  // big0 ends at 1000 and big1 starts then, as planned; it ends at 1500 and long starts.
  auto r = RunScenarioText(Gangs(kSlurm));
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(StartOf(*r, "big0"), 0);
  EXPECT_EQ(StartOf(*r, "short"), 40);
  EXPECT_EQ(StartOf(*r, "big1"), 1000);
  EXPECT_EQ(StartOf(*r, "long"), 1500);
  EXPECT_EQ(r->metrics.at("jobs_timed_out_count"), 0);
}

TEST(Slurm, WithoutBackfillBothSmallJobsTakeTheIdleNodesAndTheBigOneWaitsForTheLongOne) {
  // short and long start at 20 on the four idle nodes; at 1000 only big0's four nodes free, so
  // big1 waits for long's end at 1520.
  auto r = RunScenarioText(Gangs(kPlain));
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(StartOf(*r, "short"), 20);
  EXPECT_EQ(StartOf(*r, "long"), 20);
  EXPECT_EQ(StartOf(*r, "big1"), 1520);
}

TEST(Slurm, AJobOverItsWalltimeIsStoppedAndTheBackfillPlanHolds) {
  // long2 claims 300 s but works 5000: it is stopped 300 s after its start ("timeout"), before the
  // planned start of big1 at 1000, which starts on time.
  const std::string yaml =
      "name: t\nduration_s: 5000\ncluster:\n  spec: " + kCluster +
      "\njobs:\n"
      "  - {name: big0, submit_s: 0, duration_s: 1000, walltime_s: 1000, replicas: 4, gpus: 8}\n"
      "  - {name: big1, submit_s: 10, duration_s: 500, walltime_s: 600, replicas: 8, gpus: 8}\n"
      "  - {name: long2, submit_s: 300, duration_s: 5000, walltime_s: 300, replicas: 2, gpus: 8}\n"
      "configurations:\n  - " +
      kSlurm + "\n";
  auto r = RunScenarioText(yaml);
  ASSERT_TRUE(r.ok()) << r.status().message();
  // Plannings at 10, 40, ..., 310 (every 30 s while big1 waits): long2 arrived at 300 is let in
  // at 310 (310 + 300 = 610 <= 1000) and stopped at 610.
  EXPECT_EQ(StartOf(*r, "long2"), 310);
  EXPECT_EQ(StartOf(*r, "big1"), 1000);
  EXPECT_EQ(r->metrics.at("jobs_timed_out_count"), 1);
  for (const SimJobRecord& j : r->jobs) {
    if (j.name == "long2") {
      EXPECT_EQ(SimJobStatusText(j), "timeout");
    } else if (j.name == "big1") {
      EXPECT_EQ(SimJobStatusText(j), "finished");
    }
  }
}

TEST(Slurm, AnHpJobRequeuesTheLowestPriorityVictimFirst) {
  // Seven LP jobs (priority 300) and one spot job (priority 100) fill the eight nodes; at 1000 an
  // HP job of one node arrives. PreemptMode=REQUEUE, lower priority first: the spot job is the
  // victim, requeued after the grace period (60 s); the HP job starts at 1060. Nothing else is
  // evicted in the 2,000 s that follow.
  std::string jobs;
  for (int i = 0; i < 7; ++i) {
    jobs += "  - {name: lp" + std::to_string(i) + ", submit_s: 0, duration_s: 100000, gpus: 8, class: lp}\n";
  }
  const std::string yaml = "name: t\nduration_s: 3000\ncluster:\n  spec: " + kCluster + "\njobs:\n" + jobs +
                           "  - {name: spot, submit_s: 0, duration_s: 100000, gpus: 8, class: spot}\n"
                           "  - {name: hp, submit_s: 1000, duration_s: 500, gpus: 8, class: hp-training}\n"
                           "configurations:\n  - " +
                           kSlurm + "\n";
  auto r = RunScenarioText(yaml);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(StartOf(*r, "hp"), 1060);
  EXPECT_EQ(r->metrics.at("evictions_count"), 1);
  for (const SimJobRecord& j : r->jobs) {
    // The spot job waits again (requeued) while the LP jobs run on; it restarts when hp ends.
    if (j.name == "spot" || j.name.rfind("lp", 0) == 0) {
      EXPECT_EQ(SimJobStatusText(j), "running") << j.name;
    }
  }
}

}  // namespace
}  // namespace estuary

// Defragmentation in `estuary simulate` (issue 5 item 5): the IPC planner runs on a trigger (a
// large job waited too long) or periodically, and its moves are executed make-before-break over
// capacity reservations. Every run checks ClusterState invariants after every event time, and at
// the end that no capacity reservation is left; the job events record each move.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "sim/scenario.h"
#include "sim/simulate.h"
#include "tests/testing/bad_input.h"

namespace estuary {
namespace {

StatusOr<SimulateResult> RunDefrag(const std::string& yaml, size_t conf = 0) {
  auto sc = ParseScenario(yaml, "d.yaml");
  if (!sc.ok()) return sc.status();
  auto cluster = LoadScenarioCluster(*sc);
  if (!cluster.ok()) return cluster.status();
  return RunScenario(*sc, *cluster, sc->configurations[conf], 1, /*check_invariants=*/true, /*record_events=*/true);
}

std::vector<std::string> EventsOf(const SimulateResult& r, const std::string& name) {
  std::vector<std::string> out;
  for (const SimJobEvent& e : r.job_events) {
    if (e.job != name) continue;
    out.push_back(std::to_string(e.time) + " " + e.kind + " " + std::to_string(e.replicas) +
                  (e.detail.empty() ? "" : " " + e.detail));
  }
  return out;
}

// Three 8-GPU nodes (node0000001..0003) in one ASW; requests use one core and 1 GiB so that only
// GPUs count. Best fit packs a and b on node0000001, c and d on node0000002; b and d end at 1000 s,
// leaving two half-used nodes. e (8 GPUs) takes node0000003 at 1100 s; f (8 GPUs) arrives at
// 1200 s and finds no whole node. a, c, e run past the end of the run.
std::string TwoHalfNodes(const std::string& conf, const std::string& a_extra = "", const std::string& events = "") {
  return std::string("name: d\nduration_s: 20000\n") +
         "cluster:\n  generate: {total_gpus: 24, gpus_per_node: 8, nodes_per_asw_min: 3, nodes_per_asw_max: 3, seed: 1}\n"
         "jobs:\n"
         "  - {name: a, replicas: 1, gpus: 4, cpu_cores: 1, memory_gib: 1, duration_s: 100000" + a_extra + "}\n"
         "  - {name: b, replicas: 1, gpus: 4, cpu_cores: 1, memory_gib: 1, duration_s: 1000}\n"
         "  - {name: c, replicas: 1, gpus: 4, cpu_cores: 1, memory_gib: 1, duration_s: 100000" + a_extra + "}\n"
         "  - {name: d, replicas: 1, gpus: 4, cpu_cores: 1, memory_gib: 1, duration_s: 1000}\n"
         "  - {name: e, submit_s: 1100, replicas: 1, gpus: 8, cpu_cores: 1, memory_gib: 1, duration_s: 100000}\n"
         "  - {name: f, submit_s: 1200, replicas: 1, gpus: 8, cpu_cores: 1, memory_gib: 1, duration_s: 5000}\n" +
         events + "configurations:\n  - {name: x" + conf + "}\n";
}

TEST(DefragSim, AWaitingEightGpuJobTriggersAPlanWhoseMoveFreesANodeMakeBeforeBreak) {
  // f waits from 1200 s; 300 s later the planner vacates node0000001 (fewest tasks, then least
  // used, then node id): a moves to GPUs 4-7 of node0000002. Its new instance is ready 120 s after
  // the start, at 1620 s; then a's old instance stops and f starts on node0000001.
  auto r = RunDefrag(TwoHalfNodes(", defrag: {interval_s: 0, trigger_after_s: 300, startup_s: 120}"));
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(EventsOf(*r, "a"), (std::vector<std::string>{"0 start 1", "1500 migrate-start 1 a-0 node0000001->node0000002:4,5,6,7",
                                                          "1620 migrate 1 a-0 node0000001->node0000002:4,5,6,7"}));
  EXPECT_EQ(EventsOf(*r, "f"), (std::vector<std::string>{"1620 start 1", "6620 finish 0"}));
  EXPECT_EQ(r->metrics.at("migrations_planned_count"), 1);
  EXPECT_EQ(r->metrics.at("migrations_started_count"), 1);
  EXPECT_EQ(r->metrics.at("migrations_completed_count"), 1);
  EXPECT_EQ(r->metrics.at("migrations_aborted_count"), 0);
  EXPECT_EQ(r->metrics.at("defrag_vacated_nodes_count"), 1);
  EXPECT_EQ(r->metrics.at("defrag_triggered_count"), 1);
  EXPECT_EQ(r->metrics.at("defrag_plans_count"), 1);
  // 4 GPUs held twice for 120 s.
  EXPECT_DOUBLE_EQ(r->metrics.at("double_occupancy_gpu_hours"), 4.0 * 120 / 3600);
  EXPECT_EQ(r->metrics.at("sched_delay_p90_8gpu_s"), 420);
}

TEST(DefragSim, WithoutDefragTheEightGpuJobWaitsToTheEnd) {
  auto r = RunDefrag(TwoHalfNodes(""));
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_TRUE(EventsOf(*r, "f").empty());
  EXPECT_EQ(r->metrics.at("migrations_completed_count"), 0);
  EXPECT_EQ(r->metrics.at("jobs_pending_end_count"), 1);
  EXPECT_EQ(r->metrics.at("sched_delay_p90_8gpu_s"), 20000 - 1200);
}

TEST(DefragSim, LockedTasksAreNeverMoved) {
  auto r = RunDefrag(TwoHalfNodes(", defrag: {interval_s: 600, trigger_after_s: 300}", ", locked_pct: 100"));
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(EventsOf(*r, "a"), (std::vector<std::string>{"0 start 1"}));
  EXPECT_EQ(EventsOf(*r, "c"), (std::vector<std::string>{"0 start 1"}));
  EXPECT_TRUE(EventsOf(*r, "f").empty());
  EXPECT_EQ(r->metrics.at("migrations_planned_count"), 0);
  EXPECT_GT(r->metrics.at("defrag_plans_count"), 0);
}

TEST(DefragSim, ExtraPlanningCyclesChangeNothingOnceTheNodeIsFree) {
  // A periodic plan every 50 s as well as the trigger: the first tick after f waits 300 s (at
  // 1500 s) plans the same move; once node0000001 is free and f runs, no plan moves anything.
  auto r = RunDefrag(TwoHalfNodes(", defrag: {interval_s: 50, trigger_after_s: 300, startup_s: 120}"));
  ASSERT_TRUE(r.ok()) << r.status().message();
  // Ticks at 50, 100, ...: node0000001 and node0000002 are both half used from 1000 s, so the
  // tick at 1000 s (after b and d end) plans the move: ready at 1120 s, before f even arrives.
  EXPECT_EQ(EventsOf(*r, "a"), (std::vector<std::string>{"0 start 1", "1000 migrate-start 1 a-0 node0000001->node0000002:4,5,6,7",
                                                          "1120 migrate 1 a-0 node0000001->node0000002:4,5,6,7"}));
  EXPECT_EQ(EventsOf(*r, "e"), (std::vector<std::string>{"1100 start 1"}));
  EXPECT_EQ(EventsOf(*r, "f"), (std::vector<std::string>{"1200 start 1", "6200 finish 0"}));
  EXPECT_EQ(r->metrics.at("migrations_started_count"), 1);
  EXPECT_EQ(r->metrics.at("migrations_completed_count"), 1);
  EXPECT_GT(r->metrics.at("defrag_plans_count"), 300);
}

TEST(DefragSim, ATargetThatFailsMidMigrationKeepsTheOldInstanceAndReleasesTheReservation) {
  // node0000002 (the target) fails at 1550 s, 50 s into a's move: the move is aborted, a keeps
  // running on node0000001 at GPUs 0-3, c (on node0000002) is requeued; the run ends with no
  // reservation (checked by RunScenario with invariants on).
  auto r = RunDefrag(TwoHalfNodes(", defrag: {interval_s: 0, trigger_after_s: 300, startup_s: 120}", "",
                            "events:\n  - {at_s: 1550, fail_node: node0000002}\n"));
  ASSERT_TRUE(r.ok()) << r.status().message();
  const std::vector<std::string> a = EventsOf(*r, "a");
  ASSERT_GE(a.size(), 3u);
  EXPECT_EQ(a[1], "1500 migrate-start 1 a-0 node0000001->node0000002:4,5,6,7");
  EXPECT_EQ(a[2], "1550 migrate-abort 1 a-0 node0000001->node0000002:4,5,6,7");
  EXPECT_EQ(r->metrics.at("migrations_aborted_count"), 1);
  EXPECT_EQ(r->metrics.at("migrations_completed_count"), 0);
  EXPECT_DOUBLE_EQ(r->metrics.at("double_occupancy_gpu_hours"), 4.0 * 50 / 3600);
  // c was requeued by the failure and starts again elsewhere; a was never lost.
  const std::vector<std::string> c = EventsOf(*r, "c");
  ASSERT_GE(c.size(), 2u);
  EXPECT_EQ(c[1], "1550 requeue 0");
}

TEST(DefragSim, AFailedNewInstanceIsGivenUpAtTheTimeout) {
  auto r = RunDefrag(TwoHalfNodes(", defrag: {interval_s: 0, trigger_after_s: 300, startup_s: 120, timeout_s: 400, fail_pct: 100}"));
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(EventsOf(*r, "a"), (std::vector<std::string>{"0 start 1", "1500 migrate-start 1 a-0 node0000001->node0000002:4,5,6,7",
                                                          "1900 migrate-abort 1 a-0 node0000001->node0000002:4,5,6,7"}));
  EXPECT_TRUE(EventsOf(*r, "f").empty());
  EXPECT_EQ(r->metrics.at("migrations_aborted_count"), 1);
  EXPECT_DOUBLE_EQ(r->metrics.at("double_occupancy_gpu_hours"), 4.0 * 400 / 3600);
}

TEST(DefragSim, TheSameSeedGivesTheSameRun) {
  const std::string y =
      "name: d\nduration_s: 200000\nsample_interval_s: 600\n"
      "cluster:\n  generate: {total_gpus: 256, seed: 1}\n"
      "generator:\n  arrivals_per_hour: 12\n  classes:\n"
      "    - {share: 3, gpus: 1, gpu_milli: 500, cpu_cores: 4, memory_gib: 16, duration_mean_s: 7200, locked_pct: 40}\n"
      "    - {share: 3, gpus: 2, cpu_cores: 8, memory_gib: 64, duration_mean_s: 14400, locked_pct: 40}\n"
      "    - {share: 2, gpus: 8, cpu_cores: 64, memory_gib: 512, duration_mean_s: 14400, locked_pct: 40}\n"
      "configurations:\n  - {name: ipc, defrag: {interval_s: 1800, trigger_after_s: 600, fail_pct: 10}}\n";
  auto a = RunDefrag(y), b = RunDefrag(y);
  ASSERT_TRUE(a.ok()) << a.status().message();
  ASSERT_TRUE(b.ok());
  EXPECT_GT(a->metrics.at("migrations_completed_count"), 0);
  EXPECT_GT(a->metrics.at("migrations_aborted_count"), 0);
  ASSERT_EQ(a->job_events.size(), b->job_events.size());
  for (size_t i = 0; i < a->job_events.size(); ++i) {
    EXPECT_EQ(a->job_events[i].time, b->job_events[i].time);
    EXPECT_EQ(a->job_events[i].kind, b->job_events[i].kind);
    EXPECT_EQ(a->job_events[i].detail, b->job_events[i].detail);
  }
  for (const auto& [k, v] : a->metrics) {
    if (k.rfind("defrag_plan_seconds", 0) == 0) continue;  // wall time
    EXPECT_EQ(v, b->metrics.at(k)) << k;
  }
}

// Two RDMA-PODs of four 8-GPU nodes (96 cores each). Sixteen 1-GPU tasks of 32 cores fill the
// nodes three by three (CPU-bound): t0-t2 on node0000001, t3-t5 on node0000002, ..., t12-t14 on
// node0000005, t15 on node0000006. The long ones stay: t0, t4, t8 in POD 1 (node0000001..0003),
// t12 in POD 2 (node0000005). With the domains objective the POD with the most free GPU milli
// (POD 2) is emptied first, into POD 1 (onto the fullest node, node0000001), then node0000003's
// task joins them: a whole free POD and six whole free nodes.
std::string TwoPods(const std::string& objective) {
  std::string y =
      "name: p\nduration_s: 3000\nsample_interval_s: 100\n"
      "cluster:\n  generate: {total_gpus: 64, gpus_per_node: 8, nodes_per_asw_min: 4, nodes_per_asw_max: 4,"
      " rdma_pod_nodes: 4, seed: 1}\njobs:\n";
  for (int k = 0; k < 16; ++k) {
    const bool long_run = k % 4 == 0;
    y += "  - {name: t" + std::to_string(k) + ", replicas: 1, gpus: 1, cpu_cores: 32, memory_gib: 1, duration_s: " +
         (long_run ? "100000" : "1000") + "}\n";
  }
  return y + "configurations:\n  - {name: x, defrag: {interval_s: 1200" + objective + "}}\n";
}

TEST(DefragSim, TheDomainObjectiveEmptiesAWholeRdmaPod) {
  auto r = RunDefrag(TwoPods(", objective: domains, objective_plane: param, objective_level: rdma_pod"));
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(EventsOf(*r, "t12"), (std::vector<std::string>{"0 start 1", "1200 migrate-start 1 t12-0 node0000005->node0000001:1",
                                                            "1320 migrate 1 t12-0 node0000005->node0000001:1"}));
  ASSERT_FALSE(r->samples.empty());
  EXPECT_EQ(r->samples.back().free_rdma_pods, 1);
  EXPECT_EQ(r->samples.back().free_nodes, 6);
  EXPECT_EQ(r->metrics.at("migrations_completed_count"), 2);
}

TEST(DefragSim, AnObjectiveDomainThatTheClusterLacksIsNamed) {
  auto r = RunDefrag(TwoPods(", objective: domains, objective_plane: param, objective_level: spine"));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(),
            "d.yaml:24: configuration 'x': defrag: objective_level: plane 'param' has no level 'spine'");
  r = RunDefrag(TwoPods(", objective: domains, objective_plane: storage, objective_level: rdma_pod"));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "d.yaml:24: configuration 'x': defrag: objective_plane: the cluster has no plane 'storage'");
}

TEST(DefragSimBadInput, EveryFieldIsNamed) {
  auto err = [&](const std::string& conf, const std::string& a_extra = "") {
    auto sc = ParseScenario(TwoHalfNodes(conf, a_extra), "d.yaml");
    return sc.ok() ? std::string("ok") : sc.status().message();
  };
  EXPECT_EQ(err(", defrag: {max_moves: 0}"), "d.yaml:13: field 'max_moves': 0 is outside [1, 1099511627776]");
  EXPECT_EQ(err(", defrag: {max_moves: -5}"), "d.yaml:13: field 'max_moves': -5 is outside [1, 1099511627776]");
  EXPECT_EQ(err(", defrag: {partition_nodes: 1}"), "d.yaml:13: field 'partition_nodes': 1 is not 0 (one partition) or >= 2");
  EXPECT_EQ(err(", defrag: {partition_nodes: -3}"), "d.yaml:13: field 'partition_nodes': -3 is outside [0, 1000000]");
  EXPECT_EQ(err(", defrag: {interval_s: 0}"),
            "d.yaml:13: field 'interval_s': defrag runs neither periodically (interval_s 0) nor on a trigger (trigger_after_s 0)");
  EXPECT_EQ(err(", defrag: {startup_s: 300, timeout_s: 300}"), "d.yaml:13: field 'timeout_s': 300 is outside [301, 86401]");
  EXPECT_EQ(err(", defrag: {fail_pct: 101}"), "d.yaml:13: field 'fail_pct': 101 is outside [0, 100]");
  EXPECT_EQ(err(", defrag: {per_node: 0}"), "d.yaml:13: field 'per_node': 0 is outside [1, 1000000]");
  EXPECT_EQ(err(", defrag: {max_concurrent: 0}"), "d.yaml:13: field 'max_concurrent': 0 is outside [1, 1000000]");
  EXPECT_EQ(err(", defrag: {per_job: 0}"), "d.yaml:13: field 'per_job': 0 is outside [1, 1000000]");
  EXPECT_EQ(err(", defrag: {chain_depth: 65}"), "d.yaml:13: field 'chain_depth': 65 is outside [0, 64]");
  EXPECT_EQ(err(", defrag: {variants: 0}"), "d.yaml:13: field 'variants': 0 is outside [1, 64]");
  EXPECT_EQ(err(", defrag: {drain: maybe}"), "d.yaml:13: field 'drain': expected true or false");
  EXPECT_EQ(err(", defrag: {budget: 3}"), "d.yaml:13: field 'budget': unknown field");
  EXPECT_EQ(err(", defrag: 5"), "d.yaml:13: field 'defrag': expected a mapping {interval_s, max_moves, partition_nodes, ...}");
  EXPECT_EQ(err("", ", locked_pct: 101"), "d.yaml:6: field 'locked_pct': 101 is above 100");
  EXPECT_EQ(err(", defrag: {objective: shapes}"), "d.yaml:13: field 'objective': unknown objective 'shapes' (known: nodes, domains)");
  EXPECT_EQ(err(", defrag: {objective: domains, objective_level: rdma_pod}"), "d.yaml:13: field 'objective_plane': missing");
  EXPECT_EQ(err(", defrag: {objective_plane: param}"),
            "d.yaml:13: field 'objective': objective_plane and objective_level need objective: domains");
  EXPECT_EQ(err(", defrag: {interval_s: 600, assemble: true}"),
            "d.yaml:13: field 'assemble': assemble acts on a trigger: it needs trigger_after_s > 0");
  EXPECT_EQ(err(", defrag: {trigger_after_s: 60, assemble: 1}"), "d.yaml:13: field 'assemble': expected true or false");
}

}  // namespace
// ---- assemble: a trigger holds the cheapest nodes for its job and migrates their work off ----

std::string AssembleYaml(const std::string& jobs, const std::string& conf, const std::string& events = "") {
  return "name: d\nduration_s: 20000\n"
         "cluster:\n  generate: {total_gpus: 48, gpus_per_node: 8, nodes_per_asw_min: 3, nodes_per_asw_max: 3, seed: 1}\n"
         "jobs:\n" + jobs + events + "configurations:\n  - {name: x, topology: true" + conf + "}\n";
}

std::string Job(const std::string& name, int64_t submit, int replicas, int gpus, int64_t duration,
                const std::string& extra = "") {
  return "  - {name: " + name + ", submit_s: " + std::to_string(submit) + ", replicas: " + std::to_string(replicas) +
         ", gpus: " + std::to_string(gpus) + ", cpu_cores: 1, memory_gib: 1, duration_s: " + std::to_string(duration) +
         extra + "}\n";
}

// Two ASWs of three 8-GPU nodes (node0000000-02, node0000003-05). Best fit with ties to the
// lowest node: a + fa fill node0000000, w2 and w3 take node0000001 and 02, c + fc node0000003,
// d + fd node0000004. At 1000 s the fillers end: node0000000 runs a (4 GPUs), node0000001 and 02
// are free, node0000003 runs c and node0000004 d (4 GPUs each), node0000005 is free. g (3 x 8
// GPUs in one ASW) arrives at 1100 s and fits in neither ASW; h (one whole node) arrives at 1450 s.
std::string HeldAsw() {
  return Job("a", 0, 1, 4, 100000) + Job("fa", 0, 1, 4, 1000) + Job("w2", 0, 1, 8, 1000) + Job("w3", 0, 1, 8, 1000) +
         Job("c", 0, 1, 4, 100000) + Job("fc", 0, 1, 4, 1000) + Job("d", 0, 1, 4, 100000) + Job("fd", 0, 1, 4, 1000) +
         Job("g", 1100, 3, 8, 5000, ", plane: data, required_level: asw") + Job("h", 1450, 1, 8, 100000);
}

TEST(DefragAssemble, ATriggerHoldsTheCheapestAswForTheGangAndMovesItsWorkOff) {
  // At 1400 s (g waited 300 s) the cheapest nodes for g are node0000000-02 (4 GPUs in use,
  // against 8 for node0000003-05): they are held for g, and a moves to node0000003's free GPUs
  // 4-7 (best fit). h, at 1450 s, may not take a held node: it starts on node0000005. a's new
  // instance is ready at 1520 s, and g starts on the whole ASW.
  auto r = RunDefrag(AssembleYaml(HeldAsw(), ", defrag: {interval_s: 0, trigger_after_s: 300, startup_s: 120, assemble: true}"));
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(EventsOf(*r, "a"), (std::vector<std::string>{"0 start 1", "1400 migrate-start 1 a-0 node0000000->node0000003:4,5,6,7",
                                                          "1520 migrate 1 a-0 node0000000->node0000003:4,5,6,7"}));
  EXPECT_EQ(EventsOf(*r, "h"), (std::vector<std::string>{"1450 start 1"}));
  EXPECT_EQ(EventsOf(*r, "g"), (std::vector<std::string>{"1520 start 3", "6520 finish 0"}));
  EXPECT_EQ(r->metrics.at("defrag_assembled_count"), 1);
  EXPECT_EQ(r->metrics.at("defrag_triggered_count"), 1);
  // Stable: nothing else moves once g runs.
  EXPECT_EQ(r->metrics.at("migrations_planned_count"), 1);
  EXPECT_EQ(r->metrics.at("migrations_completed_count"), 1);
  EXPECT_EQ(r->metrics.at("jobs_pending_end_count"), 0);
}

TEST(DefragAssemble, WithoutTheHoldAWholeNodeJobTakesTheFreedRoomAndTheGangWaits) {
  // The same trigger planning for the whole cluster (objective nodes) moves a the same way, but
  // h takes a free node of the first ASW at 1450 s, and g never has three nodes in one ASW.
  auto r = RunDefrag(AssembleYaml(HeldAsw(), ", defrag: {interval_s: 0, trigger_after_s: 300, startup_s: 120}"));
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(EventsOf(*r, "g"), std::vector<std::string>{});
  EXPECT_EQ(r->metrics.at("defrag_assembled_count"), 0);
  EXPECT_EQ(r->metrics.at("jobs_pending_end_count"), 1);
}

TEST(DefragAssemble, OneJobHoldsAssembledNodesAtATime) {
  // As above, but a is locked (never moved) and ends at 3000 s, and g2 (3 x 8 GPUs in one ASW,
  // like g) arrives at 1150 s, h at 2100 s. At 1400 s g's hold takes the first ASW and nothing
  // moves. g2 comes due at 1450 s, within the cooldown of g's plan, and again at 2000 s with g,
  // whose hold is planned anew (the holder goes first): no hold for g2, so h finds node0000005
  // free at 2100 s (a hold for g2 on the second ASW would have kept h waiting). g starts when a
  // ends; g2 holds the second ASW from 3200 s, where nothing can move, and starts when g ends.
  std::string jobs = HeldAsw();
  jobs.replace(jobs.find(Job("a", 0, 1, 4, 100000)), Job("a", 0, 1, 4, 100000).size(), Job("a", 0, 1, 4, 3000, ", locked_pct: 100"));
  jobs.replace(jobs.find(Job("h", 1450, 1, 8, 100000)), Job("h", 1450, 1, 8, 100000).size(), Job("h", 2100, 1, 8, 100000));
  auto r = RunDefrag(AssembleYaml(jobs + Job("g2", 1150, 3, 8, 5000, ", plane: data, required_level: asw"),
                                  ", defrag: {interval_s: 0, trigger_after_s: 300, startup_s: 120, assemble: true}"));
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(EventsOf(*r, "a"), (std::vector<std::string>{"0 start 1", "3000 finish 0"}));
  EXPECT_EQ(EventsOf(*r, "h"), (std::vector<std::string>{"2100 start 1"}));
  EXPECT_EQ(EventsOf(*r, "g"), (std::vector<std::string>{"3000 start 3", "8000 finish 0"}));
  EXPECT_EQ(EventsOf(*r, "g2"), (std::vector<std::string>{"8000 start 3", "13000 finish 0"}));
  EXPECT_EQ(r->metrics.at("migrations_planned_count"), 0);
}

// g (2 x 8 GPUs in one ASW) runs on node0000000 and 02, s on node0000001 (4 GPUs once its filler
// ends at 400 s); t and u run 6 and 5 GPUs in the other ASW, whose third node is free.
// node0000000 fails at 500 s for good: g is requeued, holding node0000002 (hold_survivors).
std::string LostNode() {
  return Job("g", 0, 2, 8, 5000, ", plane: data, required_level: asw") + Job("s", 0, 1, 4, 100000) +
         Job("fs", 0, 1, 4, 400) + Job("t", 0, 1, 6, 100000) + Job("ft", 0, 1, 2, 400) + Job("u", 0, 1, 5, 100000) +
         Job("fu", 0, 1, 3, 400);
}

TEST(DefragAssemble, AGangThatLostANodeGetsTheCheapestOtherNodeOfItsAswFreedByMigration) {
  // At 800 s (300 s after the requeue) g's hold is planned anew: node0000002 and 01 (4 GPUs in
  // use) against the other ASW's free node and u's (5). s leaves node0000001 for the only node it
  // fits on, the free node0000004 (a drain may use a whole free node); g starts again at 920 s.
  auto r = RunDefrag(AssembleYaml(LostNode(),
                                  ", hold_survivors: true, defrag: {interval_s: 0, trigger_after_s: 300, startup_s: 120, assemble: true}",
                                  "events:\n  - {at_s: 500, fail_node: node0000000}\n"));
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(EventsOf(*r, "s"), (std::vector<std::string>{"0 start 1", "800 migrate-start 1 s-0 node0000001->node0000004:0,1,2,3",
                                                          "920 migrate 1 s-0 node0000001->node0000004:0,1,2,3"}));
  const std::vector<std::string> g = EventsOf(*r, "g");
  ASSERT_EQ(g.size(), 4u);
  EXPECT_EQ(g[1], "500 requeue 0");
  EXPECT_EQ(g[2], "920 start 2");
  EXPECT_EQ(r->metrics.at("defrag_assembled_count"), 1);
  EXPECT_EQ(r->metrics.at("migrations_planned_count"), 1);
}

TEST(DefragAssemble, WithoutAssembleTheGangHoldsItsSurvivorAndWaitsForARepair) {
  // The whole-cluster plan finds nothing to vacate (no task fits on a node with slack).
  auto r = RunDefrag(AssembleYaml(LostNode(), ", hold_survivors: true, defrag: {interval_s: 0, trigger_after_s: 300, startup_s: 120}",
                                  "events:\n  - {at_s: 500, fail_node: node0000000}\n"));
  ASSERT_TRUE(r.ok()) << r.status().message();
  const std::vector<std::string> g = EventsOf(*r, "g");
  ASSERT_EQ(g.size(), 2u);
  EXPECT_EQ(g[1], "500 requeue 0");
  EXPECT_EQ(r->metrics.at("migrations_planned_count"), 0);
}

}  // namespace estuary

// Federation runs of `estuary simulate` (RunFederation) as specifications: small scenarios whose
// outcome follows from the rules, every member's invariants checked at every event time.
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "sim/federation_setup.h"
#include "sim/federation_sim.h"
#include "sim/scenario.h"

namespace estuary {
namespace {

struct FedRun {
  Scenario sc;
  std::vector<ClusterState> members;
  ClusterState merged;
};

FedRun Load(const std::string& yaml) {
  FedRun r;
  auto sc = ParseScenario(yaml, "f.yaml");
  EXPECT_TRUE(sc.ok()) << sc.status().message();
  r.sc = *sc;
  auto m = LoadMemberClusters(r.sc);
  EXPECT_TRUE(m.ok()) << m.status().message();
  r.members = std::move(*m);
  std::vector<std::string> names;
  std::vector<const ClusterState*> parts;
  for (size_t i = 0; i < r.members.size(); ++i) {
    names.push_back(r.sc.federation.members[i].name);
    parts.push_back(&r.members[i]);
  }
  auto u = MergeClusters(names, parts);
  EXPECT_TRUE(u.ok());
  r.merged = std::move(*u);
  return r;
}

// `yaml` with `lines` inserted before the first occurrence of `key`.
std::string Inserted(const std::string& yaml, const std::string& key, const std::string& lines) {
  std::string out = yaml;
  out.insert(out.find(key), lines + "\n");
  return out;
}

// A job's events as (kind, time), in order, by job name.
using P = std::pair<std::string, int64_t>;
std::map<std::string, std::vector<P>> Timelines(const SimulateResult& res) {
  std::map<std::string, std::vector<P>> seen;
  for (const SimJobEvent& e : res.job_events) seen[e.job].emplace_back(e.kind, e.time);
  return seen;
}

SimulateResult RunConfig(const FedRun& r, const std::string& name, uint64_t seed = 1) {
  for (const SchedulerConfig& c : r.sc.configurations) {
    if (c.name != name) continue;
    auto res = RunFederation(r.sc, r.members, &r.merged, c, seed, true, true);
    EXPECT_TRUE(res.ok()) << res.status().message();
    return *res;
  }
  ADD_FAILURE() << "no configuration " << name;
  return {};
}

// Two members of two 8-GPU nodes. "a" is filled by LP jobs that may run only there; a dev job
// then lands on "b" (blind: round-robin), and an HP job arrives. Blind sends it to "a", which
// evicts LP work although "b" has a whole idle node: needless. Reclaim-aware starts it on "b".
const char* kNeedless = R"(name: needless
duration_s: 3000
sample_interval_s: 100
seeds: [1]
federation:
  members:
    - {name: a, cluster: {generate: {total_gpus: 16, seed: 1, models: "H800:1:128:2048"}}}
    - {name: b, cluster: {generate: {total_gpus: 16, seed: 2, models: "H800:1:128:2048"}}}
jobs:
  - {name: lp1, class: lp, replicas: 8, gpus: 1, cpu_cores: 1, memory_gib: 1, duration_s: 100000, home: a, home_only: true}
  - {name: lp2, class: lp, replicas: 8, gpus: 1, cpu_cores: 1, memory_gib: 1, duration_s: 100000, home: a, home_only: true}
  - {name: dev, class: dev, submit_s: 50, gpus: 1, cpu_cores: 1, memory_gib: 1, duration_s: 100000}
  - {name: hp, class: hp-training, submit_s: 100, gpus: 8, cpu_cores: 8, memory_gib: 8, duration_s: 1000}
configurations:
  - {name: blind, federation: blind, preempt: {grace_s: 60}}
  - {name: reclaim-aware, federation: reclaim-aware, preempt: {grace_s: 60}}
  - {name: merged, federation: merged, preempt: {grace_s: 60}}
)";

TEST(FederationSim, BlindDispatchPreemptsNeedlesslyWhileReclaimAwareUsesIdleCapacityElsewhere) {
  const FedRun r = Load(kNeedless);
  const SimulateResult blind = RunConfig(r, "blind");
  EXPECT_GE(blind.metrics.at("evictions_count"), 1);
  EXPECT_EQ(blind.metrics.at("needless_preemptions_count"), blind.metrics.at("evictions_count"));
  EXPECT_GE(blind.metrics.at("hp_sched_delay_p99_s"), 60);  // it waited for the grace period
  const SimulateResult aware = RunConfig(r, "reclaim-aware");
  EXPECT_EQ(aware.metrics.at("evictions_count"), 0);
  EXPECT_EQ(aware.metrics.at("needless_preemptions_count"), 0);
  EXPECT_EQ(aware.metrics.at("hp_sched_delay_p99_s"), 0);
  const SimulateResult merged = RunConfig(r, "merged");
  EXPECT_EQ(merged.metrics.at("evictions_count"), 0);
  // The job events say where the HP job ran.
  int hp_starts = 0;
  for (const SimJobEvent& e : aware.job_events) {
    if (e.job == "hp" && e.kind == "start") {
      ++hp_starts;
      EXPECT_EQ(e.detail, "b");
    }
  }
  EXPECT_EQ(hp_starts, 1);
}

// Both members full of LP work (8 x 1 GPU twice on each); an HP job of 8 GPUs arrives at 100.
// With `preempt` it evicts on one member and starts after the grace period; a configuration
// without `preempt` evicts nothing in any mode: the HP job waits.
const char* kFullMembers = R"(name: full
duration_s: 3000
sample_interval_s: 100
seeds: [1]
federation:
  members:
    - {name: a, cluster: {generate: {total_gpus: 16, seed: 1, models: "H800:1:128:2048"}}}
    - {name: b, cluster: {generate: {total_gpus: 16, seed: 2, models: "H800:1:128:2048"}}}
jobs:
  - {name: lp1, class: lp, replicas: 8, gpus: 1, cpu_cores: 1, memory_gib: 1, duration_s: 100000, home: a, home_only: true}
  - {name: lp2, class: lp, replicas: 8, gpus: 1, cpu_cores: 1, memory_gib: 1, duration_s: 100000, home: a, home_only: true}
  - {name: lp3, class: lp, replicas: 8, gpus: 1, cpu_cores: 1, memory_gib: 1, duration_s: 100000, home: b, home_only: true}
  - {name: lp4, class: lp, replicas: 8, gpus: 1, cpu_cores: 1, memory_gib: 1, duration_s: 100000, home: b, home_only: true}
  - {name: hp, class: hp-training, submit_s: 100, gpus: 8, cpu_cores: 8, memory_gib: 8, duration_s: 1000}
configurations:
  - {name: aware, federation: reclaim-aware, preempt: {grace_s: 60}}
  - {name: aware-off, federation: reclaim-aware}
  - {name: blind-off, federation: blind}
  - {name: merged-off, federation: merged}
)";

// One member of one 8-GPU node: lp (8 GPUs, 1,000 s, no checkpoints) runs from 0 s; hp (8 GPUs,
// 100 s) arrives at 100 s, and its Reclaim evicts lp after the 60 s grace period; lp is dispatched
// again from hp's end (260 s) and runs to 1,260 s. The federation steps its member at 0 (lp
// arrives), 100 (hp arrives), 160 (the eviction is due), 260 (hp ends) and 1,260 (lp ends) — five
// cycles. lp's first run would have ended at 1,000 s: nothing happens then, and no cycle runs.
TEST(FederationSim, TheEndAnEvictedRunWouldHaveHadCausesNoCycle) {
  const FedRun r = Load(R"(name: stale
duration_s: 5000
sample_interval_s: 100
seeds: [1]
federation:
  members:
    - {name: a, cluster: {generate: {total_gpus: 8, seed: 1, models: "H800:1:128:2048"}}}
jobs:
  - {name: lp, class: lp, gpus: 8, cpu_cores: 1, memory_gib: 1, duration_s: 1000}
  - {name: hp, class: hp-training, submit_s: 100, gpus: 8, cpu_cores: 1, memory_gib: 1, duration_s: 100}
configurations:
  - {name: aware, federation: reclaim-aware, preempt: {grace_s: 60}}
)");
  const SimulateResult res = RunConfig(r, "aware");
  std::vector<std::string> seq;
  for (const SimJobEvent& e : res.job_events) seq.push_back(e.job + ":" + e.kind + ":" + std::to_string(e.time));
  EXPECT_THAT(seq, ::testing::ElementsAre("lp:start:0", "hp:reclaim:100", "lp:evict:160", "hp:start:160", "hp:finish:260", "lp:start:260",
                                          "lp:finish:1260"));
  EXPECT_EQ(res.cycles, 5);
}

TEST(FederationSim, AConfigurationWithoutPreemptEvictsNothingInAnyMode) {
  const FedRun r = Load(kFullMembers);
  const SimulateResult on = RunConfig(r, "aware");
  EXPECT_EQ(on.metrics.at("evictions_count"), 1);
  EXPECT_EQ(on.metrics.at("hp_sched_delay_p99_s"), 60);
  for (const char* name : {"aware-off", "blind-off", "merged-off"}) {
    const SimulateResult off = RunConfig(r, name);
    EXPECT_EQ(off.metrics.at("evictions_count"), 0) << name;
    EXPECT_EQ(off.metrics.at("reclaims_count"), 0) << name;
    for (const SimJobRecord& j : off.jobs) {
      if (j.name == "hp") {
        EXPECT_EQ(j.status, SimJobStatus::kPending) << name;
      }
    }
  }
}

// A warm-up leaves out of the metrics what happened before it, and keeps it in the time series.
// In kNeedless, blind's Reclaim for the HP job is decided at 100 and evicts at 160; every job is
// submitted by 100 and runs past the end.
TEST(FederationSim, AWarmUpLeavesTheEventsAndJobsBeforeItOutOfTheMetrics) {
  auto run = [](const std::string& warmup) {
    return RunConfig(Load(Inserted(kNeedless, "seeds:", warmup)), "blind");
  };
  const SimulateResult all = run("warmup_s: 0");
  EXPECT_EQ(all.metrics.at("reclaims_count"), 1);
  EXPECT_GE(all.metrics.at("evictions_count"), 1);
  EXPECT_GE(all.metrics.at("needless_preemptions_count"), 1);
  EXPECT_EQ(all.jobs.size(), 4u);
  // From 130: the Reclaim (decided at 100) and every job are before it, the eviction after it.
  const SimulateResult mid = run("warmup_s: 130");
  EXPECT_EQ(mid.metrics.at("reclaims_count"), 0);
  EXPECT_EQ(mid.metrics.at("evictions_count"), all.metrics.at("evictions_count"));
  EXPECT_TRUE(mid.jobs.empty());
  EXPECT_EQ(mid.metrics.count("hp_sched_delay_p99_s"), 0u);
  // From 2000: nothing but samples. The time series keeps all 30; the ratio is over the last 10.
  const SimulateResult late = run("warmup_s: 2000");
  EXPECT_EQ(late.metrics.at("evictions_count"), 0);
  EXPECT_EQ(late.metrics.at("needless_preemptions_count"), 0);
  EXPECT_EQ(late.metrics.at("dispatches_count"), 0);
  EXPECT_EQ(late.metrics.at("warmup_s"), 2000);
  ASSERT_EQ(late.samples.size(), 30u);
  double sum = 0, early = 0;
  for (const SimSample& x : late.samples) (x.time >= 2000 ? sum : early) += x.alloc_ratio_hp_lp_pct;
  EXPECT_DOUBLE_EQ(late.metrics.at("alloc_ratio_hp_lp_pct"), sum / 10);
  EXPECT_LT(early / 20, sum / 10);  // the cluster filled up during the warm-up
}

// Member "a" keeps one whole node as an HP headroom; LP work fills everything else. An HP job of
// 8 GPUs starts at once on the headroom (no Reclaim); "a" then holds its other node again and
// evicts the LP job there, which has lost little since its last checkpoint — an eviction for
// the headroom, not for any job, so no needless preemption; it restarts when the HP job ends.
const char* kHeadroom = R"(name: headroom
duration_s: 5000
sample_interval_s: 100
seeds: [1]
federation:
  members:
    - {name: a, cluster: {generate: {total_gpus: 16, seed: 1, models: "H800:1:128:2048"}},
       headroom: {replicas: 1, gpus: 8, min_job_gpus: 8}}
    - {name: b, cluster: {generate: {total_gpus: 16, seed: 2, models: "H800:1:128:2048"}}}
jobs:
  - {name: lp1, class: lp, replicas: 8, gpus: 1, cpu_cores: 1, memory_gib: 1, duration_s: 100000, home: a, home_only: true, checkpoint_interval_s: 600}
  - {name: lp2, class: lp, replicas: 8, gpus: 1, cpu_cores: 1, memory_gib: 1, duration_s: 100000, home: b, home_only: true, checkpoint_interval_s: 600}
  - {name: lp3, class: lp, replicas: 8, gpus: 1, cpu_cores: 1, memory_gib: 1, duration_s: 100000, home: b, home_only: true, checkpoint_interval_s: 600}
  - {name: lp4, class: lp, replicas: 8, gpus: 1, cpu_cores: 1, memory_gib: 1, duration_s: 100000, home: a, home_only: true, checkpoint_interval_s: 600}
  - {name: hp, class: hp-training, submit_s: 100, gpus: 8, cpu_cores: 8, memory_gib: 8, duration_s: 1000}
configurations:
  - {name: blind, federation: blind, preempt: {grace_s: 60}}
  - {name: reclaim-aware, federation: reclaim-aware, preempt: {grace_s: 60}}
)";

TEST(FederationSim, AnHpJobStartsAtOnceOnAMembersHeadroomWhichIsThenRestoredCheaply) {
  const FedRun r = Load(kHeadroom);
  const SimulateResult res = RunConfig(r, "reclaim-aware");
  EXPECT_EQ(res.metrics.at("hp_sched_delay_p99_s"), 0);
  EXPECT_EQ(res.metrics.at("reclaims_count"), 0);
  EXPECT_EQ(res.metrics.at("evictions_count"), 1);
  EXPECT_EQ(res.metrics.at("headroom_evictions_count"), 1);
  EXPECT_EQ(res.metrics.at("needless_preemptions_count"), 0);
  // lp1 was the one evicted (at ~100 s it had lost 100 s since its start; lp4 never found room
  // on "a") and ran again once the HP job had ended.
  std::vector<std::string> seq;
  for (const SimJobEvent& e : res.job_events) {
    if (e.job == "hp" || e.job == "lp1") seq.push_back(e.job + ":" + e.kind + (e.kind == "start" ? ":" + e.detail : ""));
  }
  EXPECT_THAT(seq, ::testing::ElementsAre("lp1:start:a", "hp:start:a", "lp1:evict", "hp:finish", "lp1:start:a"));
  // Blind does not know where the headroom is: round-robin sends the job to "b", which Reclaims
  // and makes it wait the grace period.
  const SimulateResult blind = RunConfig(r, "blind");
  EXPECT_EQ(blind.metrics.at("hp_sched_delay_p99_s"), 60);
  EXPECT_EQ(blind.metrics.at("reclaims_count"), 1);
  EXPECT_EQ(blind.metrics.at("headroom_evictions_count"), 0);
}

// The same, with the drain's two options set: lp1 (started at 0, a checkpoint every 600 s) may be
// evicted for the headroom only once at most headroom_max_loss_s of its work would be lost. The
// HP job starts at 100; the member plans the headroom again at 101 and looks at the held node
// every headroom_retry_s from then; the victim leaves at the end of its 60 s grace period.
TEST(FederationSim, AHeadroomDrainWaitsForTheVictimsCheckpointAtTheScenariosRetryPeriod) {
  auto evicted_at = [](const std::string& options) {
    const FedRun r = Load(Inserted(kHeadroom, "jobs:", "  " + options));
    const SimulateResult res = RunConfig(r, "reclaim-aware");
    EXPECT_EQ(res.metrics.at("headroom_evictions_count"), 1);
    for (const SimJobEvent& e : res.job_events) {
      if (e.job == "lp1" && e.kind == "evict") return e.time;
    }
    return SimTime{-1};
  };
  EXPECT_EQ(evicted_at("headroom_max_loss_s: 300"), 101 + 60);  // 101 s lost: at once
  // 101 s lost at 101, then looked at 161, ..., 641 (41 s lost).
  EXPECT_EQ(evicted_at("headroom_max_loss_s: 50"), 641 + 60);
  // Looked at 201, ..., 601 (1 s lost).
  EXPECT_EQ(evicted_at("headroom_max_loss_s: 50\n  headroom_retry_s: 100"), 601 + 60);
}

// One member full of LP work, the other of non-preemptible dev work: an HP job can start only by
// Reclaim on "a". Idle-only waits until the LP work ends; reclaim-aware evicts on "a" only.
const char* kReclaim = R"(name: reclaim
duration_s: 20000
sample_interval_s: 100
seeds: [1]
federation:
  members:
    - {name: a, cluster: {generate: {total_gpus: 16, seed: 1, models: "H800:1:128:2048"}}}
    - {name: b, cluster: {generate: {total_gpus: 16, seed: 2, models: "H800:1:128:2048"}}}
jobs:
  - {name: lp1, class: lp, replicas: 8, gpus: 1, cpu_cores: 1, memory_gib: 1, duration_s: 10000, home: a, home_only: true, checkpoint_interval_s: 600}
  - {name: lp2, class: lp, replicas: 8, gpus: 1, cpu_cores: 1, memory_gib: 1, duration_s: 10000, home: a, home_only: true, checkpoint_interval_s: 600}
  - {name: dev1, class: dev, replicas: 8, gpus: 1, cpu_cores: 1, memory_gib: 1, duration_s: 15000, home: b, home_only: true}
  - {name: dev2, class: dev, replicas: 8, gpus: 1, cpu_cores: 1, memory_gib: 1, duration_s: 15000, home: b, home_only: true}
  - {name: hp, class: hp-training, submit_s: 100, gpus: 8, cpu_cores: 8, memory_gib: 8, duration_s: 1000}
configurations:
  - {name: idle-only, federation: idle-only, preempt: {grace_s: 60}}
  - {name: reclaim-aware, federation: reclaim-aware, preempt: {grace_s: 60}}
)";

TEST(FederationSim, ReclaimAwareStartsAnHpJobByEvictingInTheOneMemberWhereItCanWhileIdleOnlyWaits) {
  const FedRun r = Load(kReclaim);
  const SimulateResult idle = RunConfig(r, "idle-only");
  EXPECT_EQ(idle.metrics.at("evictions_count"), 0);
  EXPECT_EQ(idle.metrics.at("hp_sched_delay_p99_s"), 10000 - 100);  // until the LP work ends
  const SimulateResult aware = RunConfig(r, "reclaim-aware");
  EXPECT_EQ(aware.metrics.at("hp_sched_delay_p99_s"), 60);  // the grace period
  EXPECT_EQ(aware.metrics.at("needless_preemptions_count"), 0);
  EXPECT_EQ(aware.metrics.at("reclaims_count"), 1);
  EXPECT_GE(aware.metrics.at("evictions_count"), 1);
  int hp_starts = 0;
  for (const SimJobEvent& e : aware.job_events) {
    if (e.kind == "evict" || e.kind == "shrink") {
      EXPECT_THAT(e.job, ::testing::StartsWith("lp"));
    }
    if (e.job == "hp" && e.kind == "start") {
      ++hp_starts;
      EXPECT_EQ(e.detail, "a");
    }
    EXPECT_FALSE(e.job.rfind("dev", 0) == 0 && (e.kind == "evict" || e.kind == "shrink"));
  }
  EXPECT_EQ(hp_starts, 1);
}

// One member of one 8-GPU node. A dev job holds 4 GPUs, so an elastic LP job of up to 8 replicas
// (min 4, step 4) starts with 4. An HP job of 4 GPUs arrives at 400 and Reclaims the LP job whole;
// its victim takes the whole 60 s grace period. Work lost (metrics.md §6): the 4 GPUs it held, not
// the 8 it may grow to, x the 459 s since it started (checkpoints every 1,000 s).
const char* kLost = R"(name: lost
duration_s: 2000
sample_interval_s: 100
seeds: [1]
federation:
  members:
    - {name: a, cluster: {generate: {total_gpus: 8, seed: 1, models: "H800:1:128:2048"}}}
jobs:
  - {name: dev, class: dev, gpus: 4, cpu_cores: 1, memory_gib: 1, duration_s: 100000}
  - {name: lp, class: lp, submit_s: 1, replicas: {min: 4, max: 8, step: 4}, gpus: 1, cpu_cores: 1, memory_gib: 1,
     duration_s: 100000, checkpoint_interval_s: 1000}
  - {name: hp, class: hp-training, submit_s: 400, gpus: 4, cpu_cores: 1, memory_gib: 1, duration_s: 100000}
configurations:
  - {name: reclaim-aware, federation: reclaim-aware, preempt: {grace_s: 60}}
)";

TEST(FederationSim, AnEvictionLosesTheGpusTheVictimHeldTimesTheTimeSinceItsLastCheckpoint) {
  const FedRun r = Load(kLost);
  const SimulateResult res = RunConfig(r, "reclaim-aware");
  int lp_starts = 0;
  for (const SimJobEvent& e : res.job_events) {
    if (e.job == "lp" && e.kind == "start") {
      ++lp_starts;
      EXPECT_EQ(e.replicas, 4);
      EXPECT_EQ(e.time, 1);
    }
    if (e.job == "lp" && e.kind == "evict") {
      EXPECT_EQ(e.time, 460);
    }
  }
  EXPECT_EQ(lp_starts, 1);  // it waits behind the HP job afterwards
  EXPECT_EQ(res.metrics.at("evictions_count"), 1);
  EXPECT_NEAR(res.metrics.at("preemption_lost_gpu_hours"), 4.0 * 459 / 3600, 1e-9);
}

// Two members of one 8-GPU node each. `long` (8 GPUs, 1,000 s of work, walltime 300 s) and `next`
// (8 GPUs, 100 s) may run only on member a; `other` runs on b. long starts at 0 and is stopped at
// 300 by a's engine (its limit); next starts on a's node then and finishes at 400.
const char* kWalltime = R"(name: walltime
duration_s: 1000
sample_interval_s: 100
seeds: [1]
federation:
  members:
    - {name: a, cluster: {generate: {total_gpus: 8, seed: 1, models: "H800:8:128:2048"}}}
    - {name: b, cluster: {generate: {total_gpus: 8, seed: 2, models: "H800:8:128:2048"}}}
jobs:
  - {name: long, class: lp, gpus: 8, cpu_cores: 8, memory_gib: 8, duration_s: 1000, walltime_s: 300, home: a, home_only: true}
  - {name: next, class: lp, submit_s: 10, gpus: 8, cpu_cores: 8, memory_gib: 8, duration_s: 100, home: a, home_only: true}
  - {name: other, class: lp, gpus: 8, cpu_cores: 8, memory_gib: 8, duration_s: 100000, home: b, home_only: true}
configurations:
  - {name: reclaim-aware, federation: reclaim-aware}
)";

TEST(FederationSim, AMembersEngineStopsARunAtItsWalltimeAndTheNextJobTakesItsNode) {
  const FedRun r = Load(kWalltime);
  const SimulateResult res = RunConfig(r, "reclaim-aware");
  std::map<std::string, std::vector<P>> seen = Timelines(res);
  EXPECT_EQ(seen["long"], (std::vector<P>{{"start", 0}, {"timeout", 300}}));
  EXPECT_EQ(seen["next"], (std::vector<P>{{"start", 300}, {"finish", 400}}));
  EXPECT_EQ(res.metrics.at("jobs_timed_out_count"), 1);
  for (const SimJobRecord& j : res.jobs) {
    if (j.name == "long") {
      EXPECT_EQ(j.status, SimJobStatus::kTimedOut);
    } else if (j.name == "next") {
      EXPECT_EQ(j.status, SimJobStatus::kFinished);
    }
  }
}

// Goodput (goodput_gpu_hours, as in the single-cluster simulator): one member of one 8-GPU node.
// `done` (2 replicas x 2 GPUs, 1,000 s of work) starts at 0 and finishes at 1,000; all of its run
// is goodput: 2 x 2 x 1,000 = 4,000 GPU-s. `odd` (3 x 1 GPU, linear scaling, usable_step 2: 3,000
// replica-s of work done by its 2 usable replicas) starts at 0 and finishes at 1,500; its third
// replica does no work: goodput 2 x 1,500 = 3,000 GPU-s of its 3 x 1,500 = 4,500.
const char* kGoodputFinished = R"(name: goodput-finished
duration_s: 2000
sample_interval_s: 100
seeds: [1]
federation:
  members:
    - {name: a, cluster: {generate: {total_gpus: 8, seed: 1, models: "H800:1:128:2048"}}}
jobs:
  - {name: done, class: lp, replicas: 2, gpus: 2, cpu_cores: 1, memory_gib: 1, duration_s: 1000}
  - {name: odd, class: lp, replicas: 3, gpus: 1, cpu_cores: 1, memory_gib: 1, duration_s: 1000, scaling: linear,
     usable_step: 2}
configurations:
  - {name: reclaim-aware, federation: reclaim-aware, preempt: {grace_s: 60}}
)";

// GPU-seconds in the metrics' GPU-hours.
double GpuHours(int64_t gpu_s) { return static_cast<double>(gpu_s) / 3600.0; }

TEST(FederationSim, AFinishedRunIsGoodputWholeExceptReplicasBeyondItsUsableStep) {
  const SimulateResult res = RunConfig(Load(kGoodputFinished), "reclaim-aware");
  std::map<std::string, std::vector<P>> seen = Timelines(res);
  ASSERT_EQ(seen["done"], (std::vector<P>{{"start", 0}, {"finish", 1000}}));
  ASSERT_EQ(seen["odd"], (std::vector<P>{{"start", 0}, {"finish", 1500}}));
  EXPECT_DOUBLE_EQ(res.metrics.at("goodput_gpu_hours"), GpuHours(2 * 2 * 1000 + 2 * 1500));
  EXPECT_DOUBLE_EQ(res.metrics.at("run_gpu_hours"), GpuHours(2 * 2 * 1000 + 3 * 1500));
  // The rest of the run is odd's third replica: 1 GPU x 1,500 s, unusable.
  EXPECT_DOUBLE_EQ(res.metrics.at("unusable_gpu_hours"), GpuHours(1500));
  for (const char* none : {"restart_gpu_hours", "eviction_lost_gpu_hours", "unkept_gpu_hours"}) {
    EXPECT_EQ(res.metrics.at(none), 0) << none;
  }
}

// One member of one 8-GPU node. `lp` (8 x 1 GPU, 1,000 s of work, a checkpoint every 300 s,
// restart_cost_s 50) starts at 0; `hp` (8 GPUs, 500 s) arrives at 400 and Reclaims it: lp is
// evicted at 460 (grace 60), having kept its work up to its checkpoint at 300; hp runs 460-960;
// lp starts again at 960, restarts until 1,010 and does its 700 s left by 1,710.
//   goodput: lp's first run up to 300 (8 x 300 = 2,400), its second run less its restart period
//            (8 x (1,710 - 1,010) = 5,600), hp whole (8 x 500 = 4,000): 12,000 GPU-s
//   run:     lp 8 x 460 + 8 x 750, hp 8 x 500: 13,680 GPU-s
// With warmup_s 1,000 only GPU time from 1,000 counts: lp's second run from 1,000, of which
// 1,000-1,010 is its restart period: goodput 8 x 700 = 5,600, run 8 x 710 = 5,680.
const char* kGoodputEvicted = R"(name: goodput-evicted
duration_s: 3000
sample_interval_s: 100
seeds: [1]
federation:
  members:
    - {name: a, cluster: {generate: {total_gpus: 8, seed: 1, models: "H800:1:128:2048"}}}
jobs:
  - {name: lp, class: lp, replicas: 8, gpus: 1, cpu_cores: 1, memory_gib: 1, duration_s: 1000,
     checkpoint_interval_s: 300, restart_cost_s: 50}
  - {name: hp, class: hp-training, submit_s: 400, gpus: 8, cpu_cores: 1, memory_gib: 1, duration_s: 500}
configurations:
  - {name: reclaim-aware, federation: reclaim-aware, preempt: {grace_s: 60}}
)";

TEST(FederationSim, AnEvictedRunIsGoodputUpToItsLastCheckpointAndARestartPeriodIsNot) {
  const SimulateResult res = RunConfig(Load(kGoodputEvicted), "reclaim-aware");
  std::map<std::string, std::vector<P>> seen = Timelines(res);
  ASSERT_EQ(seen["lp"], (std::vector<P>{{"start", 0}, {"evict", 460}, {"start", 960}, {"finish", 1710}}));
  ASSERT_EQ(seen["hp"], (std::vector<P>{{"reclaim", 400}, {"start", 460}, {"finish", 960}}));
  EXPECT_DOUBLE_EQ(res.metrics.at("goodput_gpu_hours"), GpuHours(8 * 300 + 8 * 700 + 8 * 500));
  EXPECT_DOUBLE_EQ(res.metrics.at("run_gpu_hours"), GpuHours(8 * 460 + 8 * 750 + 8 * 500));
  EXPECT_DOUBLE_EQ(res.metrics.at("preemption_lost_gpu_hours"), GpuHours(8 * 160));
  // The rest: lp's first run after its checkpoint (300-460) lost to the eviction, and its second
  // run's restart period (960-1,010).
  EXPECT_DOUBLE_EQ(res.metrics.at("eviction_lost_gpu_hours"), GpuHours(8 * 160));
  EXPECT_DOUBLE_EQ(res.metrics.at("restart_gpu_hours"), GpuHours(8 * 50));
  EXPECT_EQ(res.metrics.at("unkept_gpu_hours"), 0);
  EXPECT_EQ(res.metrics.at("unusable_gpu_hours"), 0);
  const SimulateResult late = RunConfig(Load(Inserted(kGoodputEvicted, "seeds:", "warmup_s: 1000")), "reclaim-aware");
  EXPECT_DOUBLE_EQ(late.metrics.at("goodput_gpu_hours"), GpuHours(8 * 700));
  EXPECT_DOUBLE_EQ(late.metrics.at("run_gpu_hours"), GpuHours(8 * 710));
  EXPECT_DOUBLE_EQ(late.metrics.at("restart_gpu_hours"), GpuHours(8 * 10));
  EXPECT_EQ(late.metrics.at("eviction_lost_gpu_hours"), 0);
}

// The same with lp checkpointing on the eviction notice (checkpoint_on_notice_s, as in the
// single-cluster simulator): the notice comes with hp's Reclaim at 400, the checkpoint of lp's
// state at 400 is written by 420, before the eviction at 460, so lp keeps its work up to 400 (not
// its periodic checkpoint at 300) and loses only 400-460. Its second run (960) restarts until
// 1,010 and does the 600 s left by 1,610.
//   goodput: 8 x 400 + 8 x (1,610 - 1,010) + 8 x 500 = 12,000 GPU-s (the same work, less lost)
//   run:     lp 8 x 460 + 8 x 650, hp 8 x 500: 12,880 GPU-s; lost 8 x 60; restart 8 x 50.
// A checkpoint that takes 61 s would be written at 461, after the eviction: as without it.
TEST(FederationSim, AVictimThatCheckpointsOnTheNoticeWithinTheGraceLosesOnlyTheTimeSinceTheNotice) {
  const std::string lp = "checkpoint_interval_s: 300, restart_cost_s: 50";
  std::string yaml = kGoodputEvicted;
  yaml.replace(yaml.find(lp), lp.size(), lp + ", checkpoint_on_notice_s: 20");
  const SimulateResult res = RunConfig(Load(yaml), "reclaim-aware");
  std::map<std::string, std::vector<P>> seen = Timelines(res);
  ASSERT_EQ(seen["lp"], (std::vector<P>{{"start", 0}, {"evict", 460}, {"start", 960}, {"finish", 1610}}));
  ASSERT_EQ(seen["hp"], (std::vector<P>{{"reclaim", 400}, {"start", 460}, {"finish", 960}}));
  EXPECT_DOUBLE_EQ(res.metrics.at("goodput_gpu_hours"), GpuHours(8 * 400 + 8 * 600 + 8 * 500));
  EXPECT_DOUBLE_EQ(res.metrics.at("run_gpu_hours"), GpuHours(8 * 460 + 8 * 650 + 8 * 500));
  EXPECT_DOUBLE_EQ(res.metrics.at("preemption_lost_gpu_hours"), GpuHours(8 * 60));
  EXPECT_DOUBLE_EQ(res.metrics.at("eviction_lost_gpu_hours"), GpuHours(8 * 60));
  EXPECT_DOUBLE_EQ(res.metrics.at("restart_gpu_hours"), GpuHours(8 * 50));

  std::string slow = kGoodputEvicted;
  slow.replace(slow.find(lp), lp.size(), lp + ", checkpoint_on_notice_s: 61");
  const SimulateResult late = RunConfig(Load(slow), "reclaim-aware");
  EXPECT_EQ(Timelines(late)["lp"], (std::vector<P>{{"start", 0}, {"evict", 460}, {"start", 960}, {"finish", 1710}}));
  EXPECT_DOUBLE_EQ(late.metrics.at("goodput_gpu_hours"), GpuHours(8 * 300 + 8 * 700 + 8 * 500));
  EXPECT_DOUBLE_EQ(late.metrics.at("eviction_lost_gpu_hours"), GpuHours(8 * 160));
}

// One member of one 8-GPU node; both jobs start at 0 and are still running at the end (2,000).
// `ckpt` (2 x 2 GPUs, a checkpoint every 700 s) keeps its work up to 1,400: 4 x 1,400 = 5,600
// GPU-s of goodput; `nockpt` (4 GPUs, no checkpoint) none. Run: 2 x 4 x 2,000 = 16,000 GPU-s.
// With warmup_s 1,000: ckpt's 1,000-1,400 (1,600 GPU-s) of 8,000.
const char* kGoodputUnfinished = R"(name: goodput-unfinished
duration_s: 2000
sample_interval_s: 100
seeds: [1]
federation:
  members:
    - {name: a, cluster: {generate: {total_gpus: 8, seed: 1, models: "H800:1:128:2048"}}}
jobs:
  - {name: ckpt, class: lp, replicas: 2, gpus: 2, cpu_cores: 1, memory_gib: 1, duration_s: 100000, checkpoint_interval_s: 700}
  - {name: nockpt, class: lp, gpus: 4, cpu_cores: 1, memory_gib: 1, duration_s: 100000}
configurations:
  - {name: reclaim-aware, federation: reclaim-aware, preempt: {grace_s: 60}}
)";

TEST(FederationSim, ARunStillGoingAtTheEndIsGoodputUpToItsLastCheckpoint) {
  const SimulateResult res = RunConfig(Load(kGoodputUnfinished), "reclaim-aware");
  for (const SimJobEvent& e : res.job_events) {
    EXPECT_EQ(e.kind, "start") << e.job;
    EXPECT_EQ(e.time, 0) << e.job;
  }
  EXPECT_EQ(res.job_events.size(), 2u);
  EXPECT_DOUBLE_EQ(res.metrics.at("goodput_gpu_hours"), GpuHours(4 * 1400));
  EXPECT_DOUBLE_EQ(res.metrics.at("run_gpu_hours"), GpuHours(2 * 4 * 2000));
  // Not kept: ckpt's 1,400-2,000 and all of nockpt's run.
  EXPECT_DOUBLE_EQ(res.metrics.at("unkept_gpu_hours"), GpuHours(4 * 600 + 4 * 2000));
  const SimulateResult late = RunConfig(Load(Inserted(kGoodputUnfinished, "seeds:", "warmup_s: 1000")), "reclaim-aware");
  EXPECT_DOUBLE_EQ(late.metrics.at("goodput_gpu_hours"), GpuHours(4 * 400));
  EXPECT_DOUBLE_EQ(late.metrics.at("run_gpu_hours"), GpuHours(2 * 4 * 1000));
  EXPECT_DOUBLE_EQ(late.metrics.at("unkept_gpu_hours"), GpuHours(4 * 600 + 4 * 1000));
}

// A cross-check on a generated workload (HP gangs Reclaiming elastic LP jobs that Absorb grows
// and Reclaim shrinks): every run's GPU time after the warm-up, summed, is the allocated GPU time
// the samples integrate (gpu_alloc_pct_mean of the 512 GPUs over the 5,400 s after warmup_s), in
// every mode; goodput is a part of it.
const char* kGoodputGenerated = R"(name: goodput-generated
duration_s: 7200
warmup_s: 1800
sample_interval_s: 600
seeds: [1]
federation:
  members:
    - {name: a, cluster: {generate: {total_gpus: 256, seed: 1, models: "H800:1:128:2048"}}}
    - {name: b, cluster: {generate: {total_gpus: 256, seed: 2, models: "A100:1:96:1024"}}}
generator:
  arrivals_per_hour: 200
  classes:
    - {share: 1, class: hp-training, replicas: 2, gpus: 8, cpu_cores: 32, memory_gib: 256, duration_mean_s: 1800}
    - {share: 2, class: lp, replicas: {min: 4, max: 16, step: 4}, gpus: 1, cpu_cores: 4, memory_gib: 32, duration_mean_s: 3600,
       checkpoint_interval_s: 600, restart_cost_s: 60}
configurations:
  - {name: blind, federation: blind, preempt: {grace_s: 60}, absorb: true}
  - {name: reclaim-aware, federation: reclaim-aware, preempt: {grace_s: 60}, absorb: true}
  - {name: merged, federation: merged, preempt: {grace_s: 60}, absorb: true}
)";

TEST(FederationSim, TheRunsGpuTimeIsTheAllocatedGpuTimeAndGoodputIsAPartOfIt) {
  const FedRun r = Load(kGoodputGenerated);
  for (const char* name : {"blind", "reclaim-aware", "merged"}) {
    const SimulateResult res = RunConfig(r, name);
    const double allocated_gpu_hours = res.metrics.at("gpu_alloc_pct_mean") / 100 * 512 * (7200 - 1800) / 3600;
    const double run = res.metrics.at("run_gpu_hours"), goodput = res.metrics.at("goodput_gpu_hours");
    EXPECT_GT(res.metrics.at("evictions_count"), 0) << name;
    EXPECT_GT(run, 0) << name;
    EXPECT_NEAR(run, allocated_gpu_hours, 1e-9 * allocated_gpu_hours) << name;
    EXPECT_GT(goodput, 0) << name;
    EXPECT_LT(goodput, run) << name;
    // The run splits into goodput, restart periods, work lost to evictions, work not kept at the
    // end and unusable replicas.
    double parts = 0;
    for (const char* m : {"goodput_gpu_hours", "restart_gpu_hours", "eviction_lost_gpu_hours", "unkept_gpu_hours",
                          "unusable_gpu_hours"}) {
      EXPECT_GE(res.metrics.at(m), 0) << name << " " << m;
      parts += res.metrics.at(m);
    }
    EXPECT_NEAR(parts, run, 1e-9 * run) << name;
    EXPECT_GT(res.metrics.at("eviction_lost_gpu_hours"), 0) << name;
    EXPECT_GT(res.metrics.at("restart_gpu_hours"), 0) << name;
  }
}

// A member defragments its own nodes (`defrag`, as in a single cluster; tests/sim/defrag_sim_test.cc
// has the same timeline): member "a" has three 8-GPU nodes in one ASW, "b" one node that `other`
// fills. On "a", best fit packs w1 and w2 on one node, w3 and w4 on another (here the first two:
// the member's dispatch order and seeded tie-break decide which pair is where); w2 and w4 end at
// 1,000 s, leaving two half-used nodes. `e` (8 GPUs) takes the third at 1,100 s; `f`
// (8 GPUs) arrives at 1,200 s and, dispatched blind to "a" (its home only), waits in a's queue.
// 300 s later a's trigger plans to vacate the first node (the fewest tasks, then the least used,
// then the first): the long job there moves to GPUs 4-7 of the second (make-before-break, its new
// instance ready 120 s after the start), and f starts at 1,620 s on the vacated node.
const char* kMemberDefrag = R"(name: member-defrag
duration_s: 20000
sample_interval_s: 100
seeds: [1]
federation:
  members:
    - {name: a, cluster: {generate: {total_gpus: 24, gpus_per_node: 8, nodes_per_asw_min: 3, nodes_per_asw_max: 3, seed: 1}}}
    - {name: b, cluster: {generate: {total_gpus: 8, gpus_per_node: 8, seed: 2}}}
jobs:
  - {name: other, gpus: 8, cpu_cores: 1, memory_gib: 1, duration_s: 100000, home: b, home_only: true}
  - {name: w1, gpus: 4, cpu_cores: 1, memory_gib: 1, duration_s: 100000, home: a, home_only: true}
  - {name: w2, gpus: 4, cpu_cores: 1, memory_gib: 1, duration_s: 1000, home: a, home_only: true}
  - {name: w3, gpus: 4, cpu_cores: 1, memory_gib: 1, duration_s: 100000, home: a, home_only: true}
  - {name: w4, gpus: 4, cpu_cores: 1, memory_gib: 1, duration_s: 1000, home: a, home_only: true}
  - {name: e, submit_s: 1100, gpus: 8, cpu_cores: 1, memory_gib: 1, duration_s: 100000, home: a, home_only: true}
  - {name: f, submit_s: 1200, gpus: 8, cpu_cores: 1, memory_gib: 1, duration_s: 5000, home: a, home_only: true}
configurations:
  - {name: defrag, federation: blind, defrag: {interval_s: 0, trigger_after_s: 300, startup_s: 120}}
  - {name: none, federation: blind}
)";

TEST(FederationSim, AMemberDefragmentsItsOwnNodesMakeBeforeBreakForAJobWaitingInItsQueue) {
  const FedRun r = Load(kMemberDefrag);
  const SimulateResult res = RunConfig(r, "defrag");
  // The long job that shared the first node (w1 or w3: the member's seeded tie-break among empty
  // nodes decides where w1 went) is the one moved.
  std::vector<std::string> moves;
  std::string moved;
  for (const SimJobEvent& e : res.job_events) {
    if (e.kind.rfind("migrate", 0) != 0) continue;
    moves.push_back(std::to_string(e.time) + " " + e.kind + " " + e.detail);
    moved = e.job;
  }
  ASSERT_TRUE(moved == "w1" || moved == "w3") << moved;
  const std::string move = "a: " + moved + "-0 node0000001->node0000002:4,5,6,7";
  EXPECT_EQ(moves, (std::vector<std::string>{"1500 migrate-start " + move, "1620 migrate " + move}));
  std::map<std::string, std::vector<P>> seen = Timelines(res);
  EXPECT_EQ(seen["f"], (std::vector<P>{{"start", 1620}, {"finish", 6620}}));
  EXPECT_EQ(seen["other"], (std::vector<P>{{"start", 0}}));
  EXPECT_EQ(res.metrics.at("migrations_started_count"), 1);
  EXPECT_EQ(res.metrics.at("migrations_completed_count"), 1);
  EXPECT_EQ(res.metrics.at("defrag_vacated_nodes_count"), 1);
  EXPECT_EQ(res.metrics.at("defrag_triggered_count"), 1);
  EXPECT_DOUBLE_EQ(res.metrics.at("double_occupancy_gpu_hours"), 4.0 * 120 / 3600);  // 4 GPUs twice for 120 s
  // Without defragmentation f waits to the end, and no defragmentation figure is reported.
  const SimulateResult none = RunConfig(r, "none");
  std::map<std::string, std::vector<P>> waited = Timelines(none);
  EXPECT_TRUE(waited["f"].empty());
  EXPECT_EQ(none.metrics.count("migrations_completed_count"), 0u);
}

TEST(FederationSim, TheSameSeedGivesTheSameResults) {
  const FedRun r = Load(kReclaim);
  const SimulateResult a = RunConfig(r, "reclaim-aware"), b = RunConfig(r, "reclaim-aware");
  EXPECT_EQ(a.metrics, b.metrics);
  ASSERT_EQ(a.job_events.size(), b.job_events.size());
  for (size_t i = 0; i < a.job_events.size(); ++i) {
    EXPECT_EQ(a.job_events[i].time, b.job_events[i].time);
    EXPECT_EQ(a.job_events[i].kind, b.job_events[i].kind);
    EXPECT_EQ(a.job_events[i].detail, b.job_events[i].detail);
  }
}

}  // namespace
}  // namespace estuary

// A tiny cluster of 8-GPU nodes for the victim-selection tests (preempt_k8s_test,
// preempt_volcano_test): running preemptible jobs placed by hand, waiting gangs, and the names
// of what a plan evicts and where it places.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <set>
#include <string>
#include <vector>

#include "sched/actions/preempt.h"
#include "tests/testing/fixtures.h"

namespace estuary::testing {

struct PreemptCluster : AswCluster {
  using AswCluster::AswCluster;

  // A running preemptible job (unless `preemptible` is false) with one task of `gpus` GPUs on
  // each node of `on`, started at `started_s`; `min` > 0: its min replicas (elastic).
  JobId Run(const std::string& name, const std::vector<int>& on, int gpus, int32_t priority, int64_t started_s = 0,
            bool preemptible = true, int32_t min = 0) {
    JobSpec s;
    s.name = name;
    s.min_replicas = s.max_replicas = static_cast<int32_t>(on.size());
    if (min > 0) s.min_replicas = min;
    s.priority = priority;
    s.preemptible = preemptible;
    const JobId j = c.state.AddJob(s);
    for (size_t i = 0; i < on.size(); ++i) {
      const TaskId t = c.state.AddTask(j, name + "-" + std::to_string(i), Req().Cpu(1000).Gpus(gpus));
      const Node& n = c.state.node(N(on[i]));
      GpuIndices g;
      for (int k = 0; k < n.spec.gpu_count && g.size < gpus; ++k) {
        if (n.gpu_free[k] == kMilliPerGpu) g.Push(k);
      }
      c.state.Bind(t, N(on[i]), g);
    }
    c.state.SetJobStart(j, started_s);
    return j;
  }
  // A waiting gang of `replicas` tasks of `req` at `priority`, confined to one ASW when
  // `required_asw`.
  JobId Gang(const std::string& name, int replicas, TaskRequest req, int32_t priority, bool required_asw = false) {
    JobSpec s;
    s.name = name;
    s.min_replicas = s.max_replicas = replicas;
    s.priority = priority;
    if (required_asw) {
      s.topology.plane = data;
      s.topology.required_level = 0;
    }
    const JobId j = c.state.AddJob(s);
    for (int i = 0; i < replicas; ++i) c.state.AddTask(j, name + "-" + std::to_string(i), req);
    return j;
  }
  std::set<std::string> Jobs(const PreemptionPlan& p) const {
    std::set<std::string> out;
    for (JobId j : p.evicted_jobs) out.insert(c.state.job(j).spec.name);
    return out;
  }
  std::vector<std::string> Nodes(const PreemptionPlan& p) const {
    std::vector<std::string> out;
    for (NodeId n : p.nodes) out.push_back(c.state.node(n).spec.name);
    return out;
  }
  // A plan for `j` at `now_s` by `victims`' rule (topology and Align off) whose victims the
  // budget admits, first asked first served, up to `budget_milli` GPU milli in all (as a queue's
  // budget does: VictimFilter::take). The cluster's invariants are checked on it.
  PreemptionPlan PlanWithBudget(JobId j, int64_t now_s, VictimSelection victims, int64_t budget_milli) const {
    AllocateOptions o;
    o.topology = false;
    o.align = false;
    o.victims = victims;
    VictimFilter f;
    auto left = std::make_shared<int64_t>(budget_milli);
    f.take = [left](const Job&, int64_t gpu) {
      if (*left < gpu) return false;
      *left -= gpu;
      return true;
    };
    const PreemptionPlan p = PreemptAction::Plan(c.state, j, now_s, o, {}, f);
    EXPECT_TRUE(c.state.CheckInvariants().ok());
    return p;
  }
};

}  // namespace estuary::testing

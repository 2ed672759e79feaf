// Helpers for simulator scenario tests: run a scenario written inline, look up a job's record.
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "sim/scenario.h"
#include "sim/simulate.h"

namespace estuary::testing {

// Parses `yaml` as the scenario file "s.yaml" and runs its first configuration with `seed`,
// checking ClusterState invariants after every event time.
inline StatusOr<SimulateResult> RunScenarioText(const std::string& yaml, uint64_t seed = 1) {
  auto sc = ParseScenario(yaml, "s.yaml");
  if (!sc.ok()) return sc.status();
  auto cluster = LoadScenarioCluster(*sc);
  if (!cluster.ok()) return cluster.status();
  return RunScenario(*sc, *cluster, sc->configurations[0], seed, /*check_invariants=*/true);
}

// The first start of job `name` in `r` (-1: never started); a test failure when there is no such job.
inline SimTime StartOf(const SimulateResult& r, const std::string& name) {
  for (const SimJobRecord& j : r.jobs) {
    if (j.name == name) return j.start_s;
  }
  ADD_FAILURE() << "no job " << name;
  return -1;
}

}  // namespace estuary::testing

// The pieces of a generated job stream that the single-cluster and the federation simulators
// share (Scenario::stream, TidalWorkload): Poisson gaps, weighted picks, exponential durations and
// the tidal demand at a local time. Each draw takes exactly one value from the Rng, so a caller's
// order of draws fixes its results.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "common/clock.h"
#include "common/rng.h"
#include "engine/io.h"
#include "sim/scenario.h"

namespace estuary {

// The gap to the next arrival of a Poisson process of `rate` arrivals per second.
double PoissonGap(Rng& rng, double rate);
// The index i of `weights` such that a uniform draw in [0, sum) falls into weight i.
size_t WeightedPick(Rng& rng, const std::vector<double>& weights);
// A duration drawn from an exponential distribution of `mean` seconds, rounded up, at least 1.
SimTime ExpDuration(Rng& rng, double mean);
// The tidal curve's demand (per mille of the peak) at simulated time t for a clock whose local
// hour at t = 0 is `start_hour`; days 5 and 6 of each week scaled by weekend_pct.
int64_t TidalDemandPermille(const TidalWorkload& w, int64_t start_hour, SimTime t);
// The engine's job (EngineJob, its id `id`) for a job of template `t`: every field of the job
// schema the engine reads, min_replicas 0 read as max replicas. The simulator adds what it alone
// knows (the replicas never moved by defragmentation); a federation clears per_replica.models (its
// members admit by `models`, resolved against each member's cluster).
EngineJob EngineJobOf(const JobTemplate& t, uint32_t id);

}  // namespace estuary

#include "sim/job_stream.h"

#include <algorithm>
#include <cmath>

namespace estuary {

double PoissonGap(Rng& rng, double rate) { return -std::log(1.0 - rng.UniformDouble()) / rate; }

size_t WeightedPick(Rng& rng, const std::vector<double>& weights) {
  double total = 0;
  for (double w : weights) total += w;
  double x = rng.UniformDouble() * total;
  size_t i = 0;
  while (i + 1 < weights.size() && x >= weights[i]) x -= weights[i++];
  return i;
}

SimTime ExpDuration(Rng& rng, double mean) {
  return std::max<SimTime>(1, static_cast<SimTime>(std::ceil(-std::log(1.0 - rng.UniformDouble()) * mean)));
}

int64_t TidalDemandPermille(const TidalWorkload& w, int64_t start_hour, SimTime t) {
  const int64_t local = start_hour * 3600 + t;
  const int64_t day = local >= 0 ? local / 86400 : -((-local + 86399) / 86400);
  const int64_t p = w.curve.PermilleAt(local - day * 86400);
  return ((day % 7) + 7) % 7 >= 5 ? p * w.weekend_pct / 100 : p;
}

EngineJob EngineJobOf(const JobTemplate& t, uint32_t id) {
  EngineJob e;
  e.id = id;
  e.name = t.name;
  e.max_replicas = t.replicas;
  e.min_replicas = t.min_replicas > 0 ? t.min_replicas : t.replicas;
  e.step = t.step;
  e.usable_step = t.usable_step;
  e.per_replica = t.per_replica;
  e.models = t.models;
  e.plane = t.plane;
  e.required_level = t.required_level;
  e.preferred_level = t.preferred_level;
  e.required_max_wait_s = t.required_max_wait_s;
  e.priority = t.priority;
  e.preemptible = t.preemptible;
  e.checkpoint_interval_s = t.checkpoint_interval_s;
  e.checkpoint_on_notice_s = t.checkpoint_on_notice_s;
  e.restart_cost_s = t.restart_cost_s;
  e.walltime_s = t.walltime_s;
  e.queue = t.queue;
  return e;
}

}  // namespace estuary

// The queue schema (issue 20): a configuration's `queues:` list and `sharing:` mapping — in a
// scenario's configuration (YAML, converted to this JSON), the service's --config file and its
// PUT /v1/queues body — decoded by one reader with one set of messages. The queue tree's own
// checks (parents, guarantees against limits, GPU models) are QueueTree::Build's.
//
//   queues: a list of
//     {name, parent, guarantee, limit, lend_limit, weight (1..1000000, default 1),
//      max_priority (0..1000, default 1000), reclaim (default true), reclaimable (default true),
//      tenants (the service's tenants that may submit to it and to the queues under it: a list
//      of tenant names, default none; the simulator ignores it)}
//     where a quota (guarantee, limit, lend_limit) is {gpus, cpu_milli | cpu_cores,
//     memory_mib | memory_gib}: `gpus` whole GPUs of any model (0..10,000,000) or a mapping
//     {MODEL: GPUs} per model.
//   sharing: {borrow, reclaim, weights (booleans, default true), reclaim_to (guarantee — the
//     default — or fair-share), usage_half_life_s (0..10^9, default 0: off),
//     cooldown_s (0..10^9, default 300), reborrow_s (0..10^9, default 3600), budget_period_s
//     (1..86,400, default 60),
//     count_in_flight (boolean, default true), rebalance (boolean, default true),
//     within_queue (boolean, default false)}
// Errors: InvalidArgument "field 'queues[2].guarantee.gpus.H800': -1 is below 0".
// Thread-safety: free functions.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/status.h"
#include "quota/queues.h"

namespace estuary {

// `v` (at `path`) as queue specs. `line_of` (may be null) gives the line of a field path, for
// QueueSpec::lines (0 when null).
StatusOr<std::vector<QueueSpec>> DecodeQueues(const nlohmann::json& v, const std::string& path = "queues",
                                              const std::function<int(const std::string&)>& line_of = nullptr);
StatusOr<SharingSpec> DecodeSharing(const nlohmann::json& v, const std::string& path = "sharing");
// The specs as the schema writes them (DecodeQueues reads them back unchanged).
nlohmann::json EncodeQueues(const std::vector<QueueSpec>& queues);
nlohmann::json EncodeSharing(const SharingSpec& sharing);

}  // namespace estuary

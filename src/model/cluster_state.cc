#include "model/cluster_state.h"

#include <algorithm>
#include <tuple>
#include <unordered_set>

#include "common/check.h"

namespace estuary {

StatusOr<NodeId> ClusterState::AddNode(NodeSpec spec) {
  if (spec.cpu_milli < 0 || spec.mem_mib < 0 || spec.gpu_count < 0) {
    return InvalidArgument("node '" + spec.name + "': negative capacity");
  }
  if (spec.gpu_count > kMaxGpusPerNode) {
    return InvalidArgument("node '" + spec.name + "': " + std::to_string(spec.gpu_count) +
                           " GPUs exceed the limit of " + std::to_string(kMaxGpusPerNode));
  }
  if (!node_names_.insert(spec.name).second) return InvalidArgument("duplicate node name '" + spec.name + "'");
  Node n;
  n.id = NodeId(static_cast<uint32_t>(nodes_.size()));
  n.cpu_free = spec.cpu_milli;
  n.mem_free = spec.mem_mib;
  for (int g = 0; g < spec.gpu_count; ++g) n.gpu_free[g] = kMilliPerGpu;
  total_gpu_milli_ += int64_t{spec.gpu_count} * kMilliPerGpu;
  total_cpu_milli_ += spec.cpu_milli;
  n.spec = std::move(spec);
  n.full_free_gpus = 0;
  nodes_.push_back(std::move(n));
  fits_.emplace_back();
  lending_pos_.push_back(kNotLending);
  bucket_pos_.push_back(static_cast<uint32_t>(by_full_free_[0].size()));
  by_full_free_[0].push_back(nodes_.back().id);
  RefreshGpuSummary(nodes_.back());
  SyncFit(nodes_.back());
  ++epoch_;
  Released(&nodes_.back());  // new capacity: a placement that failed may fit now
  return nodes_.back().id;
}

void ClusterState::SetJobBounds(JobId job, int32_t min_replicas, int32_t max_replicas) {
  ESTUARY_CHECK(job.valid() && job.value() < jobs_.size());
  Job& j = jobs_[job.value()];
  ESTUARY_CHECK(1 <= min_replicas && min_replicas <= max_replicas &&
                static_cast<size_t>(max_replicas) <= j.tasks.size());
  j.spec.min_replicas = min_replicas;
  j.spec.max_replicas = max_replicas;
  ++epoch_;
}

void ClusterState::SetJobTopology(JobId job, const TopologyConstraint& topology) {
  ESTUARY_CHECK(job.valid() && job.value() < jobs_.size());
  Job& j = jobs_[job.value()];
  ESTUARY_CHECK(j.bound_tasks == 0);
  ESTUARY_CHECK(!topology.plane.valid() || topology.plane == j.spec.topology.plane);
  j.spec.topology = topology;
  ++epoch_;
}

JobId ClusterState::AddJob(JobSpec spec) {
  ESTUARY_CHECK(spec.queue < 0 || static_cast<size_t>(spec.queue) < queue_usage_.size());
  Job j;
  j.id = JobId(static_cast<uint32_t>(jobs_.size()));
  j.spec = std::move(spec);
  jobs_.push_back(std::move(j));
  return jobs_.back().id;
}

void ClusterState::SetResumeNodes(JobId job, std::vector<NodeId> nodes) {
  ESTUARY_CHECK(job.valid() && job.value() < jobs_.size());
  jobs_[job.value()].resume_nodes = std::move(nodes);
}

void ClusterState::SetJobStart(JobId job, int64_t t) {
  ESTUARY_CHECK(job.valid() && job.value() < jobs_.size());
  jobs_[job.value()].started_at_s = t;
}

TaskId ClusterState::AddTask(JobId job, std::string name, TaskRequest req, int32_t priority, std::string qos) {
  ESTUARY_CHECK(job.valid() && job.value() < jobs_.size());
  ESTUARY_CHECK(req.gpu_milli >= 0 && req.gpu_milli <= kMilliPerGpu);
  Task t;
  t.id = TaskId(static_cast<uint32_t>(tasks_.size()));
  t.job = job;
  t.name = std::move(name);
  t.req = req;
  t.priority = priority;
  t.qos = std::move(qos);
  Job& j = jobs_[job.value()];
  if (!j.tasks.empty() && !(tasks_[j.tasks.front().value()].req == t.req)) j.uniform_request = false;
  j.tasks.push_back(t.id);
  tasks_.push_back(std::move(t));
  return tasks_.back().id;
}

namespace {
bool WhollyFree(int64_t gpu_free_total, int32_t gpu_count) {
  return gpu_count > 0 && gpu_free_total == int64_t{gpu_count} * kMilliPerGpu;
}
}  // namespace

Status ClusterState::AssignDomains(NodeId node, PlaneId plane, std::span<const std::string> names) {
  if (!node.valid() || node.value() >= nodes_.size()) return InvalidArgument("no such node");
  ESTUARY_RETURN_IF_ERROR(topology_.AssignNode(node, plane, names));
  domain_free_.resize(topology_.domains().size());
  const Node& n = nodes_[node.value()];
  for (int l = 0; l < static_cast<int>(topology_.plane(plane).levels.size()); ++l) {
    DomainFree& d = domain_free_[topology_.NodeDomain(node, plane, l).value()];
    d.gpu_milli += int64_t{n.spec.gpu_count} * kMilliPerGpu;
    d.gpu_free_milli += n.gpu_free_total;
    d.nodes += 1;
    d.free_nodes += WhollyFree(n.gpu_free_total, n.spec.gpu_count);
  }
  ++epoch_;
  return Status::Ok();
}

void ClusterState::SyncFit(const Node& n) {
  NodeFit& f = fits_[n.id.value()];
  const int64_t unheld_before = f.schedulable && !f.reserved_for.valid() ? f.gpu_free_total : 0;
  if (f.gpu_free_total != n.gpu_free_total) {
    const int64_t delta = n.gpu_free_total - f.gpu_free_total;
    free_gpu_milli_all_ += delta;
    if (n.spec.model.valid() && n.spec.model.value() < GpuModelSet::kMaxModels) {
      free_gpu_milli_model_[n.spec.model.value()] += delta;
    }
    const int32_t free_delta =
        static_cast<int32_t>(WhollyFree(n.gpu_free_total, n.spec.gpu_count)) - WhollyFree(f.gpu_free_total, n.spec.gpu_count);
    for (DomainId d : topology_.DomainsOf(n.id)) {
      if (!d.valid()) continue;
      domain_free_[d.value()].gpu_free_milli += delta;
      domain_free_[d.value()].free_nodes += free_delta;
    }
  }
  f.gpu_free_total = n.gpu_free_total;
  f.cpu_free = n.cpu_free;
  f.mem_free = n.mem_free;
  f.full_free_gpus = n.full_free_gpus;
  f.max_gpu_free = n.max_gpu_free;
  f.version = n.version;
  f.model = n.spec.model;
  f.schedulable = n.Schedulable();
  f.reserved_for = n.reservation.valid() ? reservations_[n.reservation.value()].owner : JobId();
  const int64_t unheld = (f.schedulable && !f.reserved_for.valid() ? f.gpu_free_total : 0) - unheld_before;
  if (unheld != 0) {
    unheld_free_all_ += unheld;
    if (n.spec.model.valid() && n.spec.model.value() < GpuModelSet::kMaxModels) unheld_free_model_[n.spec.model.value()] += unheld;
  }
  change_ring_[change_seq_ % kChangeRing] = n.id;
  ++change_seq_;
}

void ClusterState::MoveBucket(NodeId id, int from, int to) {
  auto& src = by_full_free_[from];
  const uint32_t pos = bucket_pos_[id.value()];
  src[pos] = src.back();
  bucket_pos_[src[pos].value()] = pos;
  src.pop_back();
  bucket_pos_[id.value()] = static_cast<uint32_t>(by_full_free_[to].size());
  by_full_free_[to].push_back(id);
}

void ClusterState::RefreshGpuSummary(Node& n) {
  const int32_t old_full = n.full_free_gpus;
  n.full_free_gpus = 0;
  n.max_gpu_free = 0;
  n.gpu_free_total = 0;
  for (int g = 0; g < n.spec.gpu_count; ++g) {
    MilliGpu f = n.gpu_free[g];
    n.full_free_gpus += f == kMilliPerGpu;
    n.max_gpu_free = std::max(n.max_gpu_free, f);
    n.gpu_free_total += f;
  }
  if (n.full_free_gpus != old_full) MoveBucket(n.id, old_full, n.full_free_gpus);
}

bool ClusterState::CanBind(TaskId task, NodeId node, const GpuIndices& gpus) const {
  if (!task.valid() || task.value() >= tasks_.size()) return false;
  if (!node.valid() || node.value() >= nodes_.size()) return false;
  const Task& t = tasks_[task.value()];
  const Node& n = nodes_[node.value()];
  if (t.state != TaskState::kPending) return false;
  if (t.req.cpu_milli > n.cpu_free || t.req.mem_mib > n.mem_free) return false;
  const int want = t.req.NeedsGpu() ? t.req.gpu_count : 0;
  if (gpus.size != want) return false;
  if (want > 0 && !t.req.models.Admits(n.spec.model)) return false;
  uint32_t seen = 0;
  for (uint8_t g : gpus) {
    if (g >= n.spec.gpu_count || (seen >> g & 1)) return false;
    seen |= 1u << g;
    if (n.gpu_free[g] < t.req.gpu_milli) return false;
  }
  return true;
}

void ClusterState::Bind(TaskId task, NodeId node, const GpuIndices& gpus) {
  ESTUARY_CHECK(CanBind(task, node, gpus));
  Task& t = tasks_[task.value()];
  Node& n = nodes_[node.value()];
  n.cpu_free -= t.req.cpu_milli;
  n.mem_free -= t.req.mem_mib;
  for (uint8_t g : gpus) n.gpu_free[g] -= t.req.gpu_milli;
  RefreshGpuSummary(n);
  n.tasks.push_back(task);
  ++n.version;
  SyncFit(n);
  t.state = TaskState::kBound;
  t.node = node;
  t.gpus = gpus;
  allocated_gpu_milli_ += int64_t{gpus.size} * t.req.gpu_milli;
  CountPreemptible(t, int64_t{gpus.size} * t.req.gpu_milli, 1);
  CountQueue(t, 1);
  allocated_cpu_milli_ += t.req.cpu_milli;
  ++num_bound_;
  ++jobs_[t.job.value()].bound_tasks;
  ++epoch_;
}

void ClusterState::Released(const Node* n) {
  ++release_seq_;
  if (n != nullptr && n->spec.model.valid() && n->spec.model.value() < GpuModelSet::kMaxModels) {
    ++release_model_[n->spec.model.value()];
  } else {
    ++release_all_;
  }
}

void ClusterState::Release(Task& t) {
  Node& n = nodes_[t.node.value()];
  Released(&n);
  if (t.borrowed) {
    // Its GPUs and CPU go back to the lent pool; only its memory was the node's own.
    CountQueue(t, -1);
    for (uint8_t g : t.gpus) n.lent_free |= 1u << g;
    n.lent_cpu_free += t.req.cpu_milli;
    n.mem_free += t.req.mem_mib;
    auto it = std::find(n.tasks.begin(), n.tasks.end(), t.id);
    ESTUARY_CHECK(it != n.tasks.end());
    n.tasks.erase(it);
    NodeChanged(n);
    --num_bound_;
    --jobs_[t.job.value()].bound_tasks;
    t.borrowed = false;
    t.node = NodeId();
    t.gpus = GpuIndices();
    ++epoch_;
    return;
  }
  if (t.standby) {
    ESTUARY_CHECK(CanExitStandby(t.id));  // its borrowers must be gone first
    Unlend(t, n);
    SyncLending(n);
  }
  CountQueue(t, -1);
  n.cpu_free += t.req.cpu_milli;
  n.mem_free += t.req.mem_mib;
  for (uint8_t g : t.gpus) n.gpu_free[g] += t.req.gpu_milli;
  RefreshGpuSummary(n);
  auto it = std::find(n.tasks.begin(), n.tasks.end(), t.id);
  ESTUARY_CHECK(it != n.tasks.end());
  n.tasks.erase(it);
  ++n.version;
  SyncFit(n);
  allocated_gpu_milli_ -= int64_t{t.gpus.size} * t.req.gpu_milli;
  CountPreemptible(t, int64_t{t.gpus.size} * t.req.gpu_milli, -1);
  allocated_cpu_milli_ -= t.req.cpu_milli;
  --num_bound_;
  --jobs_[t.job.value()].bound_tasks;
  t.node = NodeId();
  t.gpus = GpuIndices();
  ++epoch_;
}

void ClusterState::Unbind(TaskId task) {
  Task& t = tasks_[task.value()];
  ESTUARY_CHECK(t.state == TaskState::kBound);
  Release(t);
  t.state = TaskState::kPending;
}

void ClusterState::Finish(TaskId task) {
  Task& t = tasks_[task.value()];
  if (t.state == TaskState::kBound) Release(t);
  t.state = TaskState::kFinished;
  ++epoch_;
}

namespace {
uint32_t GpuBits(const GpuIndices& gpus) {
  uint32_t bits = 0;
  for (uint8_t g : gpus) bits |= 1u << g;
  return bits;
}
bool WholeGpuRequest(const TaskRequest& r) { return r.gpu_count >= 1 && r.gpu_milli == kMilliPerGpu; }
}  // namespace

void ClusterState::SyncLending(const Node& n) {
  uint32_t& pos = lending_pos_[n.id.value()];
  if (n.lent_free != 0 && pos == kNotLending) {
    pos = static_cast<uint32_t>(lending_.size());
    lending_.push_back(n.id);
  } else if (n.lent_free == 0 && pos != kNotLending) {
    lending_[pos] = lending_.back();
    lending_pos_[lending_[pos].value()] = pos;
    lending_.pop_back();
    pos = kNotLending;
  }
}

void ClusterState::NodeChanged(Node& n) {
  ++n.version;
  SyncFit(n);
  SyncLending(n);
}

void ClusterState::Unlend(Task& t, Node& n) {
  const uint32_t bits = GpuBits(t.gpus);
  n.lent_gpus &= ~bits;
  n.lent_free &= ~bits;
  n.lent_cpu -= t.req.cpu_milli;
  n.lent_cpu_free -= t.req.cpu_milli;
  CountQueue(t, -1);  // as a standby task: its memory
  t.standby = false;
  CountQueue(t, 1);   // as a running one
}

bool ClusterState::CanEnterStandby(TaskId task) const {
  if (!task.valid() || task.value() >= tasks_.size()) return false;
  const Task& t = tasks_[task.value()];
  return t.state == TaskState::kBound && !t.standby && !t.borrowed && WholeGpuRequest(t.req);
}

void ClusterState::EnterStandby(TaskId task) {
  ESTUARY_CHECK(CanEnterStandby(task));
  Task& t = tasks_[task.value()];
  Node& n = nodes_[t.node.value()];
  const uint32_t bits = GpuBits(t.gpus);
  n.lent_gpus |= bits;
  n.lent_free |= bits;
  n.lent_cpu += t.req.cpu_milli;
  n.lent_cpu_free += t.req.cpu_milli;
  CountQueue(t, -1);
  t.standby = true;
  CountQueue(t, 1);  // its memory only now
  NodeChanged(n);
  ++epoch_;
}

bool ClusterState::CanExitStandby(TaskId task) const {
  if (!task.valid() || task.value() >= tasks_.size()) return false;
  const Task& t = tasks_[task.value()];
  if (!t.standby) return false;
  const Node& n = nodes_[t.node.value()];
  const uint32_t bits = GpuBits(t.gpus);
  return (n.lent_free & bits) == bits && n.lent_cpu_free >= t.req.cpu_milli;
}

void ClusterState::ExitStandby(TaskId task) {
  ESTUARY_CHECK(CanExitStandby(task));
  Task& t = tasks_[task.value()];
  Node& n = nodes_[t.node.value()];
  Unlend(t, n);
  NodeChanged(n);
  ++epoch_;
}

bool ClusterState::CanBindBorrowed(TaskId task, NodeId node, const GpuIndices& gpus) const {
  if (!task.valid() || task.value() >= tasks_.size()) return false;
  if (!node.valid() || node.value() >= nodes_.size()) return false;
  const Task& t = tasks_[task.value()];
  const Node& n = nodes_[node.value()];
  if (t.state != TaskState::kPending || !WholeGpuRequest(t.req) || !n.Schedulable()) return false;
  if (t.req.cpu_milli > n.lent_cpu_free || t.req.mem_mib > n.mem_free) return false;
  if (!t.req.models.Admits(n.spec.model)) return false;
  if (gpus.size != t.req.gpu_count) return false;
  uint32_t seen = 0;
  for (uint8_t g : gpus) {
    if (g >= n.spec.gpu_count || (seen >> g & 1) || !(n.lent_free >> g & 1)) return false;
    seen |= 1u << g;
  }
  return true;
}

void ClusterState::BindBorrowed(TaskId task, NodeId node, const GpuIndices& gpus) {
  ESTUARY_CHECK(CanBindBorrowed(task, node, gpus));
  Task& t = tasks_[task.value()];
  Node& n = nodes_[node.value()];
  n.lent_free &= ~GpuBits(gpus);
  n.lent_cpu_free -= t.req.cpu_milli;
  n.mem_free -= t.req.mem_mib;
  n.tasks.push_back(task);
  NodeChanged(n);
  t.state = TaskState::kBound;
  t.node = node;
  t.gpus = gpus;
  t.borrowed = true;
  CountQueue(t, 1);
  ++num_bound_;
  ++jobs_[t.job.value()].bound_tasks;
  ++epoch_;
}

void ClusterState::SetNodeState(NodeId node, NodeState state) {
  Node& n = nodes_[node.value()];
  if (state == NodeState::kReady && n.state != NodeState::kReady) Released(&n);
  n.state = state;
  ++n.version;
  SyncFit(n);
  ++epoch_;
}

ReservationId ClusterState::AddReservation(JobId owner, std::span<const NodeId> nodes) {
  ESTUARY_CHECK(owner.valid() && owner.value() < jobs_.size() && !jobs_[owner.value()].reservation.valid());
  Reservation r;
  r.id = ReservationId(static_cast<uint32_t>(reservations_.size()));
  r.owner = owner;
  r.active = true;
  r.nodes.assign(nodes.begin(), nodes.end());
  reservations_.push_back(std::move(r));
  jobs_[owner.value()].reservation = reservations_.back().id;
  for (NodeId id : nodes) {
    Node& n = nodes_[id.value()];
    ESTUARY_CHECK(!n.reservation.valid());
    n.reservation = reservations_.back().id;
    ++n.version;
    SyncFit(n);
  }
  ++epoch_;
  return reservations_.back().id;
}

void ClusterState::ReleaseReservation(ReservationId id) {
  ESTUARY_CHECK(id.valid() && id.value() < reservations_.size());
  Reservation& r = reservations_[id.value()];
  if (!r.active) return;
  if (r.nodes.empty()) Released(nullptr);
  for (NodeId nid : r.nodes) Released(&nodes_[nid.value()]);
  for (NodeId nid : r.nodes) {
    Node& n = nodes_[nid.value()];
    n.reservation = ReservationId();
    ++n.version;
    SyncFit(n);
  }
  r.nodes.clear();
  r.active = false;
  jobs_[r.owner.value()].reservation = ReservationId();
  ++epoch_;
}

StatusOr<ReservationId> ClusterState::ReserveCapacity(JobId owner, TaskId owner_task, NodeId node,
                                                      const TaskRequest& req, const GpuIndices& gpus,
                                                      int64_t now_s, int64_t ttl_s) {
  if (!owner.valid() || owner.value() >= jobs_.size()) return InvalidArgument("reserve capacity: no such owner job");
  const std::string who = "reserve capacity for job '" + jobs_[owner.value()].spec.name + "'";
  if (owner_task.valid() && (owner_task.value() >= tasks_.size() || tasks_[owner_task.value()].job != owner)) {
    return InvalidArgument(who + ": the owner task is not a task of the owner job");
  }
  if (!node.valid() || node.value() >= nodes_.size()) return InvalidArgument(who + ": no such node");
  if (ttl_s < -1) return InvalidArgument(who + ": negative TTL " + std::to_string(ttl_s));
  if (req.cpu_milli < 0 || req.mem_mib < 0 || req.gpu_count < 0 || req.gpu_milli < 0 || req.gpu_milli > kMilliPerGpu) {
    return InvalidArgument(who + ": request out of range");
  }
  const Node& n = nodes_[node.value()];
  const std::string on = " on node '" + n.spec.name + "'";
  if (!n.Schedulable()) return InvalidArgument(who + on + ": the node is not ready");
  const int want = req.NeedsGpu() ? req.gpu_count : 0;
  if (want > 0 && !req.models.Admits(n.spec.model)) return InvalidArgument(who + on + ": GPU model not admitted");
  if (gpus.size != want) {
    return InvalidArgument(who + on + ": " + std::to_string(gpus.size) + " GPU indices for a request of " +
                           std::to_string(want));
  }
  if (req.cpu_milli > n.cpu_free) {
    return InvalidArgument(who + on + ": not enough CPU (" + std::to_string(req.cpu_milli) + " wanted, " +
                           std::to_string(n.cpu_free) + " free)");
  }
  if (req.mem_mib > n.mem_free) {
    return InvalidArgument(who + on + ": not enough memory (" + std::to_string(req.mem_mib) + " wanted, " +
                           std::to_string(n.mem_free) + " free)");
  }
  uint32_t seen = 0;
  for (uint8_t g : gpus) {
    if (g >= n.spec.gpu_count) return InvalidArgument(who + on + ": GPU index " + std::to_string(g) + " out of range");
    if (seen >> g & 1) return InvalidArgument(who + on + ": GPU index " + std::to_string(g) + " repeated");
    seen |= 1u << g;
    if (n.gpu_free[g] < req.gpu_milli) {
      return InvalidArgument(who + on + ": GPU " + std::to_string(g) + " is busy (" + std::to_string(n.gpu_free[g]) +
                             " milli free, " + std::to_string(req.gpu_milli) + " wanted)");
    }
  }
  Reservation r;
  r.id = ReservationId(static_cast<uint32_t>(reservations_.size()));
  r.kind = Reservation::Kind::kCapacity;
  r.owner = owner;
  r.node = node;
  r.owner_task = owner_task;
  r.req = req;
  r.gpus = gpus;
  r.created_s = now_s;
  r.expires_s = ttl_s < 0 ? -1 : now_s + ttl_s;
  r.state = ReservationState::kAvailable;
  Node& m = nodes_[node.value()];
  m.cpu_free -= req.cpu_milli;
  m.mem_free -= req.mem_mib;
  for (uint8_t g : gpus) m.gpu_free[g] -= req.gpu_milli;
  RefreshGpuSummary(m);
  NodeChanged(m);
  reserved_gpu_milli_ += int64_t{gpus.size} * req.gpu_milli;
  reserved_cpu_milli_ += req.cpu_milli;
  available_capacity_.push_back(r.id);  // ids only grow, so the list stays in id order
  reservations_.push_back(std::move(r));
  ++epoch_;
  return reservations_.back().id;
}

bool ClusterState::CanBindReserved(TaskId task, ReservationId rid) const {
  if (!task.valid() || task.value() >= tasks_.size()) return false;
  if (!rid.valid() || rid.value() >= reservations_.size()) return false;
  const Reservation& r = reservations_[rid.value()];
  const Task& t = tasks_[task.value()];
  if (r.kind != Reservation::Kind::kCapacity || r.state != ReservationState::kAvailable) return false;
  if (t.state != TaskState::kPending || t.job != r.owner) return false;
  if (r.owner_task.valid() && r.owner_task != task) return false;
  if (!(t.req == r.req)) return false;
  // A cordon stops new placements, not capacity already reserved before it: only a down node
  // refuses.
  return nodes_[r.node.value()].state != NodeState::kDown;
}

void ClusterState::BindReserved(TaskId task, ReservationId rid) {
  ESTUARY_CHECK(CanBindReserved(task, rid));
  Reservation& r = reservations_[rid.value()];
  Task& t = tasks_[task.value()];
  Node& n = nodes_[r.node.value()];
  // The node's free amounts already exclude r's capacity; it changes hands only.
  n.tasks.push_back(task);
  NodeChanged(n);
  t.state = TaskState::kBound;
  t.node = r.node;
  t.gpus = r.gpus;
  const int64_t gpu = int64_t{r.gpus.size} * r.req.gpu_milli;
  allocated_gpu_milli_ += gpu;
  CountPreemptible(t, gpu, 1);
  CountQueue(t, 1);
  allocated_cpu_milli_ += r.req.cpu_milli;
  reserved_gpu_milli_ -= gpu;
  reserved_cpu_milli_ -= r.req.cpu_milli;
  ++num_bound_;
  ++jobs_[t.job.value()].bound_tasks;
  r.state = ReservationState::kConsumed;
  r.consumed_by = task;
  available_capacity_.erase(std::find(available_capacity_.begin(), available_capacity_.end(), rid));
  ++epoch_;
}

void ClusterState::ReleaseCapacity(ReservationId rid, bool expired) {
  ESTUARY_CHECK(rid.valid() && rid.value() < reservations_.size());
  Reservation& r = reservations_[rid.value()];
  ESTUARY_CHECK(r.kind == Reservation::Kind::kCapacity);
  if (r.state != ReservationState::kAvailable) return;
  Node& n = nodes_[r.node.value()];
  Released(&n);
  n.cpu_free += r.req.cpu_milli;
  n.mem_free += r.req.mem_mib;
  for (uint8_t g : r.gpus) n.gpu_free[g] += r.req.gpu_milli;
  RefreshGpuSummary(n);
  NodeChanged(n);
  reserved_gpu_milli_ -= int64_t{r.gpus.size} * r.req.gpu_milli;
  reserved_cpu_milli_ -= r.req.cpu_milli;
  r.state = expired ? ReservationState::kExpired : ReservationState::kReleased;
  available_capacity_.erase(std::find(available_capacity_.begin(), available_capacity_.end(), rid));
  ++epoch_;
}

std::vector<ReservationId> ClusterState::ExpireReservations(int64_t now_s) {
  std::vector<ReservationId> due;
  for (ReservationId id : available_capacity_) {
    const Reservation& r = reservations_[id.value()];
    if (r.expires_s >= 0 && r.expires_s <= now_s) due.push_back(id);
  }
  for (ReservationId id : due) ReleaseCapacity(id, /*expired=*/true);
  return due;
}

void ClusterState::CountPreemptible(const Task& t, int64_t gpu_milli, int sign) {
  const Job& j = jobs_[t.job.value()];
  if (!j.spec.preemptible || gpu_milli == 0) return;
  const auto it = preemptible_gpu_milli_.emplace(j.spec.priority, 0).first;
  it->second += sign * gpu_milli;
  if (it->second == 0) preemptible_gpu_milli_.erase(it);
}

void ClusterState::SetQueues(std::vector<int32_t> parent) {
  ESTUARY_CHECK(std::none_of(jobs_.begin(), jobs_.end(), [](const Job& j) { return j.spec.queue >= 0; }));
  queue_parent_ = std::move(parent);
  queue_usage_.assign(queue_parent_.size(), QueueUsage{});
  queue_preemptible_.assign(queue_parent_.size(), QueueUsage{});
  queue_restorable_.assign(queue_parent_.size(), QueueUsage{});
  queue_sizes_.assign(queue_parent_.size(), {});
  queue_jobs_.assign(queue_parent_.size(), {});
  job_counted_.assign(jobs_.size(), 0);
  job_queue_pos_.assign(jobs_.size(), 0);
}

void ClusterState::ReplaceQueues(std::vector<int32_t> parent, const std::vector<int32_t>& remap) {
  ESTUARY_CHECK(remap.size() == queue_parent_.size());
  queue_parent_ = std::move(parent);
  for (Job& j : jobs_) {
    if (j.spec.queue >= 0) j.spec.queue = remap[static_cast<size_t>(j.spec.queue)];
    ESTUARY_CHECK(j.spec.queue < static_cast<int32_t>(queue_parent_.size()));
  }
  queue_usage_.assign(queue_parent_.size(), QueueUsage{});
  queue_preemptible_.assign(queue_parent_.size(), QueueUsage{});
  queue_restorable_.assign(queue_parent_.size(), QueueUsage{});
  queue_sizes_.assign(queue_parent_.size(), {});
  queue_jobs_.assign(queue_parent_.size(), {});
  job_counted_.assign(jobs_.size(), 0);
  job_queue_pos_.assign(jobs_.size(), 0);
  for (const Task& t : tasks_) {
    if (t.state == TaskState::kBound) CountQueue(t, 1);
  }
  ForgetJobLog(true);  // every queue's usage is new: recount them all
  ++epoch_;
  Released(nullptr);  // a job held by its old queue's bounds may fit the new ones
}

namespace {
// Adds (sign 1) or takes back (-1) what bound task `t` on a node of model `m` holds to `u`.
void AddHeld(QueueUsage& u, const Task& t, GpuModelId m, int sign) {
  u[kQueueMemory] += sign * t.req.mem_mib;
  if (t.standby) return;
  const int64_t gpu = int64_t{t.gpus.size} * t.req.gpu_milli;
  u[kQueueGpu] += sign * gpu;
  if (gpu != 0 && m.valid()) u[kQueueModel + m.value()] += sign * gpu;
  u[kQueueCpu] += sign * t.req.cpu_milli;
}
}  // namespace

void ClusterState::AddSize(std::vector<HeldSize>& sizes, const Task& t, GpuModelId m, int sign) {
  const int64_t gpu = int64_t{t.gpus.size} * t.req.gpu_milli;
  if (t.standby || gpu == 0) return;
  const int32_t model = m.valid() ? static_cast<int32_t>(m.value()) : -1;
  auto it = std::find_if(sizes.begin(), sizes.end(), [&](const HeldSize& h) { return h.model == model && h.gpu_milli == gpu; });
  if (it == sizes.end()) it = sizes.insert(sizes.end(), HeldSize{model, gpu, 0});
  it->tasks += sign;
  ESTUARY_CHECK(it->tasks >= 0);
  if (it->tasks == 0) sizes.erase(it);
}

int64_t ClusterState::queue_min_preemptible(size_t q, GpuModelSet models) const {
  int64_t least = INT64_MAX;
  for (const HeldSize& h : queue_sizes_[q]) {
    const bool admitted = models.Any() || (h.model >= 0 && h.model < GpuModelSet::kMaxModels && (models.bits() >> h.model & 1));
    if (admitted) least = std::min(least, h.gpu_milli);
  }
  return least;
}

QueueUsage ClusterState::JobHeld(JobId j) const {
  QueueUsage u{};
  for (TaskId t : jobs_[j.value()].tasks) {
    const Task& task = tasks_[t.value()];
    if (task.state == TaskState::kBound) AddHeld(u, task, nodes_[task.node.value()].spec.model, 1);
  }
  return u;
}

void ClusterState::ForgetJobLog(bool overflowed) {
  for (JobId j : job_log_) job_logged_[j.value()] = 0;
  job_log_.clear();
  job_log_overflowed_ = overflowed;
}

void ClusterState::CountQueue(const Task& t, int sign) {
  const GpuModelId m = nodes_[t.node.value()].spec.model;
  const int32_t own = jobs_[t.job.value()].spec.queue;
  if (job_logged_.size() <= t.job.value()) job_logged_.resize(jobs_.size(), 0);
  if (!job_logged_[t.job.value()]) {
    job_logged_[t.job.value()] = 1;
    job_log_.push_back(t.job);
  }
  if (own >= 0 && jobs_[t.job.value()].spec.preemptible) {
    AddSize(queue_sizes_[static_cast<size_t>(own)], t, m, sign);
    const uint32_t j = t.job.value();
    if (job_counted_.size() <= j) {
      job_counted_.resize(jobs_.size(), 0);
      job_queue_pos_.resize(jobs_.size(), 0);
    }
    std::vector<JobId>& list = queue_jobs_[static_cast<size_t>(own)];
    job_counted_[j] += sign;
    ESTUARY_CHECK(job_counted_[j] >= 0);
    if (sign > 0 && job_counted_[j] == 1) {
      job_queue_pos_[j] = static_cast<uint32_t>(list.size());
      list.push_back(t.job);
    } else if (sign < 0 && job_counted_[j] == 0) {
      const uint32_t pos = job_queue_pos_[j];
      list[pos] = list.back();
      job_queue_pos_[list[pos].value()] = pos;
      list.pop_back();
    }
  }
  for (int32_t q = jobs_[t.job.value()].spec.queue; q >= 0; q = queue_parent_[static_cast<size_t>(q)]) {
    AddHeld(queue_usage_[static_cast<size_t>(q)], t, m, sign);
    if (jobs_[t.job.value()].spec.preemptible) AddHeld(queue_preemptible_[static_cast<size_t>(q)], t, m, sign);
  }
  AddRestorable(queue_restorable_, t, sign);
}

void ClusterState::AddRestorable(std::vector<QueueUsage>& restorable, const Task& t, int sign) const {
  const int32_t own = jobs_[t.job.value()].spec.queue;
  if (own < 0 || (!t.standby && !t.borrowed)) return;
  const Node& n = nodes_[t.node.value()];
  const GpuModelId m = n.spec.model;
  if (t.standby) {
    const int64_t gpu = int64_t{t.gpus.size} * t.req.gpu_milli;
    for (int32_t q = own; q >= 0; q = queue_parent_[static_cast<size_t>(q)]) {
      QueueUsage& r = restorable[static_cast<size_t>(q)];
      r[kQueueGpu] += sign * gpu;
      if (gpu != 0 && m.valid()) r[kQueueModel + m.value()] += sign * gpu;
      r[kQueueCpu] += sign * t.req.cpu_milli;
    }
    return;
  }
  // Borrowed: each of its GPUs is one Standby task's on the node (they stay in Standby while it
  // is bound), so what it takes off is the same when it is counted and when it is taken back.
  for (uint8_t g : t.gpus) {
    int32_t lender = -1;
    for (TaskId id : n.tasks) {
      const Task& l = tasks_[id.value()];
      if (!l.standby) continue;
      for (uint8_t lg : l.gpus) lender = lg == g ? jobs_[l.job.value()].spec.queue : lender;
    }
    for (int32_t q = own; q >= 0 && lender >= 0; q = queue_parent_[static_cast<size_t>(q)]) {
      bool shared = false;
      for (int32_t p = lender; p >= 0 && !shared; p = queue_parent_[static_cast<size_t>(p)]) shared = p == q;
      if (!shared) continue;
      QueueUsage& r = restorable[static_cast<size_t>(q)];
      r[kQueueGpu] -= sign * int64_t{t.req.gpu_milli};
      if (m.valid()) r[kQueueModel + m.value()] -= sign * int64_t{t.req.gpu_milli};
    }
  }
}

int64_t ClusterState::PreemptibleGpuMilliBelow(int32_t priority) const {
  int64_t sum = 0;
  for (auto it = preemptible_gpu_milli_.begin(); it != preemptible_gpu_milli_.end() && it->first < priority; ++it) {
    sum += it->second;
  }
  return sum;
}

// Per node: what bound tasks (not on lent capacity) and available capacity reservations take of
// its CPU, memory and each GPU; what its Standby tasks lend and its borrowers use. Totals over
// the cluster.
struct ClusterState::Recount {
  explicit Recount(size_t nodes)
      : cpu_used(nodes, 0), mem_used(nodes, 0), gpu_used(nodes), standby_gpus(nodes, 0), borrowed_gpus(nodes, 0),
        standby_cpu(nodes, 0), borrowed_cpu(nodes, 0) {}
  std::vector<MilliCpu> cpu_used;
  std::vector<MemMiB> mem_used;
  std::vector<std::array<int32_t, kMaxGpusPerNode>> gpu_used;
  std::vector<uint32_t> standby_gpus, borrowed_gpus;
  std::vector<MilliCpu> standby_cpu, borrowed_cpu;
  int64_t alloc_gpu = 0, alloc_cpu = 0, bound = 0;
  int64_t reserved_gpu = 0, reserved_cpu = 0;
  int64_t total_gpu = 0, total_cpu = 0;
  std::map<int32_t, int64_t> preemptible;  // preemptible_gpu_milli_ recounted
};

namespace {
Status Broken(const std::string& what) { return Internal("invariant broken: " + what); }
}  // namespace

Status ClusterState::CheckInvariants() const {
  Recount c(nodes_.size());
  ESTUARY_RETURN_IF_ERROR(RecountTasks(c));
  ESTUARY_RETURN_IF_ERROR(RecountReservations(c));
  ESTUARY_RETURN_IF_ERROR(CheckNodes(c));
  {
    size_t lending = 0;
    for (const Node& n : nodes_) lending += n.lent_free != 0;
    if (lending != lending_.size()) return Broken("lending index size");
  }
  if (c.total_gpu != total_gpu_milli_ || c.total_cpu != total_cpu_milli_) return Broken("cluster capacity totals");
  ESTUARY_RETURN_IF_ERROR(CheckHolds());
  ESTUARY_RETURN_IF_ERROR(CheckIndexes());
  if (c.alloc_gpu != allocated_gpu_milli_ || c.alloc_cpu != allocated_cpu_milli_ || c.bound != num_bound_) {
    return Broken("cluster allocation totals");
  }
  std::erase_if(c.preemptible, [](const auto& e) { return e.second == 0; });
  if (c.preemptible != preemptible_gpu_milli_) return Broken("preemptible GPUs by priority");
  ESTUARY_RETURN_IF_ERROR(CheckQueueUsage());
  return CheckJobCounts();
}

Status ClusterState::RecountTasks(Recount& c) const {
  for (const Task& t : tasks_) {
    if (t.state != TaskState::kBound) {
      if (t.node.valid() || t.gpus.size != 0) return Broken("unbound task '" + t.name + "' holds resources");
      if (t.standby || t.borrowed) return Broken("unbound task '" + t.name + "' marked standby or borrowed");
      continue;
    }
    if (t.standby && t.borrowed) return Broken("task '" + t.name + "' both standby and borrowed");
    ++c.bound;
    if (!t.node.valid() || t.node.value() >= nodes_.size()) return Broken("task '" + t.name + "' on a missing node");
    const Node& n = nodes_[t.node.value()];
    if (std::count(n.tasks.begin(), n.tasks.end(), t.id) != 1) {
      return Broken("task '" + t.name + "' not listed exactly once on node '" + n.spec.name + "'");
    }
    const int want = t.req.NeedsGpu() ? t.req.gpu_count : 0;
    if (t.gpus.size != want) return Broken("task '" + t.name + "' bound to the wrong number of GPUs");
    uint32_t seen = 0;
    for (uint8_t g : t.gpus) {
      if (g >= n.spec.gpu_count) return Broken("task '" + t.name + "' on GPU index beyond node '" + n.spec.name + "'");
      if (seen >> g & 1) return Broken("task '" + t.name + "' bound twice to one GPU");
      seen |= 1u << g;
    }
    c.mem_used[n.id.value()] += t.req.mem_mib;
    if ((t.standby || t.borrowed) && !WholeGpuRequest(t.req)) {
      return Broken("standby or borrowed task '" + t.name + "' not on whole GPUs");
    }
    if (t.standby) {
      c.standby_gpus[n.id.value()] |= seen;
      c.standby_cpu[n.id.value()] += t.req.cpu_milli;
    }
    if (t.borrowed) {
      // On lent capacity: its GPUs and CPU are its lender's, counted there.
      if (c.borrowed_gpus[n.id.value()] & seen) return Broken("borrowed tasks share a GPU on node '" + n.spec.name + "'");
      c.borrowed_gpus[n.id.value()] |= seen;
      c.borrowed_cpu[n.id.value()] += t.req.cpu_milli;
      continue;
    }
    for (uint8_t g : t.gpus) c.gpu_used[n.id.value()][g] += t.req.gpu_milli;
    c.cpu_used[n.id.value()] += t.req.cpu_milli;
    c.alloc_gpu += int64_t{t.gpus.size} * t.req.gpu_milli;
    c.alloc_cpu += t.req.cpu_milli;
    const Job& j = jobs_[t.job.value()];
    if (j.spec.preemptible && t.gpus.size != 0) c.preemptible[j.spec.priority] += int64_t{t.gpus.size} * t.req.gpu_milli;
  }
  return Status::Ok();
}

// Available capacity reservations take from their node's free amounts like bound tasks.
Status ClusterState::RecountReservations(Recount& c) const {
  std::vector<ReservationId> available;
  for (const Reservation& r : reservations_) {
    if (r.kind != Reservation::Kind::kCapacity) continue;
    const std::string name = "capacity reservation " + std::to_string(r.id.value());
    if (r.active || !r.nodes.empty()) return Broken(name + " marked as a node hold");
    if (!r.owner.valid() || r.owner.value() >= jobs_.size()) return Broken(name + " without an owner job");
    if (r.state == ReservationState::kConsumed) {
      if (!r.consumed_by.valid() || r.consumed_by.value() >= tasks_.size() ||
          tasks_[r.consumed_by.value()].job != r.owner) {
        return Broken(name + " consumed by a task not of its owner");
      }
    } else if (r.consumed_by.valid()) {
      return Broken(name + " records a consumer but is not consumed");
    }
    if (r.state != ReservationState::kAvailable) continue;  // holds nothing
    available.push_back(r.id);
    if (!r.node.valid() || r.node.value() >= nodes_.size()) return Broken(name + " on a missing node");
    const Node& n = nodes_[r.node.value()];
    const int want = r.req.NeedsGpu() ? r.req.gpu_count : 0;
    if (r.gpus.size != want) return Broken(name + " holds the wrong number of GPUs");
    uint32_t seen = 0;
    for (uint8_t g : r.gpus) {
      if (g >= n.spec.gpu_count) return Broken(name + " on GPU index beyond node '" + n.spec.name + "'");
      if (seen >> g & 1) return Broken(name + " holds one GPU twice");
      seen |= 1u << g;
      c.gpu_used[n.id.value()][g] += r.req.gpu_milli;
    }
    c.cpu_used[n.id.value()] += r.req.cpu_milli;
    c.mem_used[n.id.value()] += r.req.mem_mib;
    c.reserved_gpu += int64_t{r.gpus.size} * r.req.gpu_milli;
    c.reserved_cpu += r.req.cpu_milli;
  }
  if (available != available_capacity_) return Broken("list of available capacity reservations");
  if (c.reserved_gpu != reserved_gpu_milli_ || c.reserved_cpu != reserved_cpu_milli_) return Broken("reserved capacity totals");
  return Status::Ok();
}

Status ClusterState::CheckNodes(Recount& c) const {
  for (const Node& n : nodes_) {
    const size_t i = n.id.value();
    c.total_gpu += int64_t{n.spec.gpu_count} * kMilliPerGpu;
    c.total_cpu += n.spec.cpu_milli;
    if (c.cpu_used[i] > n.spec.cpu_milli) return Broken("CPU over-committed on node '" + n.spec.name + "'");
    if (c.mem_used[i] > n.spec.mem_mib) return Broken("memory over-committed on node '" + n.spec.name + "'");
    if (n.cpu_free != n.spec.cpu_milli - c.cpu_used[i]) return Broken("CPU accounting of node '" + n.spec.name + "'");
    if (n.mem_free != n.spec.mem_mib - c.mem_used[i]) return Broken("memory accounting of node '" + n.spec.name + "'");
    int64_t free_total = 0;
    int32_t full = 0;
    MilliGpu maxf = 0;
    for (int g = 0; g < n.spec.gpu_count; ++g) {
      if (c.gpu_used[i][g] > kMilliPerGpu) return Broken("GPU " + std::to_string(g) + " over-committed on node '" + n.spec.name + "'");
      if (n.gpu_free[g] != kMilliPerGpu - c.gpu_used[i][g]) return Broken("GPU accounting of node '" + n.spec.name + "'");
      free_total += n.gpu_free[g];
      full += n.gpu_free[g] == kMilliPerGpu;
      maxf = std::max(maxf, n.gpu_free[g]);
    }
    if (free_total != n.gpu_free_total || full != n.full_free_gpus || maxf != n.max_gpu_free) {
      return Broken("GPU summary of node '" + n.spec.name + "'");
    }
    const NodeFit& fit = fits_[i];
    if (fit.gpu_free_total != n.gpu_free_total || fit.cpu_free != n.cpu_free || fit.mem_free != n.mem_free || fit.full_free_gpus != n.full_free_gpus ||
        fit.max_gpu_free != n.max_gpu_free || fit.version != n.version || fit.model != n.spec.model ||
        fit.schedulable != n.Schedulable() ||
        fit.reserved_for != (n.reservation.valid() ? reservations_[n.reservation.value()].owner : JobId())) {
      return Broken("packed filter view of node '" + n.spec.name + "'");
    }
    for (TaskId id : n.tasks) {
      if (!id.valid() || id.value() >= tasks_.size() || tasks_[id.value()].node != n.id ||
          tasks_[id.value()].state != TaskState::kBound) {
        return Broken("node '" + n.spec.name + "' lists a task that is not bound to it");
      }
    }
    if (n.lent_gpus != c.standby_gpus[i] || n.lent_cpu != c.standby_cpu[i]) {
      return Broken("lent capacity of node '" + n.spec.name + "' differs from its standby tasks'");
    }
    if ((c.borrowed_gpus[i] & ~n.lent_gpus) != 0) return Broken("a borrowed task on an unlent GPU of node '" + n.spec.name + "'");
    if (n.lent_free != (n.lent_gpus & ~c.borrowed_gpus[i])) return Broken("lent-free GPUs of node '" + n.spec.name + "'");
    if (n.lent_cpu_free != n.lent_cpu - c.borrowed_cpu[i] || n.lent_cpu_free < 0) {
      return Broken("lent CPU of node '" + n.spec.name + "'");
    }
    const uint32_t pos = lending_pos_[i];
    if ((n.lent_free != 0) != (pos != kNotLending) ||
        (pos != kNotLending && (pos >= lending_.size() || lending_[pos] != n.id))) {
      return Broken("lending index entry of node '" + n.spec.name + "'");
    }
  }
  return Status::Ok();
}

Status ClusterState::CheckQueueUsage() const {
  std::vector<QueueUsage> queues(queue_usage_.size(), QueueUsage{});  // queue_usage_ recounted
  std::vector<QueueUsage> preemptible(queue_usage_.size(), QueueUsage{});  // queue_preemptible_ recounted
  std::vector<std::vector<HeldSize>> sizes(queue_usage_.size());  // queue_sizes_ recounted
  for (const Task& t : tasks_) {
    if (t.state != TaskState::kBound) continue;
    const JobSpec& js = jobs_[t.job.value()].spec;
    if (js.queue < 0) continue;  // borrowed tasks count too
    if (static_cast<size_t>(js.queue) >= queues.size()) return Internal("invariant broken: job " + js.name + " names an unknown queue");
    if (js.preemptible) AddSize(sizes[static_cast<size_t>(js.queue)], t, nodes_[t.node.value()].spec.model, 1);
    for (int32_t q = js.queue; q >= 0; q = queue_parent_[static_cast<size_t>(q)]) {
      AddHeld(queues[static_cast<size_t>(q)], t, nodes_[t.node.value()].spec.model, 1);
      if (js.preemptible) AddHeld(preemptible[static_cast<size_t>(q)], t, nodes_[t.node.value()].spec.model, 1);
    }
  }
  std::vector<QueueUsage> restorable(queue_usage_.size(), QueueUsage{});  // queue_restorable_ recounted
  for (const Task& t : tasks_) {
    if (t.state == TaskState::kBound) AddRestorable(restorable, t, 1);
  }
  std::vector<std::vector<JobId>> running(queue_usage_.size());  // queue_jobs_ recounted, in id order
  for (const Job& j : jobs_) {
    if (j.spec.queue >= 0 && j.spec.preemptible && j.bound_tasks > 0) running[static_cast<size_t>(j.spec.queue)].push_back(j.id);
  }
  for (size_t q = 0; q < queues.size(); ++q) {
    if (queues[q] != queue_usage_[q]) return Internal("invariant broken: the usage of queue " + std::to_string(q));
    if (restorable[q] != queue_restorable_[q]) return Internal("invariant broken: the restorable usage of queue " + std::to_string(q));
    if (preemptible[q] != queue_preemptible_[q]) {
      return Internal("invariant broken: the preemptible usage of queue " + std::to_string(q));
    }
    auto key = [](const HeldSize& h) { return std::tuple(h.model, h.gpu_milli, h.tasks); };
    auto by_key = [&](const HeldSize& a, const HeldSize& b) { return key(a) < key(b); };
    std::vector<HeldSize> have = queue_sizes_[q];
    std::sort(have.begin(), have.end(), by_key);
    std::sort(sizes[q].begin(), sizes[q].end(), by_key);
    if (!std::equal(have.begin(), have.end(), sizes[q].begin(), sizes[q].end(),
                    [&](const HeldSize& a, const HeldSize& b) { return key(a) == key(b); })) {
      return Internal("invariant broken: the preemptible task sizes of queue " + std::to_string(q));
    }
    std::vector<JobId> listed = queue_jobs_[q];
    std::sort(listed.begin(), listed.end());
    if (listed != running[q]) return Internal("invariant broken: the preemptible jobs listed for queue " + std::to_string(q));
    // Each listed job knows its place in the list (CountQueue takes it out by it).
    for (size_t pos = 0; pos < queue_jobs_[q].size(); ++pos) {
      const uint32_t j = queue_jobs_[q][pos].value();
      if (j >= job_queue_pos_.size() || job_queue_pos_[j] != pos) {
        return Internal("invariant broken: job " + std::to_string(j) + "'s place in the preemptible jobs of queue " +
                        std::to_string(q));
      }
    }
  }
  return Status::Ok();
}

Status ClusterState::CheckHolds() const {
  auto fail = [](const std::string& what) { return Internal("invariant broken: " + what); };
  size_t held = 0;
  for (const Reservation& r : reservations_) {
    if (r.kind != Reservation::Kind::kNodeHold) continue;  // checked above
    if (!r.active) {
      if (!r.nodes.empty()) return fail("released reservation " + std::to_string(r.id.value()) + " lists nodes");
      continue;
    }
    if (jobs_[r.owner.value()].reservation != r.id) {
      return fail("job '" + jobs_[r.owner.value()].spec.name + "' does not record its reservation");
    }
    for (NodeId id : r.nodes) {
      if (nodes_[id.value()].reservation != r.id) {
        return fail("node '" + nodes_[id.value()].spec.name + "' is not held by the reservation listing it");
      }
    }
    held += r.nodes.size();
  }
  size_t marked = 0;
  for (const Node& n : nodes_) marked += n.reservation.valid();
  if (held != marked) return fail("nodes marked as held differ from the nodes reservations list");
  for (const Job& j : jobs_) {
    if (j.reservation.valid() && (!reservations_[j.reservation.value()].active ||
                                  reservations_[j.reservation.value()].owner != j.id)) {
      return fail("job '" + j.spec.name + "' records a reservation it does not own");
    }
  }
  return Status::Ok();
}

Status ClusterState::CheckIndexes() const {
  auto fail = [](const std::string& what) { return Internal("invariant broken: " + what); };
  size_t indexed = 0;
  for (int k = 0; k <= kMaxGpusPerNode; ++k) {
    for (size_t p = 0; p < by_full_free_[k].size(); ++p) {
      NodeId id = by_full_free_[k][p];
      if (nodes_[id.value()].full_free_gpus != k || bucket_pos_[id.value()] != p) {
        return fail("free-GPU index entry of node '" + nodes_[id.value()].spec.name + "'");
      }
    }
    indexed += by_full_free_[k].size();
  }
  if (indexed != nodes_.size()) return fail("free-GPU index size");
  std::vector<DomainFree> sums(topology_.domains().size());
  for (const Domain& d : topology_.domains()) {
    for (NodeId id : d.nodes) {
      const Node& n = nodes_[id.value()];
      DomainFree& s = sums[d.id.value()];
      s.gpu_milli += int64_t{n.spec.gpu_count} * kMilliPerGpu;
      s.gpu_free_milli += n.gpu_free_total;
      s.nodes += 1;
      s.free_nodes += WhollyFree(n.gpu_free_total, n.spec.gpu_count);
    }
  }
  int64_t free_all = 0;
  std::array<int64_t, GpuModelSet::kMaxModels> free_model{};
  for (const Node& n : nodes_) {
    free_all += n.gpu_free_total;
    if (n.spec.model.valid() && n.spec.model.value() < GpuModelSet::kMaxModels) free_model[n.spec.model.value()] += n.gpu_free_total;
  }
  if (free_all != free_gpu_milli_all_ || free_model != free_gpu_milli_model_) return fail("free GPUs per model");
  int64_t unheld_all = 0;
  std::array<int64_t, GpuModelSet::kMaxModels> unheld_model{};
  for (const Node& n : nodes_) {
    if (!n.Schedulable() || n.reservation.valid()) continue;
    unheld_all += n.gpu_free_total;
    if (n.spec.model.valid() && n.spec.model.value() < GpuModelSet::kMaxModels) unheld_model[n.spec.model.value()] += n.gpu_free_total;
  }
  if (unheld_all != unheld_free_all_ || unheld_model != unheld_free_model_) return fail("free GPUs on unheld nodes per model");
  if (domain_free_.size() != sums.size()) return fail("domain aggregate table size");
  for (size_t i = 0; i < sums.size(); ++i) {
    const DomainFree& a = domain_free_[i];
    const DomainFree& b = sums[i];
    if (a.gpu_milli != b.gpu_milli || a.gpu_free_milli != b.gpu_free_milli || a.nodes != b.nodes ||
        a.free_nodes != b.free_nodes) {
      return fail("free-capacity aggregate of domain '" + topology_.domains()[i].name + "'");
    }
  }
  return Status::Ok();
}

Status ClusterState::CheckJobCounts() const {
  auto fail = [](const std::string& what) { return Internal("invariant broken: " + what); };
  for (const Job& j : jobs_) {
    int32_t b = 0;
    bool uniform = true;
    for (TaskId t : j.tasks) {
      b += tasks_[t.value()].state == TaskState::kBound;
      uniform &= tasks_[t.value()].req == tasks_[j.tasks.front().value()].req;
    }
    if (b != j.bound_tasks) return fail("job '" + j.spec.name + "': bound task count");
    if (uniform != j.uniform_request) return fail("job '" + j.spec.name + "': uniform request flag");
  }
  return Status::Ok();
}

}  // namespace estuary

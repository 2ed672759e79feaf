// The exact defragmentation MILP (see defrag_milp.h for the problem and the formulation).
// Steps: (1) validate the input; (2) classify the tasks on the nodes of N into movable and fixed
// and compute each node's capacity left for movable tasks; (3) enumerate the destinations of every
// movable task and build the rows; (4) stage 1: maximise the whole free nodes; (5) stage 2: fix that
// optimum and minimise the moves; (6) read the assignment back and recount from it.
#include "sched/exact/defrag_milp.h"

#include <Cbc_C_Interface.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <functional>
#include <string>
#include <unordered_map>

namespace estuary {
namespace {

// One node of N as the model sees it once its movable tasks have left.
struct NodeInfo {
  NodeId id;
  MilliCpu cpu_avail = 0;  // cpu_free + CPU of its movable tasks
  MemMiB mem_avail = 0;    // mem_free + memory of its movable tasks
  int32_t gpu_avail = 0;   // whole free GPUs + GPUs of its movable tasks
  bool has_gpus = false;
  bool can_be_free = false;  // has GPUs and no fixed task holds any of them: e[n] exists
  int e_col = -1;
};

struct MovableTask {
  TaskId id;
  int cur = -1;                      // index into the NodeInfo vector
  std::vector<std::pair<int, int>> dests;  // (node index, column)
};

// A sparse row: sum coef * col {<=, =, >=} rhs.
struct Row {
  std::vector<int> cols;
  std::vector<double> coefs;
  double lo = 0, hi = 0;
};

// True when a node of N takes tasks of `job` as a destination.
bool Receives(const ClusterState& s, const Node& n, JobId job) {
  if (!n.Schedulable()) return false;
  if (!n.reservation.valid()) return true;
  const Reservation& r = s.reservation(n.reservation);
  return !r.active || r.owner == job;
}

// The best solution of one stage (empty when CBC found none) and whether it is proven optimal.
struct StageOutcome {
  std::vector<double> x;
  bool optimal = false;
};

// Solves the binary program over `ncols` columns and `rows` minimising `obj`, starting from the
// feasible full column vector `start`, within `seconds` of wall time.
StageOutcome SolveStage(int ncols, const std::vector<Row>& rows, const std::vector<double>& obj,
                        const std::vector<double>& start, double seconds) {
  // Column-major copy of the rows.
  std::vector<std::vector<std::pair<int, double>>> by_col(ncols);
  for (size_t r = 0; r < rows.size(); ++r) {
    for (size_t k = 0; k < rows[r].cols.size(); ++k) by_col[rows[r].cols[k]].push_back({static_cast<int>(r), rows[r].coefs[k]});
  }
  std::vector<CoinBigIndex> colstart(ncols + 1, 0);
  std::vector<int> index;
  std::vector<double> value;
  for (int c = 0; c < ncols; ++c) {
    for (auto [r, v] : by_col[c]) {
      index.push_back(r);
      value.push_back(v);
    }
    colstart[c + 1] = static_cast<CoinBigIndex>(index.size());
  }
  std::vector<double> collb(ncols, 0.0), colub(ncols, 1.0), rowlb, rowub;
  for (const Row& r : rows) {
    rowlb.push_back(r.lo);
    rowub.push_back(r.hi);
  }
  Cbc_Model* m = Cbc_newModel();
  Cbc_loadProblem(m, ncols, static_cast<int>(rows.size()), colstart.data(), index.data(), value.data(),
                  collb.data(), colub.data(), obj.data(), rowlb.data(), rowub.data());
  for (int c = 0; c < ncols; ++c) Cbc_setInteger(m, c);
  Cbc_setObjSense(m, 1.0);
  std::vector<int> idx(ncols);
  for (int c = 0; c < ncols; ++c) idx[c] = c;
  Cbc_setMIPStartI(m, ncols, idx.data(), start.data());
  Cbc_setLogLevel(m, 0);
  Cbc_setParameter(m, "log", "0");
  Cbc_setParameter(m, "timeMode", "elapsed");
  Cbc_setParameter(m, "threads", "0");
  // CBC 2.10's preprocessing (CglPreProcess) crashes in postProcess when the time limit stops a
  // solve at some points (SIGSEGV, most runs of ExactDefrag.ATimeLimitStillYieldsAValidAssignment
  // on some machines): off. The models are small and start from a feasible assignment.
  Cbc_setParameter(m, "preprocess", "off");
  const std::string sec = std::to_string(std::max(seconds, 0.01));
  Cbc_setParameter(m, "sec", sec.c_str());
  Cbc_setMaximumSeconds(m, std::max(seconds, 0.01));
  Cbc_solve(m);
  StageOutcome out;
  out.optimal = Cbc_isProvenOptimal(m) != 0;
  if (const double* sol = Cbc_bestSolution(m); sol != nullptr) out.x.assign(sol, sol + ncols);
  Cbc_deleteModel(m);
  return out;
}

// Whether `x` (rounded) satisfies every row: CBC may return nothing usable after a time-out.
bool Satisfies(const std::vector<Row>& rows, const std::vector<double>& x) {
  for (const Row& r : rows) {
    double a = 0;
    for (size_t k = 0; k < r.cols.size(); ++k) a += r.coefs[k] * std::round(x[r.cols[k]]);
    if (a < r.lo - 1e-6 || a > r.hi + 1e-6) return false;
  }
  return true;
}

// The binary program of one instance: the nodes of N and their movable tasks, the columns
// (x[t][n] per destination of each movable task, then e[n] per node that can become whole free),
// a feasible start (nobody moves) and the rows.
struct Model {
  std::vector<NodeInfo> info;
  std::vector<MovableTask> movable;  // by task id
  int ncols = 0;
  std::vector<double> start;
  std::vector<Row> rows;
  int whole_free_before = 0;
};

// (1) The nodes must be known, distinct and at most 64; the time limit positive.
Status CheckInput(const ClusterState& state, std::span<const NodeId> nodes, const ExactDefragOptions& options) {
  if (nodes.size() > 64) {
    return InvalidArgument("exact defrag: " + std::to_string(nodes.size()) +
                           " nodes; the exact model is meant for small instances (at most 64 nodes)");
  }
  if (!(options.time_limit_s > 0)) return InvalidArgument("exact defrag: time_limit_s must be > 0");
  std::unordered_map<uint32_t, int> index_of;
  for (NodeId n : nodes) {
    if (!n.valid() || n.value() >= state.num_nodes()) {
      return InvalidArgument("exact defrag: unknown node id " + std::to_string(n.value()));
    }
    if (!index_of.emplace(n.value(), static_cast<int>(index_of.size())).second) {
      return InvalidArgument("exact defrag: duplicate node " + state.node(n).spec.name);
    }
  }
  return Status::Ok();
}

// (2) Each node's capacity once its movable tasks have left, and those tasks (not locked, not in
// Standby or borrowed, whole GPUs, on a node that would take them back).
void FindMovable(const ClusterState& state, std::span<const NodeId> nodes, std::span<const char> locked, Model& mo) {
  mo.info.resize(nodes.size());
  for (size_t i = 0; i < nodes.size(); ++i) {
    const Node& n = state.node(nodes[i]);
    NodeInfo& ni = mo.info[i];
    ni.id = n.id;
    ni.cpu_avail = n.cpu_free;
    ni.mem_avail = n.mem_free;
    ni.gpu_avail = n.full_free_gpus;
    ni.has_gpus = n.spec.gpu_count > 0;
    if (ni.has_gpus && n.full_free_gpus == n.spec.gpu_count) ++mo.whole_free_before;
    for (TaskId tid : n.tasks) {
      const Task& t = state.task(tid);
      const bool is_locked = tid.value() < locked.size() && locked[tid.value()] != 0;
      const bool whole = t.req.gpu_count == 0 || t.req.gpu_milli == kMilliPerGpu;
      const bool stays_on_node = !n.Schedulable() || !Receives(state, n, t.job);
      if (is_locked || t.standby || t.borrowed || !whole || stays_on_node) continue;
      ni.cpu_avail += t.req.cpu_milli;
      ni.mem_avail += t.req.mem_mib;
      ni.gpu_avail += t.req.gpu_count;
      MovableTask m;
      m.id = tid;
      m.cur = static_cast<int>(i);
      mo.movable.push_back(std::move(m));
    }
    ni.can_be_free = ni.has_gpus && ni.gpu_avail == n.spec.gpu_count;
  }
  std::sort(mo.movable.begin(), mo.movable.end(), [](const MovableTask& a, const MovableTask& b) { return a.id < b.id; });
}

// (3) The columns: a task's destinations are its node and every node of N that takes its job,
// admits its GPU model, has room for it alone and (a task confined to a domain) lies in its
// domain; then e[n]. The start: nobody moves, and a node already whole free counts.
void AddColumns(const ClusterState& state, Model& mo) {
  for (MovableTask& m : mo.movable) {
    const Task& t = state.task(m.id);
    const Node& cur = state.node(mo.info[m.cur].id);
    const JobSpec& js = state.job(t.job).spec;
    const bool confined = js.topology.plane.valid() && js.topology.required_level >= 0;
    DomainId dom;
    if (confined) dom = state.topology().NodeDomain(cur.id, js.topology.plane, js.topology.required_level);
    for (size_t i = 0; i < mo.info.size(); ++i) {
      const bool is_cur = static_cast<int>(i) == m.cur;
      if (!is_cur) {
        const NodeInfo& ni = mo.info[i];
        const Node& n = state.node(ni.id);
        if (!Receives(state, n, t.job)) continue;
        if (t.req.gpu_count > 0 && (!ni.has_gpus || !t.req.models.Admits(n.spec.model))) continue;
        if (t.req.cpu_milli > ni.cpu_avail || t.req.mem_mib > ni.mem_avail || t.req.gpu_count > ni.gpu_avail) continue;
        if (confined) {
          if (!dom.valid() || state.topology().NodeDomain(n.id, js.topology.plane, js.topology.required_level) != dom) {
            continue;
          }
        }
      }
      m.dests.push_back({static_cast<int>(i), mo.ncols++});
      mo.start.push_back(is_cur ? 1.0 : 0.0);
    }
  }
  std::vector<char> has_gpu_task(mo.info.size(), 0);
  for (const MovableTask& m : mo.movable) {
    if (state.task(m.id).req.gpu_count > 0) has_gpu_task[m.cur] = 1;
  }
  for (size_t i = 0; i < mo.info.size(); ++i) {
    NodeInfo& ni = mo.info[i];
    if (!ni.can_be_free) continue;
    ni.e_col = mo.ncols++;
    mo.start.push_back(has_gpu_task[i] ? 0.0 : 1.0);
  }
}

// (3) The rows: each movable task on exactly one destination; per node, CPU, memory and GPUs
// within its capacity (only rows that could bind); e[n] = 1 only with no GPU task on n.
void AddRows(const ClusterState& state, Model& mo) {
  std::vector<Row>& rows = mo.rows;
  for (const MovableTask& m : mo.movable) {
    Row r;
    for (auto [i, c] : m.dests) {
      r.cols.push_back(c);
      r.coefs.push_back(1.0);
    }
    r.lo = r.hi = 1.0;
    rows.push_back(std::move(r));
  }
  const std::vector<NodeInfo>& info = mo.info;
  std::vector<Row> cpu(info.size()), mem(info.size()), gpu(info.size());
  std::vector<Row> excl;
  for (const MovableTask& m : mo.movable) {
    const TaskRequest& q = state.task(m.id).req;
    for (auto [i, c] : m.dests) {
      if (q.cpu_milli > 0) { cpu[i].cols.push_back(c); cpu[i].coefs.push_back(static_cast<double>(q.cpu_milli)); }
      if (q.mem_mib > 0) { mem[i].cols.push_back(c); mem[i].coefs.push_back(static_cast<double>(q.mem_mib)); }
      if (q.gpu_count > 0) {
        gpu[i].cols.push_back(c);
        gpu[i].coefs.push_back(q.gpu_count);
        if (info[i].e_col >= 0) excl.push_back(Row{{c, info[i].e_col}, {1.0, 1.0}, -1e30, 1.0});
      }
    }
  }
  auto sum = [](const Row& r) { double s = 0; for (double v : r.coefs) s += v; return s; };
  for (size_t i = 0; i < info.size(); ++i) {
    // Capacity rows that could bind (rows whose left side cannot exceed the capacity are dropped).
    cpu[i].lo = mem[i].lo = gpu[i].lo = -1e30;
    cpu[i].hi = static_cast<double>(info[i].cpu_avail);
    mem[i].hi = static_cast<double>(info[i].mem_avail);
    gpu[i].hi = info[i].gpu_avail;
    if (sum(cpu[i]) > cpu[i].hi) rows.push_back(std::move(cpu[i]));
    if (sum(mem[i]) > mem[i].hi) rows.push_back(std::move(mem[i]));
    if (info[i].e_col >= 0 && !gpu[i].cols.empty()) {
      gpu[i].cols.push_back(info[i].e_col);
      gpu[i].coefs.push_back(info[i].gpu_avail);
      rows.push_back(std::move(gpu[i]));
    } else if (sum(gpu[i]) > gpu[i].hi) {
      rows.push_back(std::move(gpu[i]));
    }
  }
  for (Row& r : excl) rows.push_back(std::move(r));
}

// (4), (5) The two stages within `seconds` (`elapsed`: the seconds used so far): the best
// solution found (the start when none) and whether both stages proved it optimal. Stage 1
// maximises the whole free nodes; stage 2 keeps that many and maximises the tasks that stay.
std::pair<std::vector<double>, bool> SolveStages(Model& mo, double seconds, const std::function<double()>& elapsed) {
  std::vector<double> best = mo.start;
  if (mo.ncols == 0) return {best, true};
  std::vector<double> obj1(mo.ncols, 0.0);
  for (const NodeInfo& ni : mo.info) {
    if (ni.e_col >= 0) obj1[ni.e_col] = -1.0;
  }
  StageOutcome s1 = SolveStage(mo.ncols, mo.rows, obj1, mo.start, seconds - elapsed());
  if (!s1.x.empty() && Satisfies(mo.rows, s1.x)) best = s1.x;
  bool optimal = s1.optimal;
  double z = 0;
  for (const NodeInfo& ni : mo.info) {
    if (ni.e_col >= 0) z += std::round(best[ni.e_col]);
  }
  const double left = seconds - elapsed();
  if (left <= 0) return {best, false};
  Row keep;
  for (const NodeInfo& ni : mo.info) {
    if (ni.e_col < 0) continue;
    keep.cols.push_back(ni.e_col);
    keep.coefs.push_back(1.0);
  }
  keep.lo = z;
  keep.hi = 1e30;
  mo.rows.push_back(std::move(keep));
  std::vector<double> obj2(mo.ncols, 0.0);
  for (const MovableTask& m : mo.movable) {
    for (auto [i, c] : m.dests) {
      if (i == m.cur) obj2[c] = -1.0;
    }
  }
  StageOutcome s2 = SolveStage(mo.ncols, mo.rows, obj2, best, left);
  if (!s2.x.empty() && Satisfies(mo.rows, s2.x)) best = s2.x;
  return {best, optimal && s2.optimal};
}

// (6) Each movable task's destination in `x`, the moves and the whole free nodes recounted.
void ReadBack(const ClusterState& state, const Model& mo, const std::vector<double>& x, ExactDefragResult& res) {
  std::vector<int32_t> gpu_tasks_on(mo.info.size(), 0);
  for (const MovableTask& m : mo.movable) {
    int dest = m.cur;
    for (auto [i, c] : m.dests) {
      if (x[c] > 0.5) dest = i;
    }
    res.assignment.push_back({m.id, mo.info[dest].id});
    if (dest != m.cur) ++res.moved_tasks;
    if (state.task(m.id).req.gpu_count > 0) ++gpu_tasks_on[dest];
  }
  for (size_t i = 0; i < mo.info.size(); ++i) {
    if (mo.info[i].can_be_free && gpu_tasks_on[i] == 0) ++res.whole_free_after;
  }
}

}  // namespace

StatusOr<ExactDefragResult> SolveExactDefrag(const ClusterState& state, std::span<const NodeId> nodes,
                                             std::span<const char> locked, const ExactDefragOptions& options) {
  const auto t0 = std::chrono::steady_clock::now();
  const Status input = CheckInput(state, nodes, options);
  if (!input.ok()) return input;
  Model mo;
  FindMovable(state, nodes, locked, mo);
  AddColumns(state, mo);
  AddRows(state, mo);
  ExactDefragResult res;
  res.whole_free_before = mo.whole_free_before;
  res.variables = mo.ncols;
  res.constraints = static_cast<int64_t>(mo.rows.size());
  const auto elapsed = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(); };
  const auto [best, optimal] = SolveStages(mo, options.time_limit_s, elapsed);
  ReadBack(state, mo, best, res);
  res.optimal = optimal;
  res.solve_seconds = elapsed();
  return res;
}

}  // namespace estuary

// The history's text form (engine/history.h): every kind of record survives a round trip, an
// engine's recorded inputs replay to its decisions, a changed input is found, and a bad history
// file is refused naming the file, the line and the field.
#include "engine/history.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "tests/testing/bad_input.h"
#include "tests/testing/engine_fixtures.h"

namespace estuary {
namespace {

using testing::WholeGpuJob;

std::vector<HistoryRecord> OneOfEachKind() {
  EngineConfig config;
  config.policy = "fgd";
  config.reserve.enabled = true;
  config.headroom.push_back({WholeGpuJob(7, 2, 8, 900), 16});
  config.actions = {EngineAction::kAllocate, EngineAction::kAbsorb};
  config.backfill = {true, 45, true, 7};  // conservative, 7 jobs a round
  config.allocate.victims = VictimSelection::kVolcano;
  config.preemptor_min_priority = 0;
  EngineJob job = WholeGpuJob(3, 2, 4, 800, true);
  job.models = {"H800"};
  job.plane = "data";
  job.required_level = "asw";
  job.locked = {1, 0};
  AddNodeInput node;
  node.spec.name = "n9";
  node.spec.cpu_milli = 64000;
  node.spec.mem_mib = 1 << 20;
  node.spec.gpu_count = 8;
  node.spec.labels = {{"zone", "a"}};
  node.gpu_model = "H800";
  node.domains = {{"data", {"asw1"}}};
  DefragOptions defrag;
  defrag.evacuate = {NodeId(2)};
  defrag.objective = DefragOptions::Objective::kPlaceableShape;
  defrag.shape.gpu_count = 8;
  defrag.shape.gpu_milli = 1000;
  ReplicaPlacement p;
  p.replica = 1;
  p.node = NodeId(4);
  p.gpus.Push(0);
  p.gpus.Push(5);
  p.borrowed = true;
  EngineEvent ev;
  ev.kind = EngineEvent::Kind::kReturned;
  ev.t = 50;
  ev.job = 3;
  ev.for_job = 9;
  ev.detail = "reclaimed, \"quoted\"";
  ev.requeued = true;
  QueueSpec team;
  team.name = "team-a";
  team.guarantee.model_milli = {{"H800", 16000}};
  team.weight = 3;
  team.tenants = {"alice"};
  SharingSpec sharing;
  sharing.cooldown_s = 120;
  EngineCarry carry;
  CarriedJob waiting;
  waiting.job = 3;
  waiting.submitted = 2;
  waiting.no_borrow_until = 400;
  waiting.resume_nodes = {NodeId(1), NodeId(0)};
  waiting.queued_at = 9;
  waiting.position = -2;
  waiting.required_level = 0;
  waiting.relax_at = 609;
  waiting.trigger_at = 909;
  waiting.reclaim_at = 70;
  waiting.reclaim_queue = true;
  waiting.claimed = 2;
  waiting.within_claim = 3;
  waiting.within_claim_until = 4321;
  waiting.reclaim_tasks = {{5, 0}, {5, 1}, {6, 3}};
  waiting.reclaim_whole = {6};
  waiting.hold = {NodeId(2)};
  CarriedJob running;
  running.job = 4;
  running.started_s = 7;
  running.no_grow_until = 300;
  running.restores = {{1, 75, {{8, 0}, {8, 2}}}};
  CarriedJob planned;  // holding nodes for backfill's plan
  planned.job = 5;
  planned.queued_at = 20;
  planned.held = {NodeId(3), NodeId(1)};
  planned.planned_start = 1000;
  planned.planned_where = "asw1";
  planned.planned_nodes = {NodeId(3), NodeId(1), NodeId(0)};
  planned.planned_holds = false;  // the `reserve` action's hold replaced the plan's
  planned.unplanned = 6;
  planned.assembled = true;  // its hold is the one an assembly made
  carry.jobs = {waiting, running, planned};
  carry.queues = {{"team-a", 135, 1.0 / 3.0, 16000}};
  carry.usage_at = 14;
  carry.schedule = CarriedSchedule{3600, 120, 300, 44, 6};
  std::vector<HistoryRecord> r = {{HistorySegment{config}}};
  const std::vector<EngineInput> inputs = {
      {1, SubmitInput{job, SubmitMode::kStartOrReclaim}},
      {2, CancelInput{3, true}},
      {3, ResizeInput{3, 1, 4}},
      {4, ProbeInput{job, false}},
      {4, ProbeInput{job, false, true}},
      {5, AddPlaneInput{"data", {"asw", "node"}}},
      {6, node},
      {7, NodeInput{NodeInput::Op::kEvacuate, NodeId(1)}},
      {8, StandbyInput{3, 1}},
      {9, StandbyWindowsInput{3, {{10, 20, 1}, {30, 40, 2}}}},
      {10, DefragInput{defrag}},
      {11, AbortMovesInput{}},
      {12, AcknowledgeMoveInput{TaskId(6), true}},
      {13, HoldInput{3, false}},
      {14, AdoptInput{job, {p}, 12}},
      {15, SettingInput{SettingInput::Key::kStandbyGrace, 30}},
      {15, AcknowledgeStandbyInput{TaskId(4), false, "standby_enter hook: exit code 4"}},
      {15, QueuesInput{{team}, sharing}},
  };
  for (const EngineInput& in : inputs) r.push_back({in});
  EXPECT_EQ(HistoryRecordJson(r[r.size() - 1])["input"]["queues"][0]["tenants"], nlohmann::json::array({"alice"}));
  r.push_back({EngineInput{15, RestoreInput{carry}}});
  r.push_back({ev});
  r.push_back({HistoryInherit{}});
  r.push_back({HistoryInherit{true}});
  r.push_back({EngineInput{16, CycleInput{{CyclePart::kGrow, 800}}}, 3});
  return r;
}

TEST(HistoryText, EveryKindOfRecordSurvivesARoundTrip) {
  for (const HistoryRecord& r : OneOfEachKind()) {
    const nlohmann::json j = HistoryRecordJson(r);
    auto back = HistoryRecordFromJson(j);
    ASSERT_TRUE(back.ok()) << back.status().message() << " in " << j.dump();
    EXPECT_EQ(HistoryRecordJson(*back), j);
    EXPECT_EQ(back->repeat, r.repeat);
  }
  // Spot checks on what the text says (not only that it reads back).
  const std::vector<HistoryRecord> all = OneOfEachKind();
  EXPECT_EQ(HistoryRecordJson(all[1])["input"]["mode"], "start-or-reclaim");
  EXPECT_EQ(HistoryRecordJson(all[8])["input"]["op"], "evacuate");
  EXPECT_EQ(HistoryRecordJson(all.back())["n"], 3);
  // A probe that only makes the job known says so (Engine::Know); the others do not.
  EXPECT_EQ(HistoryRecordJson(all[4])["input"].value("know", false), false);
  EXPECT_EQ(HistoryRecordJson(all[5])["input"]["know"], true);
  // An inherit record says "jobs" only when the jobs are inherited (older histories lack it).
  EXPECT_EQ(HistoryRecordJson(all[all.size() - 3]), nlohmann::json({{"inherit", true}}));
  EXPECT_EQ(HistoryRecordJson(all[all.size() - 2]), nlohmann::json({{"inherit", true}, {"jobs", true}}));
  // What a reopened service restores: every field, the decayed usage to the last bit.
  const nlohmann::json restore = HistoryRecordJson(all[all.size() - 5])["input"];
  EXPECT_EQ(restore["kind"], "restore");
  EXPECT_EQ(restore["jobs"][0]["resume_nodes"], nlohmann::json::array({1, 0}));
  EXPECT_EQ(restore["jobs"][0]["position"], -2);
  EXPECT_EQ(restore["jobs"][1]["started_s"], 7);
  auto restored = HistoryRecordFromJson(HistoryRecordJson(all[all.size() - 5]));
  ASSERT_TRUE(restored.ok());
  const EngineCarry& back = std::get<RestoreInput>(std::get<EngineInput>(restored->what).what).carry;
  ASSERT_EQ(back.queues.size(), 1u);
  EXPECT_EQ(back.queues[0].decayed, 1.0 / 3.0);
  EXPECT_EQ(back.queues[0].usage, 16000);
  EXPECT_EQ(back.jobs[0].relax_at, 609);
  EXPECT_EQ(back.jobs[0].trigger_at, 909);
  EXPECT_EQ(back.usage_at, 14);
  EXPECT_EQ(back.jobs[0].reclaim_tasks, (std::vector<std::pair<uint32_t, uint32_t>>{{5, 0}, {5, 1}, {6, 3}}));
  EXPECT_EQ(back.jobs[0].hold, std::vector<NodeId>{NodeId(2)});
  EXPECT_EQ(back.jobs[0].claimed, 2);
  EXPECT_EQ(back.jobs[0].within_claim, 3);
  EXPECT_EQ(back.jobs[0].within_claim_until, 4321);
  EXPECT_EQ(back.jobs[1].within_claim, 0);
  EXPECT_EQ(back.jobs[1].within_claim_until, -1);
  EXPECT_FALSE(restore["jobs"][1].contains("within_claim"));  // none held
  EXPECT_FALSE(restore["jobs"][1].contains("reclaim"));  // none under way
  ASSERT_EQ(back.jobs[1].restores.size(), 1u);
  EXPECT_EQ(back.jobs[1].restores[0].at, 75);
  EXPECT_EQ(back.jobs[1].restores[0].noticed, (std::vector<std::pair<uint32_t, uint32_t>>{{8, 0}, {8, 2}}));
  ASSERT_EQ(back.jobs.size(), 3u);
  EXPECT_EQ(back.jobs[2].held, (std::vector<NodeId>{NodeId(3), NodeId(1)}));
  EXPECT_EQ(restore["jobs"][2]["planned"],
            nlohmann::json({{"start", 1000}, {"where", "asw1"}, {"nodes", {3, 1, 0}}, {"holds", false}}));
  EXPECT_FALSE(back.jobs[2].planned_holds);
  EXPECT_EQ(back.jobs[2].planned_nodes, (std::vector<NodeId>{NodeId(3), NodeId(1), NodeId(0)}));
  EXPECT_FALSE(restore["jobs"][0].contains("planned"));
  EXPECT_EQ(back.schedule, (CarriedSchedule{3600, 120, 300, 44, 6}));
  EXPECT_EQ(back.jobs[2].unplanned, 6);
  EXPECT_EQ(back.jobs[0].unplanned, -1);
  EXPECT_TRUE(back.jobs[2].assembled);
  EXPECT_FALSE(back.jobs[0].assembled);
  EXPECT_FALSE(restore["jobs"][0].contains("assembled"));
  EXPECT_EQ(HistoryRecordJson(all.front())["config"]["policy"], "fgd");
  EXPECT_EQ(HistoryRecordJson(all.front())["config"]["victims"], "volcano");
  EXPECT_EQ(HistoryRecordJson(all.front())["config"]["preemptor_min_priority"], 0);
  EXPECT_EQ(HistoryRecordJson(all.front())["config"]["backfill"]["conservative"], true);
  EXPECT_EQ(HistoryRecordJson(all.front())["config"]["backfill"]["depth"], 7);
  auto config = HistoryRecordFromJson(HistoryRecordJson(all.front()));
  ASSERT_TRUE(config.ok());
  const EngineConfig& c = std::get<HistorySegment>(config->what).config;
  EXPECT_TRUE(c.backfill.easy && c.backfill.conservative);
  EXPECT_EQ(c.backfill.depth, 7);
  EXPECT_EQ(c.backfill.interval_s, 45);
  EXPECT_EQ(c.allocate.victims, VictimSelection::kVolcano);
}

TEST(HistoryText, ConsecutiveIdenticalCyclesFoldIntoOneRecord) {
  std::vector<HistoryRecord> r;
  AppendInput(r, {5, CycleInput{}});
  AppendInput(r, {5, CycleInput{}});
  AppendInput(r, {6, CycleInput{}});
  AppendInput(r, {6, CancelInput{1, true}});
  AppendInput(r, {6, CycleInput{}});
  ASSERT_EQ(r.size(), 4u);
  EXPECT_EQ(r[0].repeat, 2);
  EXPECT_EQ(r[1].repeat, 1);
  EXPECT_EQ(std::get<EngineInput>(r[1].what).t, 6);
}

// An engine driven by hand, recording its history as the service does; the replay makes the same
// decisions, and a changed input makes others.
TEST(HistoryReplay, AnEnginesRecordedInputsReplayToItsDecisions) {
  EngineConfig config;
  config.requeue = true;
  std::vector<HistoryRecord> history = {{HistorySegment{config}}};
  auto made = Engine::Create(ClusterState(), config);
  ASSERT_TRUE(made.ok());
  Engine& e = **made;
  std::vector<EngineInput> rec;
  e.RecordInputs(&rec);
  const auto flush = [&] {
    for (EngineInput& in : rec) AppendInput(history, std::move(in));
    rec.clear();
  };
  int64_t events = 0;
  e.SetEventObserver([&](const EngineEvent& ev) {
    flush();
    history.push_back({ev});
    ++events;
  });
  ASSERT_TRUE(e.AddPlane("data", {"asw"}).ok());  // the engine adds the node level
  for (int i = 0; i < 4; ++i) {
    NodeSpec s;
    s.name = "n" + std::to_string(i);
    s.cpu_milli = 128000;
    s.mem_mib = 1 << 20;
    s.gpu_count = 8;
    ASSERT_TRUE(e.AddNode(s, "H800", {{"data", {i < 2 ? "asw0" : "asw1"}}}).ok());
  }
  for (uint32_t id = 1; id <= 6; ++id) e.Submit(WholeGpuJob(id, 2, 4, 300, true), SubmitMode::kEnqueue, 10);
  e.RunCycle(10);
  e.Submit(WholeGpuJob(7, 2, 8, 900), SubmitMode::kQueue, 20);  // an HP gang: a Reclaim
  e.RunCycle(20);
  e.RunCycle(20);
  for (int64_t t = 21; t <= 100; t += 10) e.RunCycle(t);
  e.Finish(7, 120);
  e.RunCycle(120);
  flush();
  ASSERT_GE(events, 8);
  auto r = ReplayHistory(history);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->first_difference, -1) << r->difference;
  EXPECT_EQ(static_cast<int64_t>(r->events.size()), events);
  EXPECT_EQ(r->segments, 1);
  // The HP gang submitted at another time: the replay says where it parts.
  for (HistoryRecord& h : history) {
    auto* in = std::get_if<EngineInput>(&h.what);
    if (in && std::holds_alternative<SubmitInput>(in->what) && std::get<SubmitInput>(in->what).job.id == 7) in->t = 15;
  }
  auto changed = ReplayHistory(history);
  ASSERT_TRUE(changed.ok());
  EXPECT_GE(changed->first_difference, 0);
  EXPECT_NE(changed->difference.find("replayed"), std::string::npos) << changed->difference;
}

class HistoryFile : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("estuary-history-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string Write(const std::string& text) {
    const std::string p = (dir_ / "h.jsonl").string();
    std::ofstream(p) << text;
    return p;
  }
  std::filesystem::path dir_;
};

TEST_F(HistoryFile, ABadFileIsRefusedNamingTheFileTheLineAndTheField) {
  const std::string header = HistoryHeaderLine() + "\n";
  const std::string segment = HistoryRecordJson({HistorySegment{EngineConfig{}}}).dump() + "\n";
  std::string p = Write("{\"something\": 1}\n");
  EXPECT_TRUE(testing::IsBadInput(ReadHistoryFile(p), p + ":1: estuary_history: missing"));
  p = Write("");
  EXPECT_TRUE(testing::IsBadInput(ReadHistoryFile(p), p + ":1: estuary_history"));
  p = Write(header + segment + "{\"t\": 3, \"input\": {\"kind\": \"submit\", \"job\": {\"min_replicas\": \"two\"}}}\n");
  EXPECT_TRUE(testing::IsBadInput(ReadHistoryFile(p), p + ":3: input.job.min_replicas: expected an integer"));
  p = Write(header + segment + "{\"t\": 3, \"input\": {\"kind\": \"launch\"}}\n");
  EXPECT_TRUE(testing::IsBadInput(ReadHistoryFile(p), p + ":3: input.kind: unknown input kind 'launch'"));
  p = Write(header + segment + "{\"t\": 3, \"input\": {\"kind\": \"node\", \"op\": \"explode\", \"node\": 1}}\n");
  EXPECT_TRUE(testing::IsBadInput(ReadHistoryFile(p), p + ":3: input.op: unknown value 'explode'"));
  p = Write(header + segment + "{\"t\": 3, \"input\": {\"kind\": \"cancel\", \"job\": 1}, \"n\": 4}\n");
  EXPECT_TRUE(testing::IsBadInput(ReadHistoryFile(p), p + ":3: n: only a cycle repeats"));
  p = Write(header + segment + "not json\n");
  EXPECT_TRUE(testing::IsBadInput(ReadHistoryFile(p), p + ":3: not a JSON object"));
  p = Write(header + "{\"t\": 1, \"input\": {\"kind\": \"cycle\"}}\n");
  EXPECT_TRUE(testing::IsBadInput(ReadHistoryFile(p), p + ":2: config: the first record must start a segment"));
  p = Write(header + segment + "{\"t\": 1, \"event\": {\"kind\": \"teleported\"}}\n");
  EXPECT_TRUE(testing::IsBadInput(ReadHistoryFile(p), p + ":3: event.kind: unknown event kind 'teleported'"));
  p = Write(header + segment + "{\"t\": 3, \"input\": {\"kind\": \"probe\", \"job\": {}, \"know\": 1}}\n");
  EXPECT_TRUE(testing::IsBadInput(ReadHistoryFile(p), p + ":3: input.know: expected true or false"));
  p = Write(header + segment + "{\"t\": 3, \"input\": {\"kind\": \"restore\", \"queues\": [{\"name\": \"a\", \"decayed\": \"x\"}]}}\n");
  EXPECT_TRUE(testing::IsBadInput(ReadHistoryFile(p), p + ":3: input.queues[0].decayed: expected a number"));
  p = Write(header + segment + "{\"t\": 3, \"input\": {\"kind\": \"restore\", \"queues\": [{\"name\": \"a\", \"usage\": 1.5}]}}\n");
  EXPECT_TRUE(testing::IsBadInput(ReadHistoryFile(p), p + ":3: input.queues[0].usage: expected an integer"));
  p = Write(header + segment + "{\"t\": 3, \"input\": {\"kind\": \"restore\", \"schedule\": {\"next_defrag\": \"soon\"}}}\n");
  EXPECT_TRUE(testing::IsBadInput(ReadHistoryFile(p), p + ":3: input.schedule.next_defrag: expected an integer"));
  p = Write(header + segment + "{\"t\": 3, \"input\": {\"kind\": \"restore\", \"jobs\": [{\"job\": 1, \"planned\": {\"start\": 5, \"nodes\": [\"n\"]}}]}}\n");
  EXPECT_TRUE(testing::IsBadInput(ReadHistoryFile(p), p + ":3: input.jobs[0].planned.nodes[0]: expected a node"));
  p = Write(header + segment + "{\"t\": 3, \"input\": {\"kind\": \"restore\", \"jobs\": [{\"job\": 1, \"planned\": {\"start\": 5, \"holds\": 1}}]}}\n");
  EXPECT_TRUE(testing::IsBadInput(ReadHistoryFile(p), p + ":3: input.jobs[0].planned.holds: expected true or false"));
  p = Write(header + segment + "{\"t\": 3, \"input\": {\"kind\": \"restore\", \"jobs\": [{\"job\": 1, \"resume_nodes\": [\"n1\"]}]}}\n");
  EXPECT_TRUE(testing::IsBadInput(ReadHistoryFile(p), p + ":3: input.jobs[0].resume_nodes[0]: expected a node"));
  p = Write(header + segment +
            "{\"t\": 3, \"input\": {\"kind\": \"restore\", \"jobs\": [{\"job\": 1, \"reclaim\": {\"at\": 9, \"tasks\": [[2]]}}]}}\n");
  EXPECT_TRUE(testing::IsBadInput(ReadHistoryFile(p), p + ":3: input.jobs[0].reclaim.tasks[0]: expected [job, replica]"));
  p = Write(header + segment + "{\"inherit\": true, \"jobs\": \"yes\"}\n");
  EXPECT_TRUE(testing::IsBadInput(ReadHistoryFile(p), p + ":3: jobs: expected true or false"));
  p = Write(header + "{\"config\": {\"actions\": [\"allocate\", \"dance\"]}}\n");
  EXPECT_TRUE(testing::IsBadInput(ReadHistoryFile(p), p + ":2: config.actions[1]: unknown action"));
  EXPECT_TRUE(testing::IsBadInput(ReadHistoryFile((dir_ / "absent.jsonl").string()), (dir_ / "absent.jsonl").string() + ": cannot open"));
  // A good one reads.
  p = Write(header + segment + "{\"t\": 1, \"input\": {\"kind\": \"cycle\"}, \"n\": 2}\n");
  auto good = ReadHistoryFile(p);
  ASSERT_TRUE(good.ok()) << good.status().message();
  EXPECT_EQ(good->size(), 2u);
}

}  // namespace
}  // namespace estuary

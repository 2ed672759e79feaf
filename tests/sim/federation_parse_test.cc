// Federation scenarios (issue 6): what `federation:`, a job's `models` / `home` / `home_only` and a
// configuration's `federation` / `blind_dispatch` parse into, and every bad input, named by file,
// line and field.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cctype>
#include <string>
#include <vector>

#include "sim/federation_setup.h"
#include "sim/scenario.h"
#include "tests/testing/bad_input.h"
#include "tests/testing/temp_dir.h"

namespace estuary {
namespace {

using ::testing::HasSubstr;

// Lines 1-5: two members of one generated 8-GPU node each.
const std::string kFed =
    "name: t\n"
    "federation:\n"
    "  members:\n"
    "    - {name: a, cluster: {generate: {total_gpus: 8, nodes_per_asw_min: 1, nodes_per_asw_max: 1}}}\n"
    "    - {name: b, cluster: {generate: {total_gpus: 8, nodes_per_asw_min: 1, nodes_per_asw_max: 1}}}\n";
const std::string kJob = "jobs:\n  - {name: j, gpus: 8}\n";                    // lines 6-7 after kFed
const std::string kConf = "configurations:\n  - {name: c, federation: blind}\n";  // lines 8-9 after kFed + kJob

TEST(FederationParse, AValidScenarioParsesIntoItsMembersJobsAndConfigurations) {
  const std::string text =
      "name: t\n"
      "federation:\n"
      "  retry_backoff_s: 10\n"
      "  summary_period_s: 60\n"
      "  tie_break: spread\n"
      "  members:\n"
      "    - {name: east, cluster: {spec: clusters/east.yaml}, start_hour: 8, arrivals_share: 2.5}\n"  // line 7
      "    - name: west\n"                                                                             // line 8
      "      cluster: {generate: {total_gpus: 64, gpus_per_node: 4, seed: 7}}\n"
      "jobs:\n"
      "  - {name: j1, gpus: 8, models: [H800, A100]}\n"
      "  - {name: j2, gpus: 8, models: A10, home: west, home_only: true}\n"
      "generator:\n"
      "  arrivals_per_hour: 10\n"
      "  classes:\n"
      "    - {name: svc, gpus: 1, models: [A10], home_only: true}\n"
      "configurations:\n"
      "  - {name: rr, federation: blind}\n"
      "  - {name: ll, federation: blind, blind_dispatch: least-loaded}\n"
      "  - {name: ra, federation: reclaim-aware, queue: priority, preempt: {grace_s: 30}}\n"
      "  - {name: one, federation: merged}\n";
  auto s = ParseScenario(text, "/scen/s.yaml");
  ASSERT_TRUE(s.ok()) << s.status().message();
  const FederationSpec& f = s->federation;
  EXPECT_TRUE(f.enabled);
  EXPECT_EQ(f.line, 3);
  EXPECT_EQ(f.retry_backoff_s, 10);
  EXPECT_EQ(f.retry_backoff_max_s, 480);
  EXPECT_EQ(f.summary_period_s, 60);
  EXPECT_TRUE(f.spread);
  EXPECT_EQ(f.headroom_retry_s, 60);  // the defaults
  EXPECT_EQ(f.headroom_max_loss_s, 300);
  ASSERT_EQ(f.members.size(), 2u);
  EXPECT_EQ(f.members[0].name, "east");
  EXPECT_EQ(f.members[0].line, 7);
  EXPECT_EQ(f.members[0].cluster_spec, "/scen/clusters/east.yaml");
  EXPECT_FALSE(f.members[0].cluster_generate.has_value());
  EXPECT_EQ(f.members[0].start_hour, 8);
  EXPECT_DOUBLE_EQ(f.members[0].arrivals_share, 2.5);
  EXPECT_EQ(f.members[1].name, "west");
  EXPECT_EQ(f.members[1].line, 8);
  EXPECT_TRUE(f.members[1].cluster_spec.empty());
  ASSERT_TRUE(f.members[1].cluster_generate.has_value());
  EXPECT_EQ(f.members[1].cluster_generate->total_gpus, 64);
  EXPECT_EQ(f.members[1].cluster_generate->gpus_per_node, 4);
  EXPECT_EQ(f.members[1].cluster_generate->seed, 7u);
  EXPECT_EQ(f.members[1].start_hour, 0);
  EXPECT_DOUBLE_EQ(f.members[1].arrivals_share, 1);
  EXPECT_TRUE(s->cluster_spec.empty());
  EXPECT_FALSE(s->cluster_generate.has_value());

  ASSERT_EQ(s->jobs.size(), 2u);
  EXPECT_EQ(s->jobs[0].models, (std::vector<std::string>{"H800", "A100"}));
  EXPECT_EQ(s->jobs[0].home, "east");  // the first member by default
  EXPECT_FALSE(s->jobs[0].home_only);
  EXPECT_EQ(s->jobs[1].models, (std::vector<std::string>{"A10"}));
  EXPECT_EQ(s->jobs[1].home, "west");
  EXPECT_TRUE(s->jobs[1].home_only);
  ASSERT_EQ(s->stream.classes.size(), 1u);
  EXPECT_EQ(s->stream.classes[0].job.models, (std::vector<std::string>{"A10"}));
  EXPECT_TRUE(s->stream.classes[0].job.home.empty());  // drawn by the simulator
  EXPECT_TRUE(s->stream.classes[0].job.home_only);

  ASSERT_EQ(s->configurations.size(), 4u);
  EXPECT_EQ(s->configurations[0].federation, "blind");
  EXPECT_FALSE(s->configurations[0].blind_least_loaded);
  EXPECT_TRUE(s->configurations[0].priority_queue);  // a federation queues by priority, `queue:` or not
  EXPECT_EQ(s->configurations[1].federation, "blind");
  EXPECT_TRUE(s->configurations[1].blind_least_loaded);
  EXPECT_EQ(s->configurations[2].federation, "reclaim-aware");
  EXPECT_TRUE(s->configurations[2].priority_queue);
  EXPECT_TRUE(s->configurations[2].preempt);
  EXPECT_EQ(s->configurations[3].federation, "merged");
}

TEST(FederationParse, TheRetryCeilingRisesToALargerBackoffAndTieBreakDefaultsToPack) {
  auto s = ParseScenario("name: t\nfederation:\n  retry_backoff_s: 600\n" + kFed.substr(kFed.find("  members:")) + kJob + kConf,
                         "s.yaml");
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_EQ(s->federation.retry_backoff_s, 600);
  EXPECT_EQ(s->federation.retry_backoff_max_s, 600);
  EXPECT_EQ(s->federation.summary_period_s, 0);
  EXPECT_FALSE(s->federation.spread);
}

TEST(FederationParse, TheHeadroomDrainOptionsApplyToEveryMember) {
  auto s = ParseScenario("name: t\nfederation:\n  headroom_retry_s: 120\n  headroom_max_loss_s: 0\n" +
                             kFed.substr(kFed.find("  members:")) + kJob + kConf,
                         "s.yaml");
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_EQ(s->federation.headroom_retry_s, 120);
  EXPECT_EQ(s->federation.headroom_max_loss_s, 0);
}

TEST(FederationParse, AWarmUpIsKeptAndDefaultsToNone) {
  auto s = ParseScenario("name: t\nduration_s: 1000\nwarmup_s: 999\n" + kFed.substr(kFed.find("federation:")) + kJob + kConf, "s.yaml");
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_EQ(s->warmup_s, 999);
  auto d = ParseScenario(kFed + kJob + kConf, "s.yaml");
  ASSERT_TRUE(d.ok()) << d.status().message();
  EXPECT_EQ(d->warmup_s, 0);
}

TEST(FederationParse, ASingleClusterScenarioKeepsModelsAndHasNoHomes) {
  auto s = ParseScenario("name: t\ncluster:\n  spec: c.yaml\njobs:\n  - {name: j, gpus: 8, models: [A100]}\n"
                         "configurations:\n  - {name: a}\n",
                         "s.yaml");
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_FALSE(s->federation.enabled);
  EXPECT_EQ(s->jobs[0].models, (std::vector<std::string>{"A100"}));
  EXPECT_TRUE(s->jobs[0].home.empty());
  EXPECT_TRUE(s->configurations[0].federation.empty());
}

struct BadScenario {
  const char* name;
  std::string text;
  const char* message;  // the start of the message: "s.yaml:LINE: field 'F': ..."
};

class FederationBadInput : public ::testing::TestWithParam<BadScenario> {};

TEST_P(FederationBadInput, IsRejectedNamingTheLineAndField) {
  EXPECT_TRUE(testing::IsBadInput(ParseScenario(GetParam().text, "s.yaml"), GetParam().message));
}

// `member` (a flow mapping) as the only member of a federation; lines 1-4.
std::string OneMember(const std::string& member) { return "name: t\nfederation:\n  members:\n    - " + member + "\n"; }
const std::string kGen = "cluster: {generate: {total_gpus: 8}}";
const std::string kSingle = "name: t\ncluster:\n  spec: c.yaml\n";  // lines 1-3

std::vector<BadScenario> Cases() {
  const std::string conf_after_job = kFed + kJob;  // a configuration list starts at line 8
  return {
      {"UnknownHomeMember", kFed + "jobs:\n  - {name: j, gpus: 8, home: c}\n" + kConf,
       "s.yaml:7: field 'home': unknown member 'c' (members: a, b)"},
      {"DuplicateMember",
       "name: t\nfederation:\n  members:\n    - {name: a, " + kGen + "}\n    - {name: a, " + kGen + "}\n" + kJob + kConf,
       "s.yaml:5: field 'name': duplicate member 'a'"},
      {"EmptyMemberList", "name: t\nfederation:\n  members: []\n" + kJob + kConf, "s.yaml:3: field 'members': expected a non-empty list"},
      {"NoMembers", "name: t\nfederation:\n  tie_break: pack\n" + kJob + kConf, "s.yaml:3: field 'members': expected a non-empty list"},
      {"EmptyMemberName", OneMember("{name: '', " + kGen + "}") + kJob + kConf,
       "s.yaml:4: field 'name': expected a non-empty string"},
      {"MemberWithoutCluster", OneMember("{name: a}") + kJob + kConf, "s.yaml:4: field 'cluster': missing"},
      {"MemberWithBothSpecAndGenerate", OneMember("{name: a, cluster: {spec: c.yaml, generate: {total_gpus: 8}}}") + kJob + kConf,
       "s.yaml:4: field 'cluster': give spec or generate, not both"},
      {"MemberUnknownGenerateKey", OneMember("{name: a, cluster: {generate: {total_gpus: 8, racks: 2}}}") + kJob + kConf,
       "s.yaml:4: field 'racks': unknown field"},
      {"MemberUnknownField", OneMember("{name: a, " + kGen + ", zone: eu}") + kJob + kConf, "s.yaml:4: field 'zone': unknown field"},
      {"StartHourOutOfRange", OneMember("{name: a, " + kGen + ", start_hour: 24}") + kJob + kConf,
       "s.yaml:4: field 'start_hour': 24 is outside [0, 23]"},
      {"ZeroArrivalsShare", OneMember("{name: a, " + kGen + ", arrivals_share: 0}") + kJob + kConf,
       "s.yaml:4: field 'arrivals_share': must be > 0"},
      {"HeadroomNotAMapping", OneMember("{name: a, " + kGen + ", headroom: 16}") + kJob + kConf,
       "s.yaml:4: field 'headroom': expected a mapping {replicas, gpus, models, plane, level, min_job_gpus} or a list of them"},
      {"HeadroomUnknownField", OneMember("{name: a, " + kGen + ", headroom: {replicas: 2, racks: 1}}") + kJob + kConf,
       "s.yaml:4: field 'racks': unknown field"},
      {"HeadroomZeroReplicas", OneMember("{name: a, " + kGen + ", headroom: [{replicas: 0}]}") + kJob + kConf,
       "s.yaml:4: field 'replicas': 0 is outside [1, 4096]"},
      {"HeadroomPlaneWithoutLevel", OneMember("{name: a, " + kGen + ", headroom: {replicas: 2, plane: data}}") + kJob + kConf,
       "s.yaml:4: field 'level': plane and level go together"},
      {"UnknownFederationField", "name: t\nfederation:\n  members: [{name: a, " + kGen + "}]\n  zones: 2\n" + kJob + kConf,
       "s.yaml:4: field 'zones': unknown field"},
      {"BadTieBreak", "name: t\nfederation:\n  tie_break: random\n" + kFed.substr(kFed.find("  members:")) + kJob + kConf,
       "s.yaml:3: field 'tie_break': unknown tie_break 'random' (known: pack, spread)"},
      {"RetryCeilingBelowBackoff",
       "name: t\nfederation:\n  retry_backoff_s: 60\n  retry_backoff_max_s: 30\n" + kFed.substr(kFed.find("  members:")) + kJob +
           kConf,
       "s.yaml:4: field 'retry_backoff_max_s': below retry_backoff_s (60)"},
      {"ZeroRetryBackoff", "name: t\nfederation:\n  retry_backoff_s: 0\n" + kFed.substr(kFed.find("  members:")) + kJob + kConf,
       "s.yaml:3: field 'retry_backoff_s': 0 is outside [1, 86400]"},
      {"SummaryPeriodTooLong", "name: t\nfederation:\n  summary_period_s: 86401\n" + kFed.substr(kFed.find("  members:")) + kJob + kConf,
       "s.yaml:3: field 'summary_period_s': 86401 is outside [0, 86400]"},
      {"ZeroHeadroomRetry", "name: t\nfederation:\n  headroom_retry_s: 0\n" + kFed.substr(kFed.find("  members:")) + kJob + kConf,
       "s.yaml:3: field 'headroom_retry_s': 0 is outside [1, 86400]"},
      {"NegativeHeadroomLoss", "name: t\nfederation:\n  headroom_max_loss_s: -1\n" + kFed.substr(kFed.find("  members:")) + kJob + kConf,
       "s.yaml:3: field 'headroom_max_loss_s': -1 is outside [0, 604800]"},
      {"HeadroomLossNotANumber", "name: t\nfederation:\n  headroom_max_loss_s: soon\n" + kFed.substr(kFed.find("  members:")) + kJob + kConf,
       "s.yaml:3: field 'headroom_max_loss_s': expected an integer"},
      {"WarmUpNotBelowDuration", "name: t\nduration_s: 100\nwarmup_s: 100\n" + kFed.substr(kFed.find("federation:")) + kJob + kConf,
       "s.yaml:3: field 'warmup_s': must be below duration_s (100)"},
      {"NegativeWarmUp", "name: t\nwarmup_s: -5\n" + kFed.substr(kFed.find("federation:")) + kJob + kConf,
       "s.yaml:2: field 'warmup_s': -5 is outside [0, "},
      {"WarmUpNotANumber", "name: t\nwarmup_s: a day\n" + kFed.substr(kFed.find("federation:")) + kJob + kConf,
       "s.yaml:2: field 'warmup_s': expected an integer"},
      {"WarmUpInASingleClusterScenario", kSingle + "warmup_s: 60\njobs:\n  - {name: j, gpus: 8}\n",
       "s.yaml:4: field 'warmup_s': supported in a federation scenario only"},
      {"BothClusterAndFederation", kFed + "cluster:\n  spec: c.yaml\n" + kJob + kConf,
       "s.yaml:2: field 'federation': give cluster or federation, not both"},
      {"NeitherClusterNorFederation", "name: t\n" + kJob + kConf, "s.yaml:1: field 'cluster': missing"},
      {"UnknownMode", conf_after_job + "configurations:\n  - {name: c, federation: teleport}\n",
       "s.yaml:9: field 'federation': unknown mode 'teleport' (known: blind, idle-only, reclaim-aware, merged)"},
      {"BlindDispatchWithoutBlind", conf_after_job + "configurations:\n  - {name: c, federation: merged, blind_dispatch: least-loaded}\n",
       "s.yaml:9: field 'blind_dispatch': only with federation: blind"},
      {"UnknownBlindDispatch", conf_after_job + "configurations:\n  - {name: c, federation: blind, blind_dispatch: random}\n",
       "s.yaml:9: field 'blind_dispatch': unknown dispatch 'random' (known: round-robin, least-loaded)"},
      {"ConfigurationWithoutMode", conf_after_job + "configurations:\n  - {name: c, federation: blind}\n  - {name: d}\n",
       "s.yaml:10: field 'federation': missing"},
      {"ModeWithoutFederation", kSingle + "jobs:\n  - {name: j, gpus: 8}\nconfigurations:\n  - {name: c, federation: blind}\n",
       "s.yaml:7: field 'federation': the scenario has no federation:"},
      {"BlindDispatchWithoutFederation",
       kSingle + "jobs:\n  - {name: j, gpus: 8}\nconfigurations:\n  - {name: c, blind_dispatch: round-robin}\n",
       "s.yaml:7: field 'blind_dispatch': only with federation: blind"},
      {"HomeWithoutFederation", kSingle + "jobs:\n  - {name: j, gpus: 8, home: a}\nconfigurations:\n  - {name: c}\n",
       "s.yaml:5: field 'home': only in a federation scenario"},
      {"HomeOnlyWithoutFederation", kSingle + "jobs:\n  - {name: j, gpus: 8, home_only: true}\nconfigurations:\n  - {name: c}\n",
       "s.yaml:5: field 'home_only': only in a federation scenario"},
      {"HomeOnAGeneratorClass",
       kFed + "generator:\n  arrivals_per_hour: 1\n  classes:\n    - {gpus: 8, home: a}\n" + "configurations:\n  - {name: c, federation: blind}\n",
       "s.yaml:9: field 'home': not in a generator class"},
      {"JobQueue", kFed + "jobs:\n  - {name: j, gpus: 8, queue: team-a}\n" + kConf,
       "s.yaml:7: field 'queue': not supported in a federation scenario"},
      {"HomeOnlyNotABool", kFed + "jobs:\n  - {name: j, gpus: 8, home_only: sometimes}\n" + kConf,
       "s.yaml:7: field 'home_only': expected a boolean"},
      {"GeneratedModelMixUnknownShape",
       "name: t\ncluster:\n  generate: {total_gpus: 64, models: 'H800:x'}\njobs:\n  - {name: j, gpus: 8}\nconfigurations:\n  - {name: c}\n",
       "s.yaml:3: field 'models': "},
      {"EmptyModelList", kSingle + "jobs:\n  - {name: j, gpus: 8, models: []}\nconfigurations:\n  - {name: c}\n",
       "s.yaml:5: field 'models': empty (leave it out for any model)"},
      {"EmptyModelName", kSingle + "jobs:\n  - {name: j, gpus: 8, models: [H800, '']}\nconfigurations:\n  - {name: c}\n",
       "s.yaml:5: field 'models[1]': empty"},
      {"DuplicateModel", kSingle + "jobs:\n  - {name: j, gpus: 8, models: [H800, H800]}\nconfigurations:\n  - {name: c}\n",
       "s.yaml:5: field 'models[1]': 'H800' repeats models[0]"},
      {"ModelsAsAMapping", kSingle + "jobs:\n  - {name: j, gpus: 8, models: {H800: 1}}\nconfigurations:\n  - {name: c}\n",
       "s.yaml:5: field 'models': expected a string or an array"},
      {"Backfill", conf_after_job + "configurations:\n  - {name: c, federation: blind, backfill: easy}\n",
       "s.yaml:9: field 'backfill': not supported in a federation scenario"},
      {"Events", kFed + kJob + "events:\n  - {at_s: 5, fail_node: n}\n" + kConf,
       "s.yaml:8: field 'events': not supported in a federation scenario"},
      {"Failures", kFed + kJob + "failures: {node_mtbf_h: 24, repair_s: 60}\n" + kConf,
       "s.yaml:8: field 'failures': not supported in a federation scenario"},
      {"Network", kFed + kJob + "network: {plane: data}\n" + kConf,
       "s.yaml:8: field 'network': not supported in a federation scenario"},
      {"TidalServices",
       kFed + "tidal:\n  curve: " + std::string(ESTUARY_SOURCE_DIR) +
           "/examples/curves/genai-diurnal.csv\n  services: {count: 2}\n" + kConf,
       "s.yaml:8: field 'services': not supported in a federation scenario"},
      {"Reserve", conf_after_job + "configurations:\n  - {name: c, federation: blind, reserve: {after_s: 60}}\n",
       "s.yaml:9: field 'reserve': not supported in a federation scenario"},
      {"Standby", conf_after_job + "configurations:\n  - {name: c, federation: blind, standby: {grace_s: 60}}\n",
       "s.yaml:9: field 'standby': not supported in a federation scenario"},
      {"DefragThatNeverRuns", conf_after_job + "configurations:\n  - {name: c, federation: blind, defrag: {interval_s: 0}}\n",
       "s.yaml:9: field 'interval_s': defrag runs neither periodically (interval_s 0) nor on a trigger (trigger_after_s 0)"},
      {"Pack", conf_after_job + "configurations:\n  - {name: c, federation: blind, pack: {plane: data, level: asw}}\n",
       "s.yaml:9: field 'pack': not supported in a federation scenario"},
      {"HoldSurvivors", conf_after_job + "configurations:\n  - {name: c, federation: blind, hold_survivors: true}\n",
       "s.yaml:9: field 'hold_survivors': not supported in a federation scenario"},
      {"FifoQueue", conf_after_job + "configurations:\n  - {name: c, federation: blind, queue: fifo}\n",
       "s.yaml:9: field 'queue': fifo is not supported in a federation scenario: the federation and its members queue by priority"},
  };
}

INSTANTIATE_TEST_SUITE_P(Federation, FederationBadInput, ::testing::ValuesIn(Cases()),
                         [](const auto& info) { return std::string(info.param.name); });

TEST(FederationParse, ATidalCurveForDiurnalClassesIsAllowed) {
  auto s = ParseScenario(kFed + "tidal:\n  curve: " + std::string(ESTUARY_SOURCE_DIR) +
                             "/examples/curves/genai-diurnal.csv\n"
                             "generator:\n  arrivals_per_hour: 5\n  classes:\n    - {gpus: 1, diurnal: true}\n" + kConf,
                         "s.yaml");
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_TRUE(s->tidal.enabled);
  EXPECT_EQ(s->tidal.services, 0);
}

// --- the members' clusters meet the workload (LoadMemberClusters) ------------------------------

// Cluster specs of one node: h800.yaml (H800), a100.yaml (A100).
class MemberClusters : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* model : {"H800", "A100"}) {
      std::string file = model;
      for (char& ch : file) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
      testing::WriteFile(dir_, file + ".yaml",
                         std::string("name: c\npools:\n  - {name: p, gpu_model: ") + model +
                             ", gpus_per_node: 8, cpu_cores: 96, memory_gib: 1024}\nnodes:\n  - {name: n0, pool: p}\n");
    }
    path_ = (dir_.path() / "s.yaml").string();
  }
  // Members a (h800.yaml, line 4) and b (a100.yaml, line 5), then `rest`; jobs start at line 6.
  StatusOr<Scenario> Parse(const std::string& rest) {
    return ParseScenario("name: t\nfederation:\n  members:\n    - {name: a, cluster: {spec: h800.yaml}}\n"
                         "    - {name: b, cluster: {spec: a100.yaml}}\n" + rest + kConf,
                         path_);
  }
  StatusOr<std::vector<ClusterState>> Load(const std::string& rest) {
    auto s = Parse(rest);
    if (!s.ok()) return s.status();
    return LoadMemberClusters(*s);
  }

  testing::TempDir dir_;
  std::string path_;
};

TEST_F(MemberClusters, EachMemberReadsItsSpecRelativeToTheScenario) {
  auto c = Load("jobs:\n  - {name: j, gpus: 8, models: [A100], home: b, home_only: true}\n");
  ASSERT_TRUE(c.ok()) << c.status().message();
  ASSERT_EQ(c->size(), 2u);
  EXPECT_EQ((*c)[0].nodes()[0].spec.model, (*c)[0].models().Find("H800"));
  EXPECT_EQ((*c)[1].nodes()[0].spec.model, (*c)[1].models().Find("A100"));
}

TEST_F(MemberClusters, AModelNoMemberHasIsNamedWithTheJobsLine) {
  const Status s = Load("jobs:\n  - {name: j, gpus: 8}\n  - {name: k, gpus: 8, models: [A100, B200]}\n").status();
  EXPECT_TRUE(testing::IsBadInput(s, path_ + ":8: job 'k': models: ", "no member has GPU model 'B200'"));
  EXPECT_THAT(s.message(), HasSubstr("s.yaml:8"));
}

TEST_F(MemberClusters, AGeneratorClassWithAModelNoMemberHasIsNamedToo) {
  const Status s = Load("generator:\n  arrivals_per_hour: 1\n  classes:\n    - {gpus: 8, models: A10}\n").status();
  EXPECT_TRUE(testing::IsBadInput(s, path_ + ":9: job 'gen0': models: ", "no member has GPU model 'A10'"));
}

TEST_F(MemberClusters, AHomeOnlyJobWhoseHomeLacksAllItsModelsIsNamed) {
  const Status s = Load("jobs:\n  - {name: j, gpus: 8, models: [A100], home: a, home_only: true}\n").status();
  EXPECT_TRUE(testing::IsBadInput(s, path_ + ":7: job 'j': models: ", "home member 'a'"));
  // Without home_only, the job may run on b.
  EXPECT_TRUE(Load("jobs:\n  - {name: j, gpus: 8, models: [A100], home: a}\n").ok());
}

TEST(LoadMemberClusters, AMemberWithoutNodesIsNamed) {
  auto s = ParseScenario(OneMember("{name: a, cluster: {generate: {total_gpus: 8}}}") +
                             "    - {name: tiny, cluster: {generate: {total_gpus: 4, gpus_per_node: 8}}}\n" + kJob + kConf,
                         "s.yaml");
  ASSERT_TRUE(s.ok()) << s.status().message();
  const Status st = LoadMemberClusters(*s).status();
  EXPECT_TRUE(testing::IsBadInput(st, "s.yaml:5: federation: member 'tiny': cluster: no nodes"));
}

TEST(LoadMemberClusters, AMembersUnreadableSpecIsPrefixedWithTheMember) {
  auto s = ParseScenario(OneMember("{name: a, cluster: {spec: /nonexistent/c.yaml}}") + kJob + kConf, "s.yaml");
  ASSERT_TRUE(s.ok()) << s.status().message();
  const Status st = LoadMemberClusters(*s).status();
  EXPECT_FALSE(st.ok());
  EXPECT_THAT(st.message(), HasSubstr("s.yaml:4: federation: member 'a': cluster: "));
  EXPECT_THAT(st.message(), HasSubstr("/nonexistent/c.yaml"));
}

}  // namespace
}  // namespace estuary

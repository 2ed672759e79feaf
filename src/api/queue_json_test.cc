// The queue schema: what it reads, what it writes back, and its messages for bad input.
#include "api/queue_json.h"

#include <gtest/gtest.h>

namespace estuary {
namespace {

using Json = nlohmann::json;

TEST(QueueJson, ReadsATreeWithQuotasInEveryUnitAndWritesItBackUnchanged) {
  const Json v = Json::parse(R"([
    {"name": "org", "guarantee": {"gpus": 64, "cpu_cores": 100, "memory_gib": 2}, "weight": 2},
    {"name": "team", "parent": "org", "guarantee": {"gpus": {"H800": 16, "A100": 8}},
     "limit": {"gpus": 32, "memory_mib": 4096}, "lend_limit": {"gpus": 4}, "max_priority": 800,
     "reclaim": false, "reclaimable": false, "tenants": ["alice", "bob.ml"]}])");
  auto q = DecodeQueues(v);
  ASSERT_TRUE(q.ok()) << q.status().message();
  ASSERT_EQ(q->size(), 2u);
  const QueueSpec& org = (*q)[0];
  EXPECT_EQ(org.name, "org");
  EXPECT_EQ(org.parent, "");
  EXPECT_EQ(org.guarantee.gpu_milli, 64000);
  EXPECT_EQ(org.guarantee.cpu_milli, 100000);
  EXPECT_EQ(org.guarantee.memory_mib, 2048);
  EXPECT_EQ(org.weight, 2);
  EXPECT_EQ(org.max_priority, 1000);
  EXPECT_TRUE(org.reclaim);
  EXPECT_TRUE(org.limit.empty());
  const QueueSpec& team = (*q)[1];
  EXPECT_EQ(team.parent, "org");
  EXPECT_EQ(team.guarantee.model_milli, (std::map<std::string, int64_t>{{"A100", 8000}, {"H800", 16000}}));
  EXPECT_FALSE(team.guarantee.gpu_milli.has_value());
  EXPECT_EQ(team.limit.gpu_milli, 32000);
  EXPECT_EQ(team.limit.memory_mib, 4096);
  EXPECT_EQ(team.lend_limit.gpu_milli, 4000);
  EXPECT_EQ(team.max_priority, 800);
  EXPECT_FALSE(team.reclaim);
  EXPECT_FALSE(team.reclaimable);
  EXPECT_EQ(team.tenants, (std::vector<std::string>{"alice", "bob.ml"}));
  EXPECT_TRUE(org.tenants.empty());
  auto again = DecodeQueues(EncodeQueues(*q));
  ASSERT_TRUE(again.ok()) << again.status().message();
  ASSERT_EQ(again->size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    const QueueSpec &a = (*q)[i], &b = (*again)[i];
    EXPECT_EQ(a.name, b.name);
    EXPECT_EQ(a.parent, b.parent);
    EXPECT_EQ(a.guarantee.gpu_milli, b.guarantee.gpu_milli);
    EXPECT_EQ(a.guarantee.model_milli, b.guarantee.model_milli);
    EXPECT_EQ(a.guarantee.cpu_milli, b.guarantee.cpu_milli);
    EXPECT_EQ(a.guarantee.memory_mib, b.guarantee.memory_mib);
    EXPECT_EQ(a.limit.gpu_milli, b.limit.gpu_milli);
    EXPECT_EQ(a.lend_limit.gpu_milli, b.lend_limit.gpu_milli);
    EXPECT_EQ(a.weight, b.weight);
    EXPECT_EQ(a.max_priority, b.max_priority);
    EXPECT_EQ(a.reclaim, b.reclaim);
    EXPECT_EQ(a.reclaimable, b.reclaimable);
    EXPECT_EQ(a.tenants, b.tenants);
  }
}

TEST(QueueJson, SharingHasDefaultsAndRoundTrips) {
  auto s = DecodeSharing(Json::object());
  ASSERT_TRUE(s.ok());
  EXPECT_TRUE(s->borrow && s->reclaim && s->weights);
  EXPECT_FALSE(s->reclaim_to_fair_share);
  EXPECT_EQ(s->usage_half_life_s, 0);
  EXPECT_EQ(s->cooldown_s, 300);
  EXPECT_TRUE(s->count_in_flight);
  EXPECT_TRUE(s->rebalance);
  s = DecodeSharing(Json::parse(R"({"borrow": false, "reclaim_to": "fair-share", "usage_half_life_s": 3600, "cooldown_s": 0})"));
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_FALSE(s->borrow);
  EXPECT_TRUE(s->reclaim_to_fair_share);
  const auto back = DecodeSharing(EncodeSharing(*s));
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->usage_half_life_s, 3600);
  EXPECT_EQ(back->cooldown_s, 0);
  EXPECT_FALSE(back->borrow);
  s = DecodeSharing(Json::parse(R"({"count_in_flight": false})"));
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_FALSE(s->count_in_flight);
  EXPECT_FALSE(DecodeSharing(EncodeSharing(*s))->count_in_flight);
  s = DecodeSharing(Json::parse(R"({"rebalance": false})"));
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_FALSE(s->rebalance);
  EXPECT_FALSE(DecodeSharing(EncodeSharing(*s))->rebalance);
  s = DecodeSharing(Json::parse(R"({"rebalance": "no"})"));
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("field 'sharing.rebalance'"), std::string::npos) << s.status().message();
  EXPECT_FALSE(DecodeSharing(Json::object())->within_queue);
  s = DecodeSharing(Json::parse(R"({"within_queue": true})"));
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_TRUE(s->within_queue);
  EXPECT_TRUE(DecodeSharing(EncodeSharing(*s))->within_queue);
  s = DecodeSharing(Json::parse(R"({"within_queue": 1})"));
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("field 'sharing.within_queue'"), std::string::npos) << s.status().message();
  EXPECT_EQ(DecodeSharing(Json::object())->budget_period_s, 60);
  s = DecodeSharing(Json::parse(R"({"budget_period_s": 300})"));
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_EQ(s->budget_period_s, 300);
  EXPECT_EQ(DecodeSharing(EncodeSharing(*s))->budget_period_s, 300);
  for (const char* bad : {R"({"budget_period_s": 0})", R"({"budget_period_s": 86401})", R"({"budget_period_s": 1.5})",
                          R"({"budget_period_s": "1m"})"}) {
    s = DecodeSharing(Json::parse(bad));
    ASSERT_FALSE(s.ok()) << bad;
    EXPECT_NE(s.status().message().find("field 'sharing.budget_period_s'"), std::string::npos) << s.status().message();
  }
}

TEST(QueueJson, BadInputGivesOneLineNamingTheField) {
  auto error = [](const char* text) {
    auto q = DecodeQueues(Json::parse(text));
    return q.ok() ? std::string("accepted") : q.status().message();
  };
  EXPECT_EQ(error(R"({"name": "a"})"), "field 'queues': expected a list of queues {name, parent, guarantee, ...}");
  EXPECT_EQ(error(R"([{"parent": "x"}])"), "field 'queues[0].name': missing");
  EXPECT_EQ(error(R"([{"name": "a b"}])"), "field 'queues[0].name': 'a b': character 2 is not one of [A-Za-z0-9._-]");
  EXPECT_EQ(error(R"([{"name": "a", "guarantee": {"gpus": -1}}])"), "field 'queues[0].guarantee.gpus': -1 is below 0");
  EXPECT_EQ(error(R"([{"name": "a", "guarantee": {"gpus": "many"}}])"), "field 'queues[0].guarantee.gpus': expected an integer");
  EXPECT_EQ(error(R"([{"name": "a", "limit": {"gpus": {"H800": 1.5}}}])"), "field 'queues[0].limit.gpus.H800': expected an integer");
  EXPECT_EQ(error(R"([{"name": "a", "guarantee": {"cpu_cores": 1, "cpu_milli": 1000}}])"),
            "field 'queues[0].guarantee.cpu_milli': give 'cpu_cores' or 'cpu_milli', not both");
  EXPECT_EQ(error(R"([{"name": "a", "weight": 0}])"), "field 'queues[0].weight': 0 is below 1");
  EXPECT_EQ(error(R"([{"name": "a", "max_priority": 1001}])"), "field 'queues[0].max_priority': 1001 is above 1000");
  EXPECT_EQ(error(R"([{"name": "a", "quota": 1}])"), "field 'queues[0].quota': unknown field");
  EXPECT_EQ(error(R"([{"name": "a", "reclaim": "yes"}])"), "field 'queues[0].reclaim': expected a boolean");
  EXPECT_EQ(error(R"([{"name": "a", "tenants": "alice"}])"), "field 'queues[0].tenants': expected a list of at most 10000 tenant names");
  EXPECT_EQ(error(R"([{"name": "a", "tenants": ["alice", "al ice"]}])"),
            "field 'queues[0].tenants[1]': 'al ice': character 3 is not one of [A-Za-z0-9._-]");
  EXPECT_EQ(error(R"([{"name": "a", "tenants": ["alice", "alice"]}])"), "field 'queues[0].tenants[1]': 'alice' is listed twice");
  auto sharing = DecodeSharing(Json::parse(R"({"reclaim_to": "everything"})"));
  ASSERT_FALSE(sharing.ok());
  EXPECT_EQ(sharing.status().message(), "field 'sharing.reclaim_to': 'everything' is not one of guarantee, fair-share");
}

}  // namespace
}  // namespace estuary

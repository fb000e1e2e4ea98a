// A relay's refused logins as audit events (docs/ssh.md "Refusals of a remote relay") in a real
// SQLite store: who they name, and the one form their text is stored in.
#include "access/relay_refusals.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "core/strings.h"
#include "sched/instance_table.h"
#include "store/sqlite_database.h"
#include "tests/support/temp_database.h"

namespace gpuwerk::access {
namespace {

using nlohmann::json;
using store::Transaction;

class RelayRefusalsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(db_.Open());
    ASSERT_TRUE(db_->Write([](Transaction& tx) -> core::Result<void> {
      for (const auto& [id, email] :
           {std::pair<std::string, std::string>{"per_a", "a@x.test"}, {"per_op", "op@x.test"}}) {
        GPUWERK_TRY(
            tx.Exec("INSERT INTO persons (id, email, email_norm, created_at) VALUES (?,?,?,?)",
                    {id, email, email, int64_t{1}}));
      }
      sched::InstanceRow in;
      in.id = "ins_a";
      in.person_id = "per_a";
      in.name = "alpha";
      in.ssh_key_id = "key_a";
      in.public_key = "ssh-ed25519 AAAA";
      in.gpu_type = "spark-1x";
      in.hostname = "alpha-aaaaa";
      in.image = "debian";
      in.created_at = 1;
      in.billing_session_id = "bil_a";
      return sched::InstanceTable::Insert(tx, in);
    }));
  }
  void TearDown() override { db_.reset(); }

  static protocol::RelayRefusalGroup Group(const std::string& person, const std::string& instance,
                                           const std::string& source) {
    return {.code = "upstream_unreachable",
            .user = "alpha-aaaaa",
            .key_fingerprint = "SHA256:abc",
            .person_id = person,
            .instance_id = instance,
            .source_address = source,
            .count = 2,
            .first_at = "2027-01-14T09:00:00Z",
            .last_at = "2027-01-14T09:00:40Z"};
  }
  void Record(const protocol::RelayRefusalGroup& g) {
    auto done = db_->Write(
        [&](Transaction& tx) { return RecordRelayRefusal(tx, clock_, rng_, "edge-1", g); });
    ASSERT_TRUE(done) << done.error().message;
  }
  /// The audit events of `action` from `source`: {actor_id, target, detail}.
  std::vector<json> Events(const std::string& action, const std::string& source) {
    auto rows = db_->Read([&](Transaction& tx) {
      return tx.Query(
          "SELECT actor_id, target, detail FROM audit_events WHERE action = ? AND "
          "source_address = ?",
          {action, source});
    });
    EXPECT_TRUE(rows) << rows.error().message;
    std::vector<json> out;
    if (!rows) return out;
    for (const auto& r : *rows) {
      out.push_back({{"actor_id", r.Text("actor_id")},
                     {"target", r.Text("target")},
                     {"detail", json::parse(r.Text("detail"))}});
    }
    return out;
  }

  testing::TempDatabase db_;
  core::FakeClock clock_;
  core::SodiumRng rng_;
};

// Breaker finding (relay refusal reports): a relay credential named the operator as the actor
// and stored ESC, a newline and U+202E in the target. The store decides who a refusal names.
TEST_F(RelayRefusalsTest, ActorAndTargetOnlyWhenTheStoreHasThatInstanceAsThatPersons) {
  Record(Group("per_a", "ins_a", "192.0.2.1"));   // what a relay really reports
  Record(Group("per_op", "ins_a", "192.0.2.2"));  // someone else's instance
  Record(Group("per_nobody", "ins_a", "192.0.2.3"));
  Record(Group("per_a", "", "192.0.2.4"));
  const std::string forged = "ins_\x1b[2J\x1b[31mFAKE\nroot@x:~# \u202e";
  auto mismatch = Group("per_op", forged, "192.0.2.5");
  mismatch.code = "upstream_host_key_mismatch";
  mismatch.expected_host_key = "\x1b]0;pwned\x07";
  mismatch.presented_host_key = std::string(512, 'x');
  Record(mismatch);

  const auto real = Events("relay_session.refused", "192.0.2.1");
  ASSERT_EQ(real.size(), 1u);
  EXPECT_EQ(real[0]["actor_id"], "per_a");
  EXPECT_EQ(real[0]["target"], "ins_a");
  EXPECT_FALSE(real[0]["detail"].contains("claimed_person_id")) << real[0];
  EXPECT_EQ(real[0]["detail"]["count"], 2);

  for (const char* source : {"192.0.2.2", "192.0.2.3", "192.0.2.4"}) {
    const auto e = Events("relay_session.refused", source);
    ASSERT_EQ(e.size(), 1u) << source;
    EXPECT_EQ(e[0]["actor_id"], "") << e[0];
    EXPECT_EQ(e[0]["target"], "") << e[0];
    EXPECT_TRUE(e[0]["detail"].contains("claimed_person_id")) << e[0];
    EXPECT_TRUE(e[0]["detail"].contains("claimed_instance_id")) << e[0];
  }
  EXPECT_EQ(Events("relay_session.refused", "192.0.2.2")[0]["detail"]["claimed_person_id"],
            "per_op");

  std::vector<json> forged_events = Events("relay_session.refused", "192.0.2.5");
  const auto host_key = Events("relay.host_key_mismatch", "192.0.2.5");
  forged_events.insert(forged_events.end(), host_key.begin(), host_key.end());
  ASSERT_EQ(forged_events.size(), 2u);
  for (const json& e : forged_events) {
    EXPECT_EQ(e["actor_id"], "") << e;
    EXPECT_EQ(e["target"], "") << e;
    EXPECT_EQ(e["detail"]["claimed_person_id"], "per_op") << e;
    EXPECT_EQ(e["detail"]["claimed_instance_id"], core::BoundedPrintable(forged)) << e;
    for (const auto& [key, value] : e["detail"].items()) {
      if (!value.is_string()) continue;
      EXPECT_FALSE(core::HasUnsafeText(value.get<std::string>())) << key;
      EXPECT_TRUE(core::IsBoundedPrintable(value.get<std::string>())) << key;
    }
  }
  EXPECT_EQ(host_key[0]["detail"]["expected"], "\\x1b]0;pwned\\x07");
}

// Breaker finding (relay refusal reports): the user name was escaped by the relay and again here.
// It is escaped once, by the relay; text in that form is kept, other text escaped.
TEST_F(RelayRefusalsTest, UserNameIsEscapedOnce) {
  auto g = Group("", "", "192.0.2.1");
  g.user = core::BoundedPrintable("x\x1b[31mEVIL\"\\ \u202e");  // as the relay writes it
  Record(g);
  EXPECT_EQ(Events("relay_session.refused", "192.0.2.1")[0]["detail"]["user"],
            "x\\x1b[31mEVIL\\\"\\\\ \\u{202e}");
  g.user = "raw\x1b[31m\n";  // a caller that passed raw text: escaped, never stored raw
  g.source_address = "192.0.2.2";
  Record(g);
  EXPECT_EQ(Events("relay_session.refused", "192.0.2.2")[0]["detail"]["user"], "raw\\x1b[31m\\n");
}

}  // namespace
}  // namespace gpuwerk::access

// store::CopyDatabase from a SQLite store into each backend (SQLite, and PostgreSQL on the run's
// server): every row of every table, value for value, in one transaction; and its refusals, each
// of which leaves the target as it was. The copy through the product's own code paths, read back
// through the API of a server on the copy: tests/integration/copy_database_test.cc.
#include "store/database_copy.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "store/internal/raw_statements.h"
#include "store/leader_lease.h"
#include "tests/support/postgres_server.h"
#include "tests/support/temp_database.h"

namespace gpuwerk::store {
namespace {

using testing::TestBackend;

/// Every row of every table of `db`, by table, in primary-key order (all columns).
std::map<std::string, std::vector<std::vector<Value>>> Everything(Database& db) {
  std::map<std::string, std::vector<std::vector<Value>>> all;
  auto tables = ReadSchema(db);
  EXPECT_TRUE(tables) << tables.error().message;
  if (!tables) return all;
  EXPECT_TRUE(db.Read([&](Transaction& tx) -> core::Result<void> {
    for (const auto& t : *tables) {
      std::string columns, key;
      for (const auto& c : t.columns) columns += (columns.empty() ? "" : ", ") + c.name;
      for (const auto& k : t.primary_key) key += (key.empty() ? "" : ", ") + k;
      GPUWERK_ASSIGN_OR_RETURN(auto* raw, internal::Raw(tx));
      GPUWERK_ASSIGN_OR_RETURN(
          all[t.name],
          raw->QueryRaw("SELECT " + columns + " FROM " + t.name +
                            (key.empty() ? " ORDER BY scope, subject, at" : " ORDER BY " + key),
                        {}));
    }
    return {};
  }));
  return all;
}

int64_t Count(Database& db, const std::string& table) {
  auto n = db.Read([&](Transaction& tx) -> core::Result<int64_t> {
    GPUWERK_ASSIGN_OR_RETURN(auto row, tx.QueryOne("SELECT COUNT(*) AS n FROM " + table));
    return row->Int("n");
  });
  EXPECT_TRUE(n) << n.error().message;
  return n ? *n : -1;
}

core::Result<void> Sql(Database& db, const std::string& sql) {
  return db.Write([&](Transaction& tx) { return tx.ExecScript(sql); });
}

class DatabaseCopyTest : public ::testing::TestWithParam<TestBackend> {
 protected:
  void SetUp() override {
    if (GetParam() == TestBackend::kPostgres) {
      if (auto why = testing::PostgresUnavailable()) GTEST_SKIP() << *why;
    }
    ASSERT_TRUE(source_.Open());
    ASSERT_TRUE(target_.Open({}, /*migrate=*/false));
  }

  /// A person, an SSH key, an instance with its billing session, a closed invoice with a line,
  /// audit events and a rate-limit event, with odd text and extreme amounts.
  void Fill() {
    const int64_t big = std::numeric_limits<int64_t>::max();
    const int64_t small = std::numeric_limits<int64_t>::min();
    ASSERT_TRUE(source_->Write([&](Transaction& tx) -> core::Result<void> {
      // Control bytes (no NUL), emoji, a right-to-left mark, quotes and a backslash.
      const std::string odd =
          "Zo\xC3\xAB \xF0\x9F\x9A\x80 \x01\x1f\x7f tab\tnl\n'\"\\ \xE2\x80\x8F";
      GPUWERK_TRY(tx.Exec(
          "INSERT INTO persons (id, email, email_norm, password_hash, is_operator, created_at, "
          "email_proven_at) VALUES (?, ?, ?, ?, 1, ?, NULL)",
          {std::string("per_1"), odd + "@x.test", std::string("zoe@x.test"),
           std::string("$argon2id$v=19$m=8,t=1,p=1$c2FsdA$aGFzaA"), int64_t{1'700'000'000}}));
      GPUWERK_TRY(tx.Exec(
          "INSERT INTO ssh_keys (id, person_id, name, key_type, bits, public_key, fingerprint, "
          "created_at, proven_at) VALUES ('key_1', 'per_1', ?, 'ssh-ed25519', 256, "
          "'ssh-ed25519 AAAA', 'SHA256:abc', 1700000001, NULL)",
          {odd}));
      GPUWERK_TRY(
          tx.Exec("UPDATE gpu_types SET price_minor_per_hour = ? WHERE name = 'spark-1x'", {big}));
      GPUWERK_TRY(tx.Exec(
          "INSERT INTO billing_sessions (id, instance_id, person_id, instance_name, gpu_type, "
          "price_minor_per_hour, currency, started_at, ended_at, billing_account_id, "
          "evidence_at) VALUES ('bs_1', 'ins_1', 'per_1', ?, 'spark-1x', ?, 'usd', 1, NULL, "
          "'solo_per_1', 2)",
          {odd, big}));
      GPUWERK_TRY(tx.Exec(
          "INSERT INTO instances (id, person_id, name, ssh_key_id, public_key, gpu_type, "
          "hostname, image, desired, status, created_at, billing_session_id) VALUES ('ins_1', "
          "'per_1', 'alpha', 'key_1', 'ssh-ed25519 AAAA', 'spark-1x', 'alpha-1', 'img', "
          "'running', 'running', 1, 'bs_1')"));
      GPUWERK_TRY(
          tx.Exec("INSERT INTO invoices (id, billing_account_id, month, currency, total_minor, "
                  "created_at) VALUES ('inv_1', 'solo_per_1', '2027-01', 'usd', ?, 3)",
                  {small}));
      GPUWERK_TRY(tx.Exec(
          "INSERT INTO invoice_lines (invoice_id, session_id, instance_id, instance_name, "
          "gpu_type, person_id, minutes, price_minor_per_hour, amount_minor) VALUES ('inv_1', "
          "'bs_1', 'ins_1', ?, 'spark-1x', 'per_1', 61, ?, ?)",
          {odd, big, small}));
      GPUWERK_TRY(
          tx.Exec("INSERT INTO invoice_months_closed (month, closed_at, invoices) VALUES "
                  "('2027-01', 4, 1)"));
      for (int i = 0; i < 1234; ++i) {  // more than a page of 500
        GPUWERK_TRY(
            tx.Exec("INSERT INTO audit_events (id, at, actor_id, action, target, source_address, "
                    "detail) VALUES (?, ?, ?, 'person.sign_in', 'per_1', '127.0.0.1', ?)",
                    {"aud_" + std::to_string(100000 + i), int64_t{i},
                     i % 2 ? Value(std::string("per_1")) : Value(kNull), odd + std::to_string(i)}));
      }
      GPUWERK_TRY(tx.Exec(
          "INSERT INTO rate_limit_events (scope, subject, at) VALUES ('sign_in', ?, 5)", {odd}));
      return {};
    }));
  }

  testing::TempDatabase source_{TestBackend::kSqlite};
  testing::TempDatabase target_{GetParam()};
};

INSTANTIATE_TEST_SUITE_P(Backends, DatabaseCopyTest,
                         ::testing::Values(TestBackend::kSqlite, TestBackend::kPostgres),
                         [](const auto& info) { return testing::BackendName(info.param); });

TEST_P(DatabaseCopyTest, CopiesEveryRowOfEveryTableValueForValue) {
  Fill();
  if (HasFatalFailure()) return;
  auto report = CopyDatabase(*source_, *target_);
  ASSERT_TRUE(report) << report.error().message;
  EXPECT_EQ(report->schema_version, LatestSchemaVersion());
  EXPECT_EQ(report->target_version_before, 0);
  auto target_version = SchemaVersion(*target_);
  ASSERT_TRUE(target_version);
  EXPECT_EQ(*target_version, LatestSchemaVersion());

  const auto before = Everything(*source_);
  const auto after = Everything(*target_);
  ASSERT_EQ(before.size(), after.size());
  for (const auto& [table, rows] : before) {
    ASSERT_TRUE(after.contains(table)) << table;
    EXPECT_EQ(rows, after.at(table)) << table;
  }
  EXPECT_EQ(after.at("audit_events").size(), 1234u);
  EXPECT_EQ(after.at("schema_migrations").size(), static_cast<size_t>(LatestSchemaVersion()));

  // The report: every table once, parents first, its row count.
  std::map<std::string, int64_t> rows;
  size_t persons_at = 0, instances_at = 0, lines_at = 0, invoices_at = 0;
  for (size_t i = 0; i < report->tables.size(); ++i) {
    rows[report->tables[i].name] = report->tables[i].rows;
    if (report->tables[i].name == "persons") persons_at = i;
    if (report->tables[i].name == "instances") instances_at = i;
    if (report->tables[i].name == "invoice_lines") lines_at = i;
    if (report->tables[i].name == "invoices") invoices_at = i;
  }
  EXPECT_EQ(rows.size(), before.size());
  EXPECT_LT(persons_at, instances_at);
  EXPECT_LT(invoices_at, lines_at);
  EXPECT_EQ(rows["audit_events"], 1234);
  EXPECT_EQ(rows["gpu_types"], 2);
  EXPECT_EQ(rows["persons"], 1);
  int64_t total = 0;
  for (const auto& [name, n] : rows) total += n;
  EXPECT_EQ(report->rows, total);
}

TEST_P(DatabaseCopyTest, AcceptsATargetThatWasOnlyMigrated) {
  Fill();
  if (HasFatalFailure()) return;
  ASSERT_TRUE(Migrate(*target_));  // `gpuwerk admin migrate` first: only the migrations' rows
  auto report = CopyDatabase(*source_, *target_);
  ASSERT_TRUE(report) << report.error().message;
  EXPECT_EQ(report->target_version_before, LatestSchemaVersion());
  EXPECT_EQ(Everything(*source_), Everything(*target_));
}

TEST_P(DatabaseCopyTest, RefusesANonEmptyTargetAndChangesNothing) {
  Fill();
  if (HasFatalFailure()) return;
  ASSERT_TRUE(Migrate(*target_));
  ASSERT_TRUE(Sql(*target_,
                  "INSERT INTO persons (id, email, email_norm, created_at) VALUES ('per_9', "
                  "'a@x.test', 'a@x.test', 1);"
                  "UPDATE gpu_types SET price_minor_per_hour = 1 WHERE name = 'spark-2x'"));
  const auto before = Everything(*target_);
  auto refused = CopyDatabase(*source_, *target_);
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().api_code, "target_not_empty");
  EXPECT_NE(refused.error().message.find("persons (1 row)"), std::string::npos)
      << refused.error().message;
  EXPECT_NE(refused.error().message.find("gpu_types (1 row)"), std::string::npos)
      << refused.error().message;
  EXPECT_EQ(Everything(*target_), before);
}

TEST_P(DatabaseCopyTest, RefusesASourceNewerOrOlderThanThisBuild) {
  Fill();
  if (HasFatalFailure()) return;
  const int latest = LatestSchemaVersion();
  ASSERT_TRUE(Sql(*source_, "INSERT INTO schema_migrations (version, applied_at) VALUES (" +
                                std::to_string(latest + 1) + ", 1)"));
  auto newer = CopyDatabase(*source_, *target_);
  ASSERT_FALSE(newer);
  EXPECT_EQ(newer.error().api_code, "schema_too_new");
  auto version = SchemaVersion(*target_);
  ASSERT_TRUE(version);
  EXPECT_EQ(*version, 0) << "the target was changed";

  ASSERT_TRUE(
      Sql(*source_, "DELETE FROM schema_migrations WHERE version >= " + std::to_string(latest)));
  auto older = CopyDatabase(*source_, *target_);
  ASSERT_FALSE(older);
  EXPECT_EQ(older.error().api_code, "schema_too_old");
  EXPECT_NE(older.error().message.find("gpuwerk admin migrate"), std::string::npos);
  version = SchemaVersion(*target_);
  ASSERT_TRUE(version);
  EXPECT_EQ(*version, 0) << "the target was changed";
}

TEST_P(DatabaseCopyTest, RefusesATableOnOneSideOnlyNamingIt) {
  ASSERT_TRUE(Sql(*source_, "CREATE TABLE notes (id TEXT PRIMARY KEY)"));
  auto source_only = CopyDatabase(*source_, *target_);
  ASSERT_FALSE(source_only);
  EXPECT_EQ(source_only.error().api_code, "schema_mismatch");
  EXPECT_NE(source_only.error().message.find("notes"), std::string::npos);
  ASSERT_TRUE(Sql(*source_, "DROP TABLE notes"));

  ASSERT_TRUE(Sql(*target_, "CREATE TABLE someone_elses (id TEXT PRIMARY KEY)"));
  auto target_only = CopyDatabase(*source_, *target_);
  ASSERT_FALSE(target_only);
  EXPECT_EQ(target_only.error().api_code, "schema_mismatch");
  EXPECT_NE(target_only.error().message.find("someone_elses"), std::string::npos);
  auto version = SchemaVersion(*target_);
  ASSERT_TRUE(version);
  EXPECT_EQ(*version, 0) << "the target was changed";
}

TEST_P(DatabaseCopyTest, RefusesADatabaseAServerHoldsALeaseOn) {
  // A lease that runs out in a day, as a running server's would (renewed every few seconds).
  ASSERT_TRUE(source_->Write([](Transaction& tx) -> core::Result<void> {
    GPUWERK_ASSIGN_OR_RETURN(const int64_t now, DatabaseClock("sqlite")(tx));
    GPUWERK_TRY(
        tx.Exec("INSERT INTO leader_leases (name, holder, epoch, expires_at_ms, acquired_at_ms, "
                "renewed_at_ms) VALUES ('scheduler', 'host/rep_1', 3, ?, ?, ?)",
                {now + 86'400'000, now, now}));
    return {};
  }));
  auto refused = CopyDatabase(*source_, *target_);
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().api_code, "database_in_use");
  EXPECT_NE(refused.error().message.find("host/rep_1"), std::string::npos);

  // Given up (a server stopped cleanly): copied, lease row and epoch included.
  ASSERT_TRUE(Sql(*source_, "UPDATE leader_leases SET expires_at_ms = 0"));
  auto copied = CopyDatabase(*source_, *target_);
  ASSERT_TRUE(copied) << copied.error().message;
  EXPECT_EQ(Count(*target_, "leader_leases"), 1);
}

TEST_P(DatabaseCopyTest, RefusesAValueTheTargetCannotHoldAndCopiesNothing) {
  Fill();
  if (HasFatalFailure()) return;
  // SQLite keeps text in a BIGINT column as text.
  ASSERT_TRUE(Sql(*source_, "UPDATE invoices SET total_minor = 'twelve'"));
  auto text_in_bigint = CopyDatabase(*source_, *target_);
  ASSERT_FALSE(text_in_bigint);
  EXPECT_EQ(text_in_bigint.error().api_code, "value_not_copyable");
  EXPECT_NE(text_in_bigint.error().message.find("invoices.total_minor"), std::string::npos)
      << text_in_bigint.error().message;
  EXPECT_NE(text_in_bigint.error().message.find("inv_1"), std::string::npos)
      << text_in_bigint.error().message;
  // The target was migrated, and holds nothing else.
  EXPECT_EQ(Count(*target_, "persons"), 0);
  EXPECT_EQ(Count(*target_, "audit_events"), 0);
  ASSERT_TRUE(Sql(*source_, "UPDATE invoices SET total_minor = 12"));

  ASSERT_TRUE(Sql(*source_,
                  "UPDATE persons SET password_hash = CAST('a' || char(0) || 'b' AS "
                  "TEXT)"));
  auto nul = CopyDatabase(*source_, *target_);
  ASSERT_FALSE(nul);
  EXPECT_EQ(nul.error().api_code, "value_not_copyable");
  EXPECT_NE(nul.error().message.find("persons.password_hash"), std::string::npos)
      << nul.error().message;

  ASSERT_TRUE(Sql(*source_, "UPDATE persons SET password_hash = X'00FF'"));
  auto blob = CopyDatabase(*source_, *target_);
  ASSERT_FALSE(blob);
  EXPECT_EQ(blob.error().api_code, "value_not_copyable");
  EXPECT_NE(blob.error().message.find("blob"), std::string::npos) << blob.error().message;
  EXPECT_EQ(Count(*target_, "persons"), 0);

  ASSERT_TRUE(Sql(*source_, "UPDATE persons SET password_hash = NULL"));
  auto copied = CopyDatabase(*source_, *target_);
  ASSERT_TRUE(copied) << copied.error().message;
  EXPECT_EQ(Everything(*source_), Everything(*target_));
}

}  // namespace
}  // namespace gpuwerk::store

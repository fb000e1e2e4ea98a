// `gpuwerk admin migrate` (MigrateStore) on the test backend (GPUWERK_TEST_DATABASE: SQLite by
// default, or PostgreSQL on a server the test starts).
#include "app/admin_migrate.h"

#include <gtest/gtest.h>

#include <sstream>

#include "store/database.h"
#include "store/open_database.h"
#include "tests/support/temp_database.h"
#include "tests/support/temp_dir.h"

namespace gpuwerk::app {
namespace {

class AdminMigrateTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(db_.Open({}, /*migrate=*/false));
    config_.data_dir = db_.dir() / "data";
    // SQLite: the server's default file in the data directory; PostgreSQL: the test database.
    config_.database = db_.url();
  }
  testing::TempDatabase db_;
  ServerConfig config_;
};

TEST_F(AdminMigrateTest, MigratesAnEmptyStoreThenHasNothingToDo) {
  std::ostringstream out;
  auto first = MigrateStore(config_, out);
  ASSERT_TRUE(first) << first.error().message;
  EXPECT_EQ(first->before, 0);
  EXPECT_EQ(first->after, store::LatestSchemaVersion());
  EXPECT_NE(out.str().find("migrations applied"), std::string::npos) << out.str();

  std::ostringstream again;
  auto second = MigrateStore(config_, again);
  ASSERT_TRUE(second) << second.error().message;
  EXPECT_EQ(second->before, store::LatestSchemaVersion());
  EXPECT_NE(again.str().find("nothing to do"), std::string::npos) << again.str();
}

TEST_F(AdminMigrateTest, RefusesASchemaNewerThanThisBuildAndChangesNothing) {
  std::ostringstream out;
  ASSERT_TRUE(MigrateStore(config_, out));
  {
    // A newer gpuwerk's migration, written through a handle of our own.
    auto db = store::OpenDatabase(config_.database, (config_.data_dir / "gpuwerk.db").string());
    ASSERT_TRUE(db) << db.error().message;
    ASSERT_TRUE((*db)->Write([](store::Transaction& tx) -> core::Result<void> {
      GPUWERK_TRY(tx.Exec("INSERT INTO schema_migrations (version, applied_at) VALUES (?, ?)",
                          {int64_t{store::LatestSchemaVersion() + 1}, int64_t{1}}));
      return {};
    }));
  }
  auto refused = MigrateStore(config_, out);
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().api_code, "schema_too_new");
  EXPECT_NE(refused.error().message.find("newer"), std::string::npos);
}

}  // namespace
}  // namespace gpuwerk::app

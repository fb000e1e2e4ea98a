#pragma once

// Test support for sched's unit tests (not part of the library): a migrated SQLite store in a
// temp dir of its own per test (tests/support/temp_database.h), a FakeClock, and people with SSH
// keys.

#include <gtest/gtest.h>

#include <string>

#include "core/clock.h"
#include "core/logging.h"
#include "core/random.h"
#include "tests/support/temp_database.h"

namespace gpuwerk::sched {

/// Base fixture: `db_` open and migrated. Derived fixtures call SchedStoreTest::SetUp() first,
/// then build their services; their TearDown drops the services before SchedStoreTest's.
class SchedStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    core::InitCrypto();
    ASSERT_TRUE(db_.Open());
  }
  void TearDown() override { db_.reset(); }

  /// A person `id` with the email `<id>@example.test`.
  void AddPerson(const std::string& id) {
    ASSERT_TRUE(db_->Write([&](store::Transaction& tx) -> core::Result<void> {
      GPUWERK_TRY(
          tx.Exec("INSERT INTO persons (id, email, email_norm, created_at) VALUES (?, ?, ?, 0)",
                  {id, id + "@example.test", id + "@example.test"}));
      return {};
    }));
  }
  /// An ed25519 key named "laptop" of `person` with id `id` (fingerprint "SHA256:<id>").
  void AddKey(const std::string& person, const std::string& id) {
    ASSERT_TRUE(db_->Write([&](store::Transaction& tx) -> core::Result<void> {
      GPUWERK_TRY(
          tx.Exec("INSERT INTO ssh_keys (id, person_id, name, key_type, bits, public_key, "
                  "fingerprint, created_at) VALUES (?, ?, 'laptop', 'ssh-ed25519', 256, ?, ?, 0)",
                  {id, person, "ssh-ed25519 AAAA" + id + " laptop\n", "SHA256:" + id}));
      return {};
    }));
  }

  gpuwerk::testing::TempDatabase db_;
  core::FakeClock clock_;
  core::SodiumRng rng_;
};

}  // namespace gpuwerk::sched

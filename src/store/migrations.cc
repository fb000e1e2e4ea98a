// The schema, as an ordered list of migrations. Each is applied once, in its own transaction.
// SQL here must run unchanged on SQLite and PostgreSQL: BIGINT for integers (Unix seconds,
// minor units, 0/1 flags), TEXT for ids and strings, no AUTOINCREMENT/SERIAL (ids are random
// text from core::NewId), no backend-specific functions.
#include <spdlog/spdlog.h>

#include <string>
#include <vector>

#include "store/database.h"

namespace gpuwerk::store {
namespace {

const std::vector<std::string>& Migrations() {
  static const std::vector<std::string> kMigrations = {
      // 1: accounts, credentials, SSH keys, mail outbox, audit log.
      R"sql(
CREATE TABLE persons (
  id TEXT PRIMARY KEY,
  email TEXT NOT NULL,
  email_norm TEXT NOT NULL UNIQUE,
  password_hash TEXT,
  is_operator BIGINT NOT NULL DEFAULT 0,
  created_at BIGINT NOT NULL
);
CREATE TABLE sign_in_sessions (
  token_hash TEXT PRIMARY KEY,
  person_id TEXT NOT NULL REFERENCES persons(id) ON DELETE CASCADE,
  created_at BIGINT NOT NULL,
  expires_at BIGINT NOT NULL,
  source_address TEXT NOT NULL
);
CREATE INDEX sign_in_sessions_person ON sign_in_sessions(person_id);
CREATE INDEX sign_in_sessions_expiry ON sign_in_sessions(expires_at);
CREATE TABLE api_tokens (
  id TEXT PRIMARY KEY,
  person_id TEXT NOT NULL REFERENCES persons(id) ON DELETE CASCADE,
  name TEXT NOT NULL,
  token_hash TEXT NOT NULL UNIQUE,
  prefix TEXT NOT NULL,
  created_at BIGINT NOT NULL,
  last_used_at BIGINT,
  UNIQUE (person_id, name)
);
CREATE TABLE link_tokens (
  token_hash TEXT PRIMARY KEY,
  person_id TEXT NOT NULL REFERENCES persons(id) ON DELETE CASCADE,
  purpose TEXT NOT NULL,
  created_at BIGINT NOT NULL,
  expires_at BIGINT NOT NULL,
  used_at BIGINT
);
CREATE TABLE rate_limit_events (
  scope TEXT NOT NULL,
  subject TEXT NOT NULL,
  at BIGINT NOT NULL
);
CREATE INDEX rate_limit_events_lookup ON rate_limit_events(scope, subject, at);
CREATE TABLE ssh_keys (
  id TEXT PRIMARY KEY,
  person_id TEXT NOT NULL REFERENCES persons(id) ON DELETE CASCADE,
  name TEXT NOT NULL,
  key_type TEXT NOT NULL,
  bits BIGINT NOT NULL,
  public_key TEXT NOT NULL,
  fingerprint TEXT NOT NULL,
  created_at BIGINT NOT NULL,
  UNIQUE (person_id, name),
  UNIQUE (person_id, fingerprint)
);
CREATE INDEX ssh_keys_by_person ON ssh_keys(person_id, created_at, id);
CREATE TABLE outbox_mails (
  id TEXT PRIMARY KEY,
  to_address TEXT NOT NULL,
  subject TEXT NOT NULL,
  text_body TEXT NOT NULL,
  html_body TEXT NOT NULL,
  created_at BIGINT NOT NULL,
  attempts BIGINT NOT NULL DEFAULT 0,
  next_attempt_at BIGINT NOT NULL,
  sent_at BIGINT,
  last_error TEXT
);
CREATE INDEX outbox_mails_due ON outbox_mails(sent_at, next_attempt_at);
CREATE TABLE audit_events (
  id TEXT PRIMARY KEY,
  at BIGINT NOT NULL,
  actor_id TEXT,
  action TEXT NOT NULL,
  target TEXT NOT NULL,
  source_address TEXT NOT NULL,
  detail TEXT NOT NULL
);
CREATE INDEX audit_events_at ON audit_events(at);
)sql",
  };
  return kMigrations;
}

}  // namespace

int LatestSchemaVersion() { return static_cast<int>(Migrations().size()); }

core::Result<void> Migrate(Database& db) {
  GPUWERK_TRY(db.Write([](Transaction& tx) -> core::Result<void> {
    return tx.ExecScript(
        "CREATE TABLE IF NOT EXISTS schema_migrations (version BIGINT PRIMARY KEY, "
        "applied_at BIGINT NOT NULL)");
  }));
  const auto& all = Migrations();
  for (size_t i = 0; i < all.size(); ++i) {
    const int64_t version = static_cast<int64_t>(i + 1);
    auto applied = db.Write([&](Transaction& tx) -> core::Result<bool> {
      GPUWERK_ASSIGN_OR_RETURN(auto row, tx.QueryOne("SELECT version FROM schema_migrations "
                                                     "WHERE version = ?",
                                                     {version}));
      if (row) return false;
      GPUWERK_TRY(tx.ExecScript(all[i]));
      GPUWERK_TRY(tx.Exec("INSERT INTO schema_migrations (version, applied_at) VALUES (?, ?)",
                          {version, static_cast<int64_t>(time(nullptr))}));
      return true;
    });
    if (!applied) {
      return core::Internal("migration " + std::to_string(version) +
                            " failed: " + applied.error().message);
    }
    if (*applied) spdlog::info("store: applied migration {}", version);
  }
  return {};
}

}  // namespace gpuwerk::store

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
      // 2: GPU types, hosts, instances, placements, observed containers, billing sessions
      // (issue 3). One instance per host is enforced here by UNIQUE(host_id) on placements.
      R"sql(
CREATE TABLE gpu_types (
  name TEXT PRIMARY KEY,
  description TEXT NOT NULL,
  hosts_per_instance BIGINT NOT NULL,
  price_minor_per_hour BIGINT NOT NULL,
  currency TEXT NOT NULL
);
INSERT INTO gpu_types (name, description, hosts_per_instance, price_minor_per_hour, currency)
  VALUES ('spark-1x', 'One DGX Spark: one GB10 GPU, 128 GB unified memory', 1, 65, 'usd');
INSERT INTO gpu_types (name, description, hosts_per_instance, price_minor_per_hour, currency)
  VALUES ('spark-2x', 'Two DGX Sparks linked by a 200 Gb/s RoCE fabric', 2, 150, 'usd');
CREATE TABLE hosts (
  id TEXT PRIMARY KEY,
  name TEXT NOT NULL UNIQUE,
  gpu_type TEXT NOT NULL REFERENCES gpu_types(name),
  token_hash TEXT NOT NULL UNIQUE,
  gpu_required BIGINT NOT NULL DEFAULT 1,
  drained BIGINT NOT NULL DEFAULT 0,
  created_at BIGINT NOT NULL,
  last_seen_at BIGINT,
  inventory TEXT NOT NULL DEFAULT '{}',
  engine_error TEXT NOT NULL DEFAULT ''
);
CREATE TABLE billing_sessions (
  id TEXT PRIMARY KEY,
  instance_id TEXT NOT NULL,
  person_id TEXT NOT NULL REFERENCES persons(id),
  instance_name TEXT NOT NULL,
  gpu_type TEXT NOT NULL,
  price_minor_per_hour BIGINT NOT NULL,
  currency TEXT NOT NULL,
  started_at BIGINT NOT NULL,
  ended_at BIGINT
);
CREATE INDEX billing_sessions_by_person ON billing_sessions(person_id, started_at, id);
CREATE TABLE instances (
  id TEXT PRIMARY KEY,
  person_id TEXT NOT NULL REFERENCES persons(id),
  name TEXT NOT NULL,
  ssh_key_id TEXT NOT NULL,
  public_key TEXT NOT NULL,
  gpu_type TEXT NOT NULL REFERENCES gpu_types(name),
  hostname TEXT NOT NULL UNIQUE,
  image TEXT NOT NULL,
  desired TEXT NOT NULL,
  restart_generation BIGINT NOT NULL DEFAULT 0,
  status TEXT NOT NULL,
  status_reason TEXT NOT NULL DEFAULT '',
  created_at BIGINT NOT NULL,
  deleted_at BIGINT,
  billing_session_id TEXT NOT NULL
);
CREATE UNIQUE INDEX instances_live_name ON instances(person_id, name) WHERE deleted_at IS NULL;
CREATE INDEX instances_by_person ON instances(person_id, created_at, id);
CREATE INDEX instances_by_key ON instances(ssh_key_id);
CREATE TABLE placements (
  instance_id TEXT NOT NULL REFERENCES instances(id),
  host_id TEXT NOT NULL REFERENCES hosts(id),
  node_index BIGINT NOT NULL,
  PRIMARY KEY (instance_id, node_index),
  UNIQUE (host_id)
);
CREATE TABLE observed_containers (
  instance_id TEXT NOT NULL REFERENCES instances(id),
  node_index BIGINT NOT NULL,
  host_id TEXT NOT NULL,
  container_id TEXT NOT NULL,
  state TEXT NOT NULL,
  exit_code BIGINT NOT NULL DEFAULT 0,
  started_at TEXT NOT NULL DEFAULT '',
  ssh_port BIGINT NOT NULL DEFAULT 0,
  ssh_ready BIGINT NOT NULL DEFAULT 0,
  restart_generation BIGINT NOT NULL DEFAULT 0,
  error TEXT NOT NULL DEFAULT '',
  observed_at BIGINT NOT NULL,
  PRIMARY KEY (instance_id, node_index)
);
)sql",
      // 3: hosts that must get no new instances (case C13), and why.
      R"sql(
ALTER TABLE hosts ADD COLUMN degraded_reason TEXT NOT NULL DEFAULT '';
)sql",
      // 4: the queue (issue 5, R-11, R-12) and idempotent creates. `seq` orders a GPU type's
      // queue strictly FIFO and never changes, so an entry put back after a failed launch keeps
      // its place; UNIQUE (gpu_type, seq) makes two concurrent joins that drew the same number
      // conflict (one retries) instead of sharing a place. At most one open entry per person
      // and type, and open entries' names are unique per person (R-6, with instances checked
      // in the same transaction by the services).
      R"sql(
CREATE TABLE queue_entries (
  id TEXT PRIMARY KEY,
  person_id TEXT NOT NULL REFERENCES persons(id),
  gpu_type TEXT NOT NULL REFERENCES gpu_types(name),
  seq BIGINT NOT NULL,
  name TEXT NOT NULL,
  ssh_key_id TEXT NOT NULL,
  status TEXT NOT NULL,
  entered_at BIGINT NOT NULL,
  left_at BIGINT,
  instance_id TEXT,
  last_failure TEXT NOT NULL DEFAULT '',
  launch_attempts BIGINT NOT NULL DEFAULT 0,
  passed_over_at BIGINT,
  UNIQUE (gpu_type, seq)
);
CREATE UNIQUE INDEX queue_entries_open_per_type ON queue_entries(person_id, gpu_type)
  WHERE status = 'open';
CREATE UNIQUE INDEX queue_entries_open_name ON queue_entries(person_id, name)
  WHERE status = 'open';
CREATE INDEX queue_entries_drain ON queue_entries(gpu_type, status, seq);
CREATE INDEX queue_entries_by_person ON queue_entries(person_id, entered_at, id);
CREATE INDEX queue_entries_by_key ON queue_entries(ssh_key_id, status);
CREATE INDEX queue_entries_by_instance ON queue_entries(instance_id);
CREATE TABLE idempotency_keys (
  person_id TEXT NOT NULL REFERENCES persons(id),
  idem_key TEXT NOT NULL,
  request_hash TEXT NOT NULL,
  status BIGINT NOT NULL,
  response TEXT NOT NULL,
  created_at BIGINT NOT NULL,
  PRIMARY KEY (person_id, idem_key)
);
CREATE INDEX idempotency_keys_created ON idempotency_keys(created_at);
)sql",
      // 5: linked host pairs (R-7, R-8, issue 5). A spark-2x instance takes the two hosts of one
      // pair; each member carries its rail (fabric) address. A host belongs to at most one pair
      // (host_id is the key), and a pair has exactly the node indexes 0 and 1.
      R"sql(
CREATE TABLE host_pairs (
  id TEXT PRIMARY KEY,
  created_at BIGINT NOT NULL
);
CREATE TABLE host_pair_members (
  host_id TEXT PRIMARY KEY REFERENCES hosts(id),
  pair_id TEXT NOT NULL REFERENCES host_pairs(id),
  node_index BIGINT NOT NULL,
  rail_address TEXT NOT NULL,
  UNIQUE (pair_id, node_index)
);
)sql",
      // 6: relay sessions (R-10, issue 4): one row per SSH connection through a relay, written
      // when it starts and completed when it ends, listed for the instance's owner and the
      // operator. `id` is given by the relay that carried it, so a remote relay's report can be
      // retried without making a second row.
      R"sql(
CREATE TABLE relay_sessions (
  id TEXT PRIMARY KEY,
  relay TEXT NOT NULL,
  person_id TEXT NOT NULL,
  key_fingerprint TEXT NOT NULL,
  instance_id TEXT NOT NULL,
  hostname TEXT NOT NULL,
  login TEXT NOT NULL,
  source_address TEXT NOT NULL,
  started_at BIGINT NOT NULL,
  ended_at BIGINT,
  bytes_from_client BIGINT NOT NULL DEFAULT 0,
  bytes_to_client BIGINT NOT NULL DEFAULT 0,
  end_reason TEXT NOT NULL DEFAULT ''
);
CREATE INDEX relay_sessions_by_instance ON relay_sessions(instance_id, started_at, id);
CREATE INDEX relay_sessions_by_person ON relay_sessions(person_id, started_at, id);
CREATE INDEX relay_sessions_by_start ON relay_sessions(started_at, id);
CREATE INDEX relay_sessions_open ON relay_sessions(relay, ended_at);
)sql",
      // 7: the hosts of a GPU type in name order (issue 5): a drain that looks for every free
      // slot of a type (launch.cc FreeSlots) walks only that type's hosts, not the whole table.
      R"sql(
CREATE INDEX hosts_by_type ON hosts(gpu_type, name);
)sql",
      // 8: API tokens may expire (issue 11): NULL never expires; a token whose expires_at has
      // passed is refused (docs/accounts.md).
      R"sql(
ALTER TABLE api_tokens ADD COLUMN expires_at BIGINT;
)sql",
      // 9: a person's address is proven by a mailed link (issue 11, docs/accounts.md "Address
      // proof"): NULL until then. Accounts made before this migration count as proven (they
      // were made under the old rules, which the operator accepted), so an upgrade locks
      // nobody out; their proof time is their creation time.
      R"sql(
ALTER TABLE persons ADD COLUMN email_proven_at BIGINT;
UPDATE persons SET email_proven_at = created_at;
)sql",
      // 10: a public key belongs to one account at most (R-4, issue 11). Where several accounts
      // hold one key (fingerprint), the first registration (created_at, then id) keeps it and the
      // later rows go: their instances keep running, but the relay no longer reaches them with
      // that key, and their queue entries wait with "its SSH key is gone" (docs/ssh-keys.md).
      R"sql(
DELETE FROM ssh_keys WHERE EXISTS (
  SELECT 1 FROM ssh_keys AS earlier
  WHERE earlier.fingerprint = ssh_keys.fingerprint
    AND (earlier.created_at < ssh_keys.created_at
         OR (earlier.created_at = ssh_keys.created_at AND earlier.id < ssh_keys.id))
);
CREATE UNIQUE INDEX ssh_keys_one_account ON ssh_keys(fingerprint);
)sql",
      // 11: drift (docs/instances.md "Changes outside gpuwerk"): the last change made to an
      // instance's container outside gpuwerk, how many there were, whether the status reason still
      // shows it, and when its owner was last mailed about one (one mail per hour per instance).
      R"sql(
ALTER TABLE instances ADD COLUMN drift_kind TEXT NOT NULL DEFAULT '';
ALTER TABLE instances ADD COLUMN drift_reason TEXT NOT NULL DEFAULT '';
ALTER TABLE instances ADD COLUMN drift_at BIGINT;
ALTER TABLE instances ADD COLUMN drift_count BIGINT NOT NULL DEFAULT 0;
ALTER TABLE instances ADD COLUMN drift_in_status BIGINT NOT NULL DEFAULT 0;
ALTER TABLE instances ADD COLUMN drift_mailed_at BIGINT;
)sql",
      // 12: teams (R-15, issue 13 item 5; docs/teams.md), owned by teams/: a team, its
      // memberships (kept after a member leaves or is removed, for usage and the audit; one active
      // membership per person by the partial unique index) and its email invitations (one
      // pending per team and address; the mailed link's secret stored only as SHA-256). Person
      // ids are not foreign keys, so a removed member's or a deleted account's rows stay. The
      // audit log's reads (GET /api/v1/admin/audit) filter by actor and by target.
      R"sql(
CREATE TABLE teams (
  id TEXT PRIMARY KEY,
  name TEXT NOT NULL,
  name_norm TEXT NOT NULL UNIQUE,
  created_by TEXT NOT NULL,
  created_at BIGINT NOT NULL
);
CREATE TABLE team_members (
  id TEXT PRIMARY KEY,
  team_id TEXT NOT NULL REFERENCES teams(id),
  person_id TEXT NOT NULL,
  role TEXT NOT NULL,
  joined_at BIGINT NOT NULL,
  ended_at BIGINT,
  ended_how TEXT NOT NULL DEFAULT '',
  ended_by TEXT NOT NULL DEFAULT ''
);
CREATE UNIQUE INDEX team_members_one_active ON team_members(person_id) WHERE ended_at IS NULL;
CREATE INDEX team_members_by_team ON team_members(team_id, joined_at, id);
CREATE TABLE team_invites (
  id TEXT PRIMARY KEY,
  team_id TEXT NOT NULL REFERENCES teams(id),
  email TEXT NOT NULL,
  email_norm TEXT NOT NULL,
  token_hash TEXT NOT NULL UNIQUE,
  invited_by TEXT NOT NULL,
  created_at BIGINT NOT NULL,
  sent_at BIGINT NOT NULL,
  expires_at BIGINT NOT NULL,
  state TEXT NOT NULL,
  ended_at BIGINT,
  accepted_by TEXT NOT NULL DEFAULT ''
);
CREATE UNIQUE INDEX team_invites_one_pending ON team_invites(team_id, email_norm)
  WHERE state = 'pending';
CREATE INDEX audit_events_by_actor ON audit_events(actor_id, at, id);
CREATE INDEX audit_events_by_target ON audit_events(target, at, id);
)sql",
      // 13: billing (issue 13, docs/billing.md): who pays for a session (a person's own account
      // is 'solo_' + its person id; teams move sessions to theirs), the evidence that metering
      // bills on (last sighting of the instance's node 0 host, and its container's start time
      // then), the unbilled gaps of silent hosts, and the monthly invoices with one line per
      // session and month; UNIQUE (billing_account_id, month, currency) makes closing a month
      // twice make one invoice.
      R"sql(
ALTER TABLE billing_sessions ADD COLUMN billing_account_id TEXT NOT NULL DEFAULT '';
UPDATE billing_sessions SET billing_account_id = 'solo_' || person_id;
ALTER TABLE billing_sessions ADD COLUMN evidence_at BIGINT NOT NULL DEFAULT 0;
UPDATE billing_sessions SET evidence_at = COALESCE(ended_at, (
  SELECT MAX(h.last_seen_at) FROM instances i
  JOIN placements p ON p.instance_id = i.id AND p.node_index = 0
  JOIN hosts h ON h.id = p.host_id
  WHERE i.billing_session_id = billing_sessions.id), started_at);
ALTER TABLE billing_sessions ADD COLUMN evidence_container_started TEXT NOT NULL DEFAULT '';
CREATE INDEX billing_sessions_by_account ON billing_sessions(billing_account_id, started_at, id);
CREATE INDEX billing_sessions_by_end ON billing_sessions(ended_at);
CREATE TABLE billing_gaps (
  session_id TEXT NOT NULL REFERENCES billing_sessions(id),
  from_at BIGINT NOT NULL,
  to_at BIGINT NOT NULL,
  PRIMARY KEY (session_id, from_at)
);
CREATE TABLE invoices (
  id TEXT PRIMARY KEY,
  billing_account_id TEXT NOT NULL,
  month TEXT NOT NULL,
  currency TEXT NOT NULL,
  total_minor BIGINT NOT NULL,
  created_at BIGINT NOT NULL,
  UNIQUE (billing_account_id, month, currency)
);
CREATE INDEX invoices_by_month ON invoices(month, billing_account_id);
CREATE TABLE invoice_lines (
  invoice_id TEXT NOT NULL REFERENCES invoices(id),
  session_id TEXT NOT NULL REFERENCES billing_sessions(id),
  instance_id TEXT NOT NULL,
  instance_name TEXT NOT NULL,
  gpu_type TEXT NOT NULL,
  person_id TEXT NOT NULL,
  minutes BIGINT NOT NULL,
  price_minor_per_hour BIGINT NOT NULL,
  amount_minor BIGINT NOT NULL,
  PRIMARY KEY (invoice_id, session_id)
);
CREATE TABLE invoice_months_closed (
  month TEXT PRIMARY KEY,
  closed_at BIGINT NOT NULL,
  invoices BIGINT NOT NULL
);
)sql",
      // 14: where the relay connects for a host's instances, as the operator registered it (issue
      // 12 finding 1: never the agent's own report): the address of its published sshd ports (an
      // IP literal or DNS name; '' until registered, and the relay refuses such a host's instances)
      // and the range those ports may use (1..65535; 0 and 0 while none is registered). Hosts made
      // before this migration have none: the operator registers them (`gpuwerk admin hosts
      // set-ssh`), `gpuwerk up` does at its next start (docs/ssh.md "Upstream address").
      R"sql(
ALTER TABLE hosts ADD COLUMN ssh_address TEXT NOT NULL DEFAULT '';
ALTER TABLE hosts ADD COLUMN ssh_port_low BIGINT NOT NULL DEFAULT 0;
ALTER TABLE hosts ADD COLUMN ssh_port_high BIGINT NOT NULL DEFAULT 0;
)sql",
      // 15: each placed node's sshd host key as pinned at its agent's first report of it (R-9,
      // R-22, issue 12 finding 1): the SHA256 fingerprint the relay requires of that node's sshd,
      // and the container it was read from (a new container is pinned again, and its owner told);
      // '' until reported (docs/ssh.md "Host key pinning").
      R"sql(
ALTER TABLE placements ADD COLUMN host_key_fingerprint TEXT NOT NULL DEFAULT '';
ALTER TABLE placements ADD COLUMN host_key_container_id TEXT NOT NULL DEFAULT '';
)sql",
      // 16: payment methods (R-14, docs/billing.md "Payment methods"): at most one per billing
      // account (a solo account's id is 'solo_' + its person's id; a team's is its id); never a
      // card number.
      R"sql(
CREATE TABLE payment_methods (
  billing_account_id TEXT PRIMARY KEY,
  provider TEXT NOT NULL,
  brand TEXT NOT NULL,
  last4 TEXT NOT NULL,
  exp_month BIGINT NOT NULL,
  exp_year BIGINT NOT NULL,
  provider_ref TEXT NOT NULL,
  created_at BIGINT NOT NULL,
  updated_at BIGINT NOT NULL
);
)sql",
      // 17: proof of possession for public keys (issue 11 MED-2, docs/ssh-keys.md "Proof of
      // possession"): when the holding account proved it holds the private key, and the
      // single-use challenges a person signs to prove it.
      R"sql(
ALTER TABLE ssh_keys ADD COLUMN proven_at BIGINT;
CREATE TABLE key_claim_challenges (
  id TEXT PRIMARY KEY,
  person_id TEXT NOT NULL REFERENCES persons(id) ON DELETE CASCADE,
  fingerprint TEXT NOT NULL,
  challenge TEXT NOT NULL,
  created_at BIGINT NOT NULL,
  expires_at BIGINT NOT NULL,
  used_at BIGINT
);
CREATE INDEX key_claim_challenges_by_person ON key_claim_challenges(person_id, challenge);
)sql",
      // 18: queue entries in a pass-over streak (R-14, docs/queue.md "Passed-over entries"):
      // when a payment method is recorded, the streaks of the entries whose owners may launch
      // again end (QueueService::EndPassOverStreaks) without reading the whole queue.
      R"sql(
CREATE INDEX queue_entries_passed_over ON queue_entries(passed_over_at)
  WHERE status = 'open' AND passed_over_at IS NOT NULL;
)sql",
      // 19: Stripe (docs/stripe.md, owned by billing): the Stripe customer of each billing
      // account (deleted_at set once Stripe says it is gone; a new one replaces it), the ledger
      // of webhook events applied (each at most once), the newest event applied per object and
      // aspect (an older event never undoes a newer state), and payment holds (an invoice whose
      // payment failed: launches and restarts answer 402 payment_failed until it is paid).
      R"sql(
CREATE TABLE stripe_customers (
  customer_id TEXT PRIMARY KEY,
  billing_account_id TEXT NOT NULL,
  created_at BIGINT NOT NULL,
  deleted_at BIGINT
);
CREATE UNIQUE INDEX stripe_customers_live ON stripe_customers(billing_account_id)
  WHERE deleted_at IS NULL;
CREATE TABLE stripe_events (
  id TEXT PRIMARY KEY,
  type TEXT NOT NULL,
  created BIGINT NOT NULL,
  applied_at BIGINT NOT NULL
);
CREATE TABLE stripe_event_versions (
  aspect TEXT PRIMARY KEY,
  created BIGINT NOT NULL,
  event_id TEXT NOT NULL
);
CREATE TABLE payment_holds (
  provider_ref TEXT PRIMARY KEY,
  billing_account_id TEXT NOT NULL,
  reason TEXT NOT NULL,
  created_at BIGINT NOT NULL
);
CREATE INDEX payment_holds_by_account ON payment_holds(billing_account_id);
)sql",
      // 20: invoices pushed to Stripe (docs/stripe.md "Invoices", owned by billing): every
      // request of a push with its idempotency key and its exact body (a retry after a lost
      // answer resends the same bytes), the id Stripe answered, and the pushes done (never
      // repeated, even after Stripe forgot the keys).
      R"sql(
CREATE TABLE stripe_invoice_requests (
  idempotency_key TEXT PRIMARY KEY,
  invoice_id TEXT NOT NULL,
  path TEXT NOT NULL,
  body TEXT NOT NULL,
  answer_id TEXT NOT NULL DEFAULT '',
  created_at BIGINT NOT NULL,
  answered_at BIGINT
);
CREATE TABLE stripe_invoice_pushes (
  invoice_id TEXT PRIMARY KEY,
  provider_ref TEXT NOT NULL,
  status TEXT NOT NULL,
  pushed_at BIGINT NOT NULL
);
)sql",
      // 21: invoices queued at the month close for the payment provider that collects them
      // (docs/billing.md "Collecting invoices", owned by billing/invoice_table.h): which
      // provider, how many attempts so far, when the background pass tries next, the last
      // error (code and bounded message), and once pushed, the provider's id for it and when.
      R"sql(
CREATE TABLE invoice_pushes (
  invoice_id TEXT PRIMARY KEY REFERENCES invoices(id),
  provider TEXT NOT NULL,
  queued_at BIGINT NOT NULL,
  attempts BIGINT NOT NULL DEFAULT 0,
  next_attempt_at BIGINT NOT NULL,
  last_error_code TEXT NOT NULL DEFAULT '',
  last_error TEXT NOT NULL DEFAULT '',
  provider_ref TEXT NOT NULL DEFAULT '',
  pushed_at BIGINT
);
CREATE INDEX invoice_pushes_due ON invoice_pushes(provider, next_attempt_at)
  WHERE pushed_at IS NULL;
)sql",
      // 22: relay credentials (docs/ssh.md "The relay's API credential", owned by
      // access/relay_credential_table.h): one per remote relay, registered by an operator (or by
      // `gpuwerk up` for its own relay, `local`, created_by ''), its secret stored as its SHA-256;
      // the name is the `relay` its relay sessions are recorded under.
      R"sql(
CREATE TABLE relay_credentials (
  id TEXT PRIMARY KEY,
  name TEXT NOT NULL UNIQUE,
  token_hash TEXT NOT NULL UNIQUE,
  prefix TEXT NOT NULL,
  created_by TEXT NOT NULL,
  created_at BIGINT NOT NULL,
  last_used_at BIGINT
);
)sql",
      // 23: leader leases (docs/scale-out.md, owned by store/leader_lease.h): one row per named
      // lease ("scheduler"): who holds it, until when (Unix ms on the database's clock) and its
      // fencing epoch, +1 at every takeover.
      R"sql(
CREATE TABLE leader_leases (
  name TEXT PRIMARY KEY,
  holder TEXT NOT NULL,
  epoch BIGINT NOT NULL,
  expires_at_ms BIGINT NOT NULL,
  acquired_at_ms BIGINT NOT NULL,
  renewed_at_ms BIGINT NOT NULL
);
)sql",
      // 24: the key pairs of a 2-host instance (docs/clusters.md, owned by
      // sched/internal/cluster_key_table.h): the worker key node 0 logs in to node 1 with and
      // node 1's sshd host key that node 0's known_hosts names, made for that instance alone by
      // the first sync that describes its nodes, deleted when the instance is finally deleted.
      R"sql(
CREATE TABLE instance_cluster_keys (
  instance_id TEXT PRIMARY KEY REFERENCES instances(id),
  worker_private_key TEXT NOT NULL,
  worker_public_key TEXT NOT NULL,
  node1_host_private_key TEXT NOT NULL,
  node1_host_public_key TEXT NOT NULL,
  created_at BIGINT NOT NULL
);
)sql",
      // 25: card setups (docs/billing.md "Card setups", owned by billing/card_setup_table.h):
      // each page a person opened to add a card (Stripe's Checkout Session), for which billing
      // account and by whom, so that its completion puts a card on file only while that person
      // still manages the account and no change to the card was made here since it began.
      R"sql(
CREATE TABLE card_setups (
  provider_ref TEXT PRIMARY KEY,
  billing_account_id TEXT NOT NULL,
  person_id TEXT NOT NULL,
  state TEXT NOT NULL,
  created_at BIGINT NOT NULL
);
CREATE INDEX card_setups_open ON card_setups(billing_account_id) WHERE state = 'open';
)sql",
  };
  return kMigrations;
}

}  // namespace

int LatestSchemaVersion() { return static_cast<int>(Migrations().size()); }

core::Result<int> SchemaVersion(Database& db) {
  return db.Read([&](Transaction& tx) -> core::Result<int> {
    // Whether schema_migrations exists, without creating it (the catalogs differ).
    const char* exists = db.Backend() == "postgresql"
                             ? "SELECT COUNT(*) FROM information_schema.tables WHERE table_name = "
                               "'schema_migrations' AND table_schema = current_schema()"
                             : "SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = "
                               "'schema_migrations'";
    GPUWERK_ASSIGN_OR_RETURN(auto table, tx.QueryOne(exists));
    if (table->Int(0) == 0) return 0;
    GPUWERK_ASSIGN_OR_RETURN(auto row, tx.QueryOne("SELECT MAX(version) FROM schema_migrations"));
    return static_cast<int>(row->Int(0));
  });
}

core::Result<void> RefuseNewerSchema(Database& db) {
  GPUWERK_ASSIGN_OR_RETURN(int version, SchemaVersion(db));
  if (version > LatestSchemaVersion()) {
    return core::Fail(core::ErrorCode::kFailedPrecondition, "schema_too_new",
                      "the database's schema is version " + std::to_string(version) +
                          ", newer than this gpuwerk knows (" +
                          std::to_string(LatestSchemaVersion()) +
                          "): a newer gpuwerk has migrated it; run that version (or newer), "
                          "this one would misread its data");
  }
  return {};
}

core::Result<void> Migrate(Database& db) {
  const bool postgres = db.Backend() == "postgresql";
  GPUWERK_TRY(db.Write([&](Transaction& tx) -> core::Result<void> {
    // PostgreSQL: processes migrating at once take turns (two CREATE TABLE IF NOT EXISTS at
    // once can both try to create it). The lock ends with the transaction.
    if (postgres) GPUWERK_TRY(tx.ExecScript("SELECT pg_advisory_xact_lock(7366212)"));
    return tx.ExecScript(
        "CREATE TABLE IF NOT EXISTS schema_migrations (version BIGINT PRIMARY KEY, "
        "applied_at BIGINT NOT NULL)");
  }));
  GPUWERK_TRY(RefuseNewerSchema(db));
  const auto& all = Migrations();
  for (size_t i = 0; i < all.size(); ++i) {
    const int64_t version = static_cast<int64_t>(i + 1);
    auto applied = db.Write([&](Transaction& tx) -> core::Result<bool> {
      // PostgreSQL: wait for another process's migration before this transaction's snapshot is
      // taken (LOCK takes none; the SELECT below does), so that it sees that migration.
      if (postgres) {
        GPUWERK_TRY(tx.ExecScript("LOCK TABLE schema_migrations IN SHARE ROW EXCLUSIVE MODE"));
      }
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

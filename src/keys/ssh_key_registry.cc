#include "keys/ssh_key_registry.h"

#include "audit/audit_log.h"
#include "keys/key_claim_table.h"
#include "keys/key_name.h"
#include "keys/public_key.h"
#include "keys/ssh_key_table.h"
#include "keys/sshsig.h"

namespace gpuwerk::keys {
namespace {

constexpr int kPageSize = 15;

/// The key is on another account (R-4: one account at most). Says nothing of whose.
std::unexpected<core::Error> KeyTaken() {
  return core::Fail(core::ErrorCode::kAlreadyExists, "key_taken",
                    "This public key is already registered to another gpuwerk account, and a key "
                    "can belong to one account only. Create a new key pair for this account "
                    "(e.g. ssh-keygen -t ed25519) and add its .pub file. If the key is really "
                    "yours, an operator can release it from the other account (gpuwerk admin "
                    "release-key FILE), then add it again.");
}

/// R-4's uniqueness, checked before the insert: the person's own name (`name_taken`) or key
/// (`key_exists`), then the key on any other account (`key_taken`).
core::Result<void> RefuseClash(store::Transaction& tx, const std::string& person_id,
                               const SshKey& key) {
  GPUWERK_ASSIGN_OR_RETURN(auto clash,
                           SshKeyTable::FindClash(tx, person_id, key.name, key.fingerprint));
  if (clash) {
    if (clash->name == key.name) {
      return core::Fail(core::ErrorCode::kAlreadyExists, "name_taken",
                        "You already have a key named '" + key.name + "'. Pick another name.");
    }
    return core::Fail(core::Error(core::ErrorCode::kAlreadyExists, "key_exists",
                                  "This key is already on your account as '" + clash->name + "'.")
                          .WithDetail("existing_name", clash->name));
  }
  GPUWERK_ASSIGN_OR_RETURN(auto owner, SshKeyTable::FindByFingerprint(tx, key.fingerprint));
  if (owner) return KeyTaken();
  return {};
}

}  // namespace

core::Result<SshKey> SshKeyRegistry::Add(const std::string& person_id, std::string_view name,
                                         std::string_view public_key_text,
                                         const std::string& source_address) {
  GPUWERK_ASSIGN_OR_RETURN(std::string clean_name, ValidateKeyName(name));
  GPUWERK_ASSIGN_OR_RETURN(PublicKey parsed, ParsePublicKey(public_key_text));
  SshKey key{.id = core::NewId(rng_, "key"),
             .person_id = person_id,
             .name = clean_name,
             .type = parsed.type,
             .bits = parsed.bits,
             .public_key = parsed.Line(),
             .fingerprint = parsed.Fingerprint(),
             .created_at = clock_.NowUnix()};
  // Two adds of one key (or one name) at once: each checks, then inserts. Where the check cannot
  // see the other's uncommitted row (PostgreSQL under READ COMMITTED; SQLite's writers take turns
  // and always see it), the unique indexes refuse the second row, and the next attempt's check
  // answers with the winner's code. Nothing of the loser is stored.
  for (int attempt = 0;; ++attempt) {
    auto added = db_.Write([&](store::Transaction& tx) -> core::Result<void> {
      GPUWERK_TRY(RefuseClash(tx, person_id, key));
      GPUWERK_TRY(SshKeyTable::Insert(tx, key));
      return audit::RecordAudit(tx, clock_, rng_,
                                {.actor_id = person_id,
                                 .action = "ssh_key.add",
                                 .target = key.id,
                                 .source_address = source_address,
                                 .detail = {{"name", key.name}, {"fingerprint", key.fingerprint}}});
    });
    if (added) return key;
    if (!store::IsUniqueViolation(added.error())) return std::unexpected(added.error());
    if (attempt >= 2) return KeyTaken();  // the winner keeps changing: still not this account's
  }
}

core::Result<ClaimChallenge> SshKeyRegistry::IssueClaimChallenge(const std::string& person_id,
                                                                 std::string_view public_key_text) {
  GPUWERK_ASSIGN_OR_RETURN(PublicKey parsed, ParsePublicKey(public_key_text));
  const int64_t now = clock_.NowUnix();
  KeyClaimChallenge row{.id = core::NewId(rng_, "kcc"),
                        .person_id = person_id,
                        .fingerprint = parsed.Fingerprint(),
                        .challenge = "",
                        .created_at = now,
                        .expires_at = now + kChallengeSeconds};
  // What is signed names its purpose, the account and the key, so that a signature made for one
  // of them proves nothing for another; the nonce makes it single use.
  row.challenge = "gpuwerk key claim\naccount " + person_id + "\nkey " + row.fingerprint +
                  "\nnonce " + core::RandomToken(rng_) + "\n";
  GPUWERK_TRY(db_.Write([&](store::Transaction& tx) -> core::Result<void> {
    GPUWERK_TRY(KeyClaimTable::DeleteSpent(tx, person_id, now));
    GPUWERK_ASSIGN_OR_RETURN(int64_t open, KeyClaimTable::CountUsable(tx, person_id, now));
    if (open >= kMaxOpenChallenges) {
      return core::Fail(core::Error(core::ErrorCode::kResourceExhausted, "rate_limited",
                                    "Too many unused key-claim challenges; use one or wait until "
                                    "they expire (10 minutes).")
                            .WithDetail("retry_after_seconds", kChallengeSeconds));
    }
    return KeyClaimTable::Insert(tx, row);
  }));
  return ClaimChallenge{
      .challenge = row.challenge, .fingerprint = row.fingerprint, .expires_at = row.expires_at};
}

core::Result<ClaimResult> SshKeyRegistry::Claim(const std::string& person_id, std::string_view name,
                                                std::string_view public_key_text,
                                                std::string_view challenge,
                                                std::string_view signature,
                                                const std::string& source_address) {
  GPUWERK_ASSIGN_OR_RETURN(std::string clean_name, ValidateKeyName(name));
  GPUWERK_ASSIGN_OR_RETURN(PublicKey parsed, ParsePublicKey(public_key_text));
  const std::string fingerprint = parsed.Fingerprint();
  const std::string challenge_text(challenge);
  const int64_t now = clock_.NowUnix();
  auto invalid_challenge = [] {
    return core::Fail(core::ErrorCode::kInvalidArgument, "invalid_challenge",
                      "This challenge is not one the server gave you for this key, was used "
                      "already, or expired (10 minutes): ask for a new one.");
  };
  // Cheap refusals first: the challenge must be this person's, for this key, usable, before
  // ssh-keygen runs; any claim that names it uses it up.
  GPUWERK_ASSIGN_OR_RETURN(
      auto found,
      db_.Write([&](store::Transaction& tx) -> core::Result<std::optional<KeyClaimChallenge>> {
        GPUWERK_ASSIGN_OR_RETURN(auto row,
                                 KeyClaimTable::FindUsable(tx, person_id, challenge_text, now));
        if (!row) return std::optional<KeyClaimChallenge>();
        GPUWERK_ASSIGN_OR_RETURN(bool used, KeyClaimTable::Use(tx, row->id, now));
        if (!used) return std::optional<KeyClaimChallenge>();
        return row;
      }));
  if (!found || found->fingerprint != fingerprint) return invalid_challenge();
  GPUWERK_TRY(VerifySshSignature(parsed, kKeyClaimNamespace, challenge_text, signature));

  SshKey key{.id = core::NewId(rng_, "key"),
             .person_id = person_id,
             .name = clean_name,
             .type = parsed.type,
             .bits = parsed.bits,
             .public_key = parsed.Line(),
             .fingerprint = fingerprint,
             .created_at = now,
             .proven_at = now};
  std::string former_owner;  // set when the key is taken from another account
  auto claimed = db_.Write([&](store::Transaction& tx) -> core::Result<ClaimResult> {
    ClaimResult result;
    GPUWERK_ASSIGN_OR_RETURN(auto holder, SshKeyTable::FindByFingerprint(tx, fingerprint));
    if (holder && holder->person_id == person_id) {
      GPUWERK_TRY(SshKeyTable::MarkProven(tx, holder->id, now));
      GPUWERK_TRY(audit::RecordAudit(tx, clock_, rng_,
                                     {.actor_id = person_id,
                                      .action = "ssh_key.prove",
                                      .target = holder->id,
                                      .source_address = source_address,
                                      .detail = {{"fingerprint", fingerprint}}}));
      result.key = *holder;
      if (!result.key.proven_at) result.key.proven_at = now;
      result.already_owned = true;
      return result;
    }
    if (holder && holder->proven_at) {
      return core::Fail(core::ErrorCode::kAlreadyExists, "key_taken",
                        "Another account proved that it holds this key's private key first, so "
                        "it stays there. Create a new key pair for this account (ssh-keygen -t "
                        "ed25519), or ask the operator.");
    }
    if (holder) {
      // The former owner never proved the key: it goes from there, with what held it.
      GPUWERK_TRY(SshKeyTable::Delete(tx, holder->person_id, holder->id));
      nlohmann::json detail = {
          {"fingerprint", fingerprint}, {"name", holder->name}, {"claimed_by", person_id}};
      if (claimed_away_) {
        GPUWERK_ASSIGN_OR_RETURN(nlohmann::json cleared, claimed_away_(tx, *holder, person_id));
        if (cleared.is_object()) detail.update(cleared);
      }
      GPUWERK_TRY(audit::RecordAudit(tx, clock_, rng_,
                                     {.actor_id = person_id,
                                      .action = "ssh_key.claimed_away",
                                      .target = holder->id,
                                      .source_address = source_address,
                                      .detail = std::move(detail)}));
      result.taken_over = true;
      former_owner = holder->person_id;
    }
    GPUWERK_TRY(RefuseClash(tx, person_id, key));  // the claimer's own name
    GPUWERK_TRY(SshKeyTable::Insert(tx, key));
    nlohmann::json detail = {{"name", key.name}, {"fingerprint", key.fingerprint}};
    if (holder) detail["former_owner_id"] = holder->person_id;
    GPUWERK_TRY(audit::RecordAudit(tx, clock_, rng_,
                                   {.actor_id = person_id,
                                    .action = "ssh_key.claim",
                                    .target = key.id,
                                    .source_address = source_address,
                                    .detail = std::move(detail)}));
    result.key = key;
    return result;
  });
  // The former owner's instances no longer take this key: their relay sessions end now.
  if (claimed && !former_owner.empty()) {
    PublishKeyGone(fingerprint, former_owner, "SSH key claimed by another account");
  }
  return claimed;
}

void SshKeyRegistry::PublishKeyGone(const std::string& fingerprint, const std::string& person_id,
                                    const char* reason) {
  if (access_changes_ == nullptr) return;
  access_changes_->Publish(
      {.person_ids = {person_id}, .key_fingerprints = {fingerprint}, .reason = reason});
}

core::Result<SshKeyPage> SshKeyRegistry::List(const std::string& person_id, int page) {
  return db_.Read([&](store::Transaction& tx) { return List(tx, person_id, page); });
}

core::Result<SshKeyPage> SshKeyRegistry::List(store::Transaction& tx, const std::string& person_id,
                                              int page) {
  if (page < 1 || page > 1'000'000) {
    return core::InvalidArgument("invalid_page", "page must be a whole number from 1.");
  }
  SshKeyPage out;
  out.page = page;
  GPUWERK_ASSIGN_OR_RETURN(auto listed, SshKeyTable::ListPage(tx, person_id, int64_t{kPageSize},
                                                              int64_t{(page - 1) * kPageSize}));
  out.items = std::move(listed.first);
  out.total = listed.second;
  out.pages = std::max<int64_t>(1, (out.total + kPageSize - 1) / kPageSize);
  return out;
}

core::Result<void> SshKeyRegistry::Delete(const std::string& person_id, std::string_view id,
                                          const std::string& source_address) {
  const std::string key_id(id);
  std::string fingerprint;
  auto deleted = db_.Write([&](store::Transaction& tx) -> core::Result<void> {
    GPUWERK_ASSIGN_OR_RETURN(auto key, SshKeyTable::FindOwned(tx, person_id, key_id));
    if (!key) return core::NotFound("SSH key");
    fingerprint = key->fingerprint;
    return DeleteIn(tx, *key, person_id, "ssh_key.delete", nlohmann::json::object(),
                    source_address);
  });
  if (deleted) PublishKeyGone(fingerprint, person_id, "SSH key deleted");
  return deleted;
}

core::Result<SshKey> SshKeyRegistry::Release(const std::string& operator_id,
                                             std::string_view public_key_text,
                                             const std::string& source_address) {
  GPUWERK_ASSIGN_OR_RETURN(PublicKey parsed, ParsePublicKey(public_key_text));
  const std::string fingerprint = parsed.Fingerprint();
  auto released = db_.Write([&](store::Transaction& tx) -> core::Result<SshKey> {
    GPUWERK_ASSIGN_OR_RETURN(auto key, SshKeyTable::FindByFingerprint(tx, fingerprint));
    if (!key) {
      return core::Fail(core::ErrorCode::kNotFound, "not_found",
                        "No account has this public key (" + fingerprint + ").");
    }
    GPUWERK_TRY(DeleteIn(tx, *key, operator_id, "ssh_key.release",
                         {{"former_owner_id", key->person_id}}, source_address));
    return *std::move(key);
  });
  if (released) PublishKeyGone(fingerprint, released->person_id, "SSH key released");
  return released;
}

core::Result<void> SshKeyRegistry::DeleteIn(store::Transaction& tx, const SshKey& key,
                                            const std::string& actor_id, const std::string& action,
                                            nlohmann::json detail,
                                            const std::string& source_address) {
  // a key held by a live instance or an open queue entry cannot go; the error names them.
  KeyUse use;
  if (key_users_) {
    GPUWERK_ASSIGN_OR_RETURN(use, key_users_(tx, key.person_id, key.id));
  }
  if (!use.instances.empty() || !use.queue_entries.empty()) {
    nlohmann::json names = nlohmann::json::array();
    nlohmann::json entries = nlohmann::json::array();
    std::string list;
    for (const auto& name : use.instances) {
      names.push_back(name);
      list += (list.empty() ? "instance " : ", instance ") + name;
    }
    for (const auto& q : use.queue_entries) {
      entries.push_back({{"id", q.id}, {"name", q.name}, {"gpu_type", q.gpu_type}});
      list += (list.empty() ? "" : ", ") + std::string("queue entry ") + q.name + " (" +
              q.gpu_type + ")";
    }
    // The owner is told to clear them; an operator releasing another account's key cannot, so
    // is told whose they are and who can (no admin verb deletes another person's instance).
    const bool owner = actor_id == key.person_id;
    std::string message =
        owner ? "This key is attached to " + list +
                    "; delete the instances and leave the queue first."
              : "This key is attached to " + list + " of account " + key.person_id +
                    ", the account that registered it. Only that account can delete them "
                    "(gpuwerk instances rm NAME) and leave the queue (gpuwerk queue leave NAME): "
                    "no admin verb deletes another person's instance. Ask its owner to, then "
                    "release the key again.";
    core::Error error(core::ErrorCode::kFailedPrecondition, "key_in_use", std::move(message));
    if (!owner) error.details["owner_id"] = key.person_id;
    return core::Fail(std::move(error)
                          .WithDetail("instances", std::move(names))
                          .WithDetail("queue_entries", std::move(entries)));
  }
  GPUWERK_TRY(SshKeyTable::Delete(tx, key.person_id, key.id));
  detail["name"] = key.name;
  detail["fingerprint"] = key.fingerprint;
  return audit::RecordAudit(tx, clock_, rng_,
                            {.actor_id = actor_id,
                             .action = action,
                             .target = key.id,
                             .source_address = source_address,
                             .detail = std::move(detail)});
}

}  // namespace gpuwerk::keys

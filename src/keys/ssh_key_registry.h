#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/access_change_feed.h"
#include "core/clock.h"
#include "core/error.h"
#include "core/random.h"
#include "store/database.h"

namespace gpuwerk::keys {

/// A person's named SSH public key as stored.
struct SshKey {
  std::string id;
  std::string person_id;  ///< the owner
  std::string name;
  std::string type;         ///< e.g. "ssh-ed25519"
  int bits = 0;             ///< as `ssh-keygen -l` shows
  std::string public_key;   ///< the normalised OpenSSH line, ending in "\n"
  std::string fingerprint;  ///< "SHA256:…" as `ssh-keygen -l` shows
  int64_t created_at = 0;   ///< Unix seconds
  /// When this account proved it holds the private key (Claim), Unix seconds; nullopt when it
  /// never did. A proven key cannot be claimed away.
  std::optional<int64_t> proven_at;
};

/// One page of a person's keys.
struct SshKeyPage {
  std::vector<SshKey> items;
  int page = 1;
  int pages = 1;
  int64_t total = 0;
};

/// What holds one key: live instances and open queue entries of its owner.
struct KeyUse {
  /// One open queue entry holding the key.
  struct QueueEntryUse {
    std::string id;
    std::string name;
    std::string gpu_type;
  };
  std::vector<std::string> instances;        ///< live instance names, by name
  std::vector<QueueEntryUse> queue_entries;  ///< open entries, by name
};

/// Who holds key `key_id` of `person_id`, read inside the delete's transaction. The scheduler
/// knows (instances and queue entries are its tables); app/ wires it in so that keys does not
/// depend on sched. Errors: the store's.
using KeyUsers = std::function<core::Result<KeyUse>(
    store::Transaction& tx, const std::string& person_id, const std::string& key_id)>;

/// What a claim did to the account that held the key before (docs/ssh-keys.md "Proof of
/// possession"): called inside the claim's transaction after the former owner's key row is
/// deleted, to cancel that owner's open queue entries that held `former` (and tell the owner).
/// Returns what it did, for the audit record (e.g. {"cancelled_queue_entries": [...]}). The
/// scheduler knows (queue entries are its table); app/ wires it in. Errors: the store's.
using KeyClaimedAway = std::function<core::Result<nlohmann::json>(
    store::Transaction& tx, const SshKey& former, const std::string& claimer_id)>;

/// A challenge to sign for Claim.
struct ClaimChallenge {
  std::string challenge;    ///< the exact text to sign (ends in "\n")
  std::string fingerprint;  ///< the key it is for
  int64_t expires_at = 0;   ///< Unix seconds
};

/// What Claim did.
struct ClaimResult {
  SshKey key;                  ///< the claimer's key row, proven
  bool taken_over = false;     ///< it was taken from another account that never proved it
  bool already_owned = false;  ///< the claimer held it already (now proven)
};

/// The SSH keys of each person: add (parsed and normalised by ParsePublicKey), list, delete.
/// Names are unique per person; a key (by fingerprint) belongs to one person at most. Every
/// change is audited.
/// Thread-safe.
class SshKeyRegistry {
 public:
  /// `key_users` (optional) says what holds a key; without it every key is free to delete.
  /// `claimed_away` (optional) clears what a claim took from the former owner (queue entries).
  SshKeyRegistry(store::Database& db, core::Clock& clock, core::Rng& rng, KeyUsers key_users = {},
                 KeyClaimedAway claimed_away = {})
      : db_(db),
        clock_(clock),
        rng_(rng),
        key_users_(std::move(key_users)),
        claimed_away_(std::move(claimed_away)) {}

  /// How long a claim challenge can be used, and how many unused ones a person may hold.
  static constexpr int64_t kChallengeSeconds = 10 * 60;
  static constexpr int64_t kMaxOpenChallenges = 10;

  /// A fresh challenge for `person_id` to sign with the private key of `public_key_text`
  /// (parsed as Add parses it), in namespace kKeyClaimNamespace. It names the person, the key's
  /// fingerprint and 256 random bits, is single use and expires after kChallengeSeconds.
  /// Errors: every ParsePublicKey error; kResourceExhausted "rate_limited" past
  /// kMaxOpenChallenges unused ones.
  core::Result<ClaimChallenge> IssueClaimChallenge(const std::string& person_id,
                                                   std::string_view public_key_text);
  /// Proof of possession (docs/ssh-keys.md "Proof of possession"): `signature` (ssh-keygen -Y
  /// sign -n gpuwerk-key-claim) over `challenge`, one that IssueClaimChallenge gave `person_id`
  /// for this key, unused and unexpired, proves that the person holds the private key. Then:
  /// the key on no account is added as `name`, proven; the person's own key is marked proven;
  /// a key on another account that never proved it is deleted there (its open queue entries
  /// holding it cancelled through KeyClaimedAway, audited `ssh_key.claimed_away` with the former
  /// owner) and added here as `name`, proven, audited `ssh_key.claim`. The challenge is used up
  /// by any claim that names it, good signature or not.
  /// Errors: ParsePublicKey's; invalid_name, name_taken; kInvalidArgument "invalid_challenge"
  /// (not this person's, used, expired, or for another key); VerifySshSignature's
  /// (invalid_signature, signature_check_unavailable); kAlreadyExists "key_taken" when another
  /// account proved it first. Nothing changes on an error but the challenge's use.
  core::Result<ClaimResult> Claim(const std::string& person_id, std::string_view name,
                                  std::string_view public_key_text, std::string_view challenge,
                                  std::string_view signature, const std::string& source_address);

  /// Errors: every ParsePublicKey error (invalid_public_key, private_key_pasted, …),
  /// invalid_name, kAlreadyExists "name_taken" or "key_exists" (the person's own), "key_taken"
  /// (the key is on another account, which the message does not name). Nothing is stored on an
  /// error; of concurrent adds of one key exactly one succeeds, the others get these codes.
  core::Result<SshKey> Add(const std::string& person_id, std::string_view name,
                           std::string_view public_key_text, const std::string& source_address);
  /// 15 keys a page, oldest first; `page` is 1-based. Errors: invalid_page.
  core::Result<SshKeyPage> List(const std::string& person_id, int page);
  /// As List, inside the caller's transaction (a read one suffices).
  core::Result<SshKeyPage> List(store::Transaction& tx, const std::string& person_id, int page);
  /// Errors: not_found (also for another person's key); kFailedPrecondition "key_in_use"
  /// (details.instances, details.queue_entries name what holds it).
  core::Result<void> Delete(const std::string& person_id, std::string_view id,
                            const std::string& source_address);
  /// An operator (`operator_id`) releases a public key from whichever account holds it, so that
  /// the key's real holder can add it (docs/ssh-keys.md "A key someone else registered first").
  /// `public_key_text` is parsed as Add parses it (CRLF, RFC 4716, PEM) and matched by
  /// fingerprint. The key is deleted as Delete deletes it (refused while something holds it),
  /// audited as `ssh_key.release` with its fingerprint and the former owner's id. Returns the
  /// released key (its person_id is the former owner).
  /// Errors: every ParsePublicKey error (private_key_pasted, …); not_found (no account has the
  /// key); kFailedPrecondition "key_in_use" (as Delete). Nothing changes on an error.
  core::Result<SshKey> Release(const std::string& operator_id, std::string_view public_key_text,
                               const std::string& source_address);

  /// Delete, Release and a Claim that takes a key from another account publish the key's
  /// fingerprint and its former owner to `feed` once committed (core::AccessChangeFeed: relay
  /// sessions that logged in with it are checked again at once). Optional; `feed` must outlive
  /// the registry. Call before use.
  void SetAccessChangeFeed(core::AccessChangeFeed* feed) { access_changes_ = feed; }

 private:
  /// Publishes that `person_id` no longer holds the key `fingerprint` (when a feed is set).
  void PublishKeyGone(const std::string& fingerprint, const std::string& person_id,
                      const char* reason);
  /// Deletes `key` inside `tx` unless something holds it (R-5: key_in_use, naming what), and
  /// audits `action` by `actor_id` with the key's name and fingerprint plus `detail`.
  core::Result<void> DeleteIn(store::Transaction& tx, const SshKey& key,
                              const std::string& actor_id, const std::string& action,
                              nlohmann::json detail, const std::string& source_address);

  store::Database& db_;
  core::Clock& clock_;
  core::Rng& rng_;
  KeyUsers key_users_;
  KeyClaimedAway claimed_away_;
  core::AccessChangeFeed* access_changes_ = nullptr;
};

}  // namespace gpuwerk::keys

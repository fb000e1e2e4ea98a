#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

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

/// The SSH keys of each person: add (parsed and normalised by ParsePublicKey), list, delete.
/// Names are unique per person; a key (by fingerprint) belongs to one person at most. Every
/// change is audited.
/// Thread-safe.
class SshKeyRegistry {
 public:
  /// `key_users` (optional) says what holds a key; without it every key is free to delete.
  SshKeyRegistry(store::Database& db, core::Clock& clock, core::Rng& rng, KeyUsers key_users = {})
      : db_(db), clock_(clock), rng_(rng), key_users_(std::move(key_users)) {}

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

 private:
  /// Deletes `key` inside `tx` unless something holds it (R-5: key_in_use, naming what), and
  /// audits `action` by `actor_id` with the key's name and fingerprint plus `detail`.
  core::Result<void> DeleteIn(store::Transaction& tx, const SshKey& key,
                              const std::string& actor_id, const std::string& action,
                              nlohmann::json detail, const std::string& source_address);

  store::Database& db_;
  core::Clock& clock_;
  core::Rng& rng_;
  KeyUsers key_users_;
};

}  // namespace gpuwerk::keys

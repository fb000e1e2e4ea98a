#pragma once

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

/// The SSH keys of each person: add (parsed and normalised by ParsePublicKey), list, delete.
/// Names are unique per person; so are keys (by fingerprint). Every change is audited.
/// Thread-safe.
class SshKeyRegistry {
 public:
  SshKeyRegistry(store::Database& db, core::Clock& clock, core::Rng& rng)
      : db_(db), clock_(clock), rng_(rng) {}

  /// Errors: every ParsePublicKey error (invalid_public_key, private_key_pasted, …),
  /// invalid_name, kAlreadyExists "name_taken" or "key_exists".
  core::Result<SshKey> Add(const std::string& person_id, std::string_view name,
                           std::string_view public_key_text, const std::string& source_address);
  /// 15 keys a page, oldest first; `page` is 1-based. Errors: invalid_page.
  core::Result<SshKeyPage> List(const std::string& person_id, int page);
  /// Errors: not_found (also for another person's key); kFailedPrecondition "key_in_use"
  /// (details.instances, details.queue_entries name what holds it).
  core::Result<void> Delete(const std::string& person_id, std::string_view id,
                            const std::string& source_address);

 private:
  store::Database& db_;
  core::Clock& clock_;
  core::Rng& rng_;
};

}  // namespace gpuwerk::keys

#pragma once

// The `instance_cluster_keys` table (migration 24, R-8, docs/clusters.md): the key pairs of a
// 2-host instance. Not for use outside src/sched/.

#include <optional>
#include <string>

#include "core/error.h"
#include "store/database.h"

namespace gpuwerk::sched::internal {

/// The key pairs made for one 2-host instance alone (never a person's key, never shared): the
/// worker key (node 0's ssh client logs in to node 1's sshd with it) and node 1's sshd host key
/// (node 0's known_hosts names its public half). Private keys in OpenSSH's format
/// (keys::KeyPair); secrets, never logged.
struct ClusterKeys {
  std::string worker_private_key;
  std::string worker_public_key;  ///< "ssh-ed25519 BASE64 gpuwerk-worker-<instance id>"
  std::string node1_host_private_key;
  std::string node1_host_public_key;  ///< "ssh-ed25519 BASE64 gpuwerk-node1-<instance id>"
};

/// The `instance_cluster_keys` table's SQL, inside the caller's transaction; errors are the
/// store's. Stateless.
class ClusterKeyTable {
 public:
  ClusterKeyTable() = delete;

  /// The keys of `instance_id`; nullopt when none were made.
  static core::Result<std::optional<ClusterKeys>> Find(store::Transaction& tx,
                                                       const std::string& instance_id);
  /// Stores `keys` for `instance_id` unless it has keys already (then nothing changes: two
  /// agents' syncs may race to make them; the caller reads back the ones that stayed).
  static core::Result<void> InsertIfAbsent(store::Transaction& tx, const std::string& instance_id,
                                           const ClusterKeys& keys, int64_t now);
  /// Removes the keys of `instance_id` (none: nothing happens).
  static core::Result<void> Delete(store::Transaction& tx, const std::string& instance_id);
};

}  // namespace gpuwerk::sched::internal

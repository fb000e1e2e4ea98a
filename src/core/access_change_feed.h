#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <vector>

namespace gpuwerk::core {

/// What may have lost access to instances through a relay (docs/ssh.md "Revocation"): the
/// instances, the people and the SSH keys (by fingerprint, "SHA256:…") whose relay sessions must
/// be checked again at once. It names what changed, never whether access remains: the relay asks
/// the authorizer again for exactly the relay sessions it names, and ends those now refused.
struct AccessChange {
  std::vector<std::string> instance_ids;      ///< "ins_…": deleted, or its owner changed
  std::vector<std::string> person_ids;        ///< "per_…": an account's access or tokens changed
  std::vector<std::string> key_fingerprints;  ///< a key deleted, released or claimed away
  std::string reason;  ///< what happened, for logs (e.g. "instance deleted"); no outside text

  bool empty() const {
    return instance_ids.empty() && person_ids.empty() && key_fingerprints.empty();
  }
};

/// One in-process feed of AccessChanges: the modules where access changes (sched's instance
/// deletion, keys' removal of a key from an account, auth's token deletion) publish to it, and
/// whoever must act subscribes (the in-process relay under `gpuwerk up`, the server's relay
/// watch stream `GET /api/v1/relay/watch`). It lives in core so that those modules publish
/// without depending on the relay or the API; app/ builds one and hands it to each.
///
/// Thread-safety: every member may be called from any thread. Publish calls the listeners on
/// the publishing thread, one after the other: a listener must be quick (queue the work, never do
/// I/O), may not throw, and may not call Subscribe or Unsubscribe.
class AccessChangeFeed {
 public:
  using Listener = std::function<void(const AccessChange&)>;

  /// Adds `listener`; returns its id for Unsubscribe.
  uint64_t Subscribe(Listener listener);
  /// Removes the listener `id` (unknown ids are ignored). Waits for a Publish in progress, so
  /// that once it returns the listener is never called again.
  void Unsubscribe(uint64_t id);
  /// Calls every listener with `change` (nothing when it is empty).
  void Publish(const AccessChange& change);

 private:
  std::shared_mutex mu_;  ///< shared while publishing, exclusive to change the listeners
  uint64_t next_id_ = 1;
  std::map<uint64_t, Listener> listeners_;
};

}  // namespace gpuwerk::core

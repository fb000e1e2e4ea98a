#pragma once

#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "relay/relay_authorizer.h"

namespace gpuwerk::relay {

/// One live instance as the in-memory authorizer knows it.
struct RelayInstance {
  std::string instance_id;
  std::string name;       ///< e.g. "alpha"
  std::string hostname;   ///< e.g. "alpha-k3x7q" (globally unique)
  std::string person_id;  ///< the owner
  std::string upstream_host = "127.0.0.1";
  uint16_t upstream_port = 22;
  std::set<std::string> key_fingerprints;  ///< "SHA256:…" of the keys attached to it
};

/// A RelayAuthorizer over a table held in memory, for tests: the same routing rule as the server's
/// (protocol::DecideRelayLogin, docs/ssh.md "The user name: how a stock client names the
/// instance") over the instances it holds. Thread-safe.
class InMemoryRelayAuthorizer final : public RelayAuthorizer {
 public:
  /// Adds or replaces (by instance_id) a live instance.
  void Put(RelayInstance instance);
  /// Removes an instance (deleted): new logins to it are refused at once.
  void Remove(const std::string& instance_id);

  core::Result<AuthorizeDecision> Authorize(const AuthorizeRequest& request) override;

 private:
  std::mutex mu_;
  std::vector<RelayInstance> instances_;
};

}  // namespace gpuwerk::relay

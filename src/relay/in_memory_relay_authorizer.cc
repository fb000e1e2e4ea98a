#include "relay/in_memory_relay_authorizer.h"

#include <algorithm>

#include "relay/relay_user.h"

namespace gpuwerk::relay {
namespace {

RelayTarget TargetFor(const RelayInstance& in, std::string login) {
  RelayTarget t;
  t.instance_id = in.instance_id;
  t.instance_name = in.name;
  t.hostname = in.hostname;
  t.upstream_host = in.upstream_host;
  t.upstream_port = in.upstream_port;
  t.login = std::move(login);
  t.person_id = in.person_id;
  return t;
}

/// The refusal text: what went wrong, then the instances this key reaches (only those: the
/// client has proven it holds the key, so it may learn where the key leads, and nothing else).
std::string RefusalText(const std::string& what, const std::string& fingerprint,
                        const std::vector<const RelayInstance*>& reachable) {
  std::string out = "gpuwerk: " + what + "\n";
  if (reachable.empty()) {
    out += "This key (" + fingerprint +
           ") is not attached to any live instance. Attach it when you create an instance, or "
           "log in with the key you chose then.\n";
    return out;
  }
  out += "This key reaches these instances; use one as the SSH user name:\n";
  for (const RelayInstance* in : reachable) {
    out +=
        "  " + in->hostname + "   (instance " + in->name + "; or <login>+" + in->hostname + ")\n";
  }
  return out;
}

}  // namespace

void InMemoryRelayAuthorizer::Put(RelayInstance instance) {
  std::lock_guard lock(mu_);
  std::erase_if(instances_,
                [&](const RelayInstance& i) { return i.instance_id == instance.instance_id; });
  instances_.push_back(std::move(instance));
}

void InMemoryRelayAuthorizer::Remove(const std::string& instance_id) {
  std::lock_guard lock(mu_);
  std::erase_if(instances_, [&](const RelayInstance& i) { return i.instance_id == instance_id; });
}

core::Result<AuthorizeDecision> InMemoryRelayAuthorizer::Authorize(
    const AuthorizeRequest& request) {
  std::lock_guard lock(mu_);
  std::vector<const RelayInstance*> reachable;
  for (const auto& in : instances_) {
    if (in.key_fingerprints.contains(request.key_fingerprint)) reachable.push_back(&in);
  }
  std::sort(reachable.begin(), reachable.end(), [](const RelayInstance* a, const RelayInstance* b) {
    return a->hostname < b->hostname;
  });
  auto user = ParseRelayUser(request.user);
  if (!user) {
    return AuthorizeDecision::Refuse(
        RefusalText(user.error().message, request.key_fingerprint, reachable));
  }
  auto by_host = [&](const std::string& host) -> const RelayInstance* {
    for (const RelayInstance* in : reachable) {
      if (in->hostname == host) return in;
    }
    return nullptr;
  };
  if (!user->hostname.empty()) {
    if (const RelayInstance* in = by_host(user->hostname)) {
      return AuthorizeDecision::Allow(TargetFor(*in, user->login));
    }
    return AuthorizeDecision::Refuse(
        RefusalText("no instance \"" + user->hostname + "\" that this key can reach.",
                    request.key_fingerprint, reachable));
  }
  // A bare login: the key's only live instance.
  if (reachable.size() == 1) {
    return AuthorizeDecision::Allow(TargetFor(*reachable.front(), user->bare_login));
  }
  if (reachable.empty()) {
    return AuthorizeDecision::Refuse(RefusalText(
        "no instance for user \"" + user->bare_login + "\".", request.key_fingerprint, reachable));
  }
  return AuthorizeDecision::Refuse(RefusalText(
      "\"" + user->bare_login + "\" is ambiguous: this key reaches " +
          std::to_string(reachable.size()) + " instances, and the SSH user name must say which.",
      request.key_fingerprint, reachable));
}

}  // namespace gpuwerk::relay

#pragma once

#include <chrono>
#include <cstddef>
#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "tests/support/eventually.h"
#include "tests/support/http_client.h"

namespace gpuwerk::testing {

/// Whether a GET /api/v1/admin/hosts answer lists exactly `count` hosts and each is ready to take
/// an instance: its agent has synced (`last_seen_at` set) and its engine answered that sync
/// (`engine_error` empty). A host's first sync carries no engine state yet, so until its second
/// round the host reads as "engine unavailable" and a create lands in the queue (202) rather than
/// on the host (201): waiting for `last_seen_at` alone made such tests flaky.
inline bool HostsReady(const nlohmann::json& hosts, std::size_t count) {
  if (!hosts.is_object() || !hosts["items"].is_array() || hosts["items"].size() != count) {
    return false;
  }
  for (const auto& h : hosts["items"]) {
    if (!h["last_seen_at"].is_string()) return false;
    if (!h["engine_error"].is_string() || !h["engine_error"].get<std::string>().empty()) {
      return false;
    }
  }
  return true;
}

/// Waits (up to `limit`) until the operator `op` sees `count` hosts, all ready (HostsReady).
inline bool WaitHostsReady(HttpClient& op, std::size_t count,
                           std::chrono::milliseconds limit = std::chrono::seconds(30)) {
  return Eventually([&] { return HostsReady(op.Get("/api/v1/admin/hosts").Json(), count); }, limit);
}

/// Waits until every host the operator `op` sees has synced `rounds` more times (its
/// `last_seen_at`, kept in whole seconds, moved on that often), so that a check for "nothing
/// happened" covers real agent rounds. Allows 10 s per round; whether it happened.
inline bool WaitAgentRounds(HttpClient& op, int rounds) {
  std::map<std::string, std::string> last;
  std::map<std::string, int> seen;
  return Eventually(
      [&] {
        auto hosts = op.Get("/api/v1/admin/hosts").Json();
        if (!hosts.is_object() || !hosts["items"].is_array() || hosts["items"].empty()) {
          return false;
        }
        for (const auto& item : hosts["items"]) {
          const std::string name = item.value("name", "");
          const nlohmann::json& at = item["last_seen_at"];
          const std::string now = at.is_string() ? at.get<std::string>() : "";
          auto [it, fresh] = seen.try_emplace(name, -1);
          if (fresh || now != last[name]) {
            last[name] = now;
            ++it->second;
          }
        }
        for (const auto& [name, n] : seen) {
          if (n < rounds) return false;
        }
        return true;
      },
      std::chrono::seconds(10 * rounds));
}

}  // namespace gpuwerk::testing

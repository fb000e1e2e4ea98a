#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/clock.h"
#include "core/error.h"
#include "core/random.h"
#include "store/database.h"

namespace gpuwerk::sched {

/// One GPU host as registered by the operator and last reported by its agent.
struct Host {
  std::string id;  ///< "hst_…"
  std::string name;
  std::string gpu_type;
  bool gpu_required = true;  ///< false: the operator registered it as a host without a GPU
  bool drained = false;      ///< a drained host gets no new instances
  int64_t created_at = 0;    ///< Unix seconds
  std::optional<int64_t> last_seen_at;  ///< Unix seconds of the last agent sync; none yet
  nlohmann::json inventory = nlohmann::json::object();  ///< as the agent last reported it
  std::string engine_error;  ///< the agent's last container-engine error; "" when fine
  /// Why the host gets no new instances although it is heard from (case C13): its GPU is not
  /// visible, or the engine's NVIDIA runtime failed a create. "" when healthy. A runtime failure
  /// stays until the operator undrains the host (SetDrained false) after fixing it.
  std::string degraded_reason;
  std::string instance_id;  ///< the instance placed here, "" when free (List only)
};

/// A host just registered, with its agent token. The token is shown once and stored hashed.
struct NewHost {
  Host host;
  std::string token;  ///< "gwh_…" (256-bit)
};

/// The operator's hosts: register, list, drain, and authenticate agents by host token.
/// Every change is audited. Thread-safe (state lives in the store).
class HostRegistry {
 public:
  HostRegistry(store::Database& db, core::Clock& clock, core::Rng& rng)
      : db_(db), clock_(clock), rng_(rng) {}

  /// Registers a host. `name` is a DNS label (1–63 of [a-z0-9-], not starting or ending in '-').
  /// Errors: invalid_name; kInvalidArgument unknown_gpu_type; kAlreadyExists name_taken.
  core::Result<NewHost> Add(const std::string& actor_id, std::string_view name,
                            std::string_view gpu_type, bool gpu_required,
                            const std::string& source_address);
  /// Registers host `name` (gpu_type, gpu_required) if absent, or gives the registered one a new
  /// agent token (the old one stops working at once) and the given `gpu_required`; returns the
  /// host and its new token. Used by `gpuwerk up` for the machine's own agent, which gets a fresh
  /// token on every start so that no token is kept on disk. Audited as `host.add` or
  /// `host.token_rotated`. Errors: as Add (a registered host of another GPU type:
  /// kFailedPrecondition "gpu_type_mismatch").
  core::Result<NewHost> AddOrRotateToken(const std::string& actor_id, std::string_view name,
                                         std::string_view gpu_type, bool gpu_required,
                                         const std::string& source_address);
  /// Every host, by name.
  core::Result<std::vector<Host>> List();
  /// The host whose agent token is `token`. Errors: kUnauthenticated "unauthenticated".
  core::Result<Host> AuthenticateAgent(std::string_view token);
  /// Drains (`drained` true) or undrains a host by name; undraining also clears
  /// `degraded_reason` (the operator says the host is fixed). Errors: not_found.
  core::Result<void> SetDrained(const std::string& actor_id, std::string_view name, bool drained,
                                const std::string& source_address);

 private:
  store::Database& db_;
  core::Clock& clock_;
  core::Rng& rng_;
};

/// The SHA-256 hex digest under which a host token is stored.
std::string HostTokenHash(std::string_view token);

/// Checks a DNS label (RFC 1123: 1–63 of [a-z0-9-], no leading or trailing '-').
/// Errors: kInvalidArgument "invalid_name" with a message naming `what`.
core::Result<void> ValidateDnsLabel(std::string_view name, std::string_view what);

}  // namespace gpuwerk::sched

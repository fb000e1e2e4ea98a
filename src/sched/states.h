#pragma once

// The scheduler's state labels as enums, and the one place that maps them to and from the
// strings the API and the store use (docs/agent-protocol.md, docs/queue.md).

#include <iosfwd>
#include <optional>
#include <string_view>

namespace gpuwerk::sched {

/// An instance's status, as shown and as stored in `instances.status`.
enum class InstanceStatus {
  kProvisioning,  ///< "provisioning": placed, containers not running and reachable yet
  kRunning,       ///< "running"
  kRestarting,    ///< "restarting": a restart is being applied
  kExited,        ///< "exited": a container stopped
  kUnknown,       ///< "unknown": a host not heard from, or its engine unavailable
  kDeleting,      ///< "deleting": removal asked, containers not gone yet
  kFailed,        ///< "failed": the host could not create it
  kDeleted,       ///< "deleted": finally deleted
};

/// What the server wants of an instance (`instances.desired`).
enum class DesiredState {
  kRunning,  ///< "running"
  kDeleted,  ///< "deleted"
};

/// A queue entry's status (R-11, `queue_entries.status`).
enum class QueueEntryStatus {
  kOpen,       ///< "open": waiting
  kLaunched,   ///< "launched": its instance exists
  kCancelled,  ///< "cancelled": its owner left the queue
};

/// The label of each value ("provisioning", "running", …).
std::string_view ToString(InstanceStatus status);
std::string_view ToString(DesiredState desired);
std::string_view ToString(QueueEntryStatus status);

/// The value of a label; nullopt for an unknown label.
std::optional<InstanceStatus> InstanceStatusFrom(std::string_view label);
std::optional<DesiredState> DesiredStateFrom(std::string_view label);
std::optional<QueueEntryStatus> QueueEntryStatusFrom(std::string_view label);

/// Writes the label (for test failure messages and logs).
std::ostream& operator<<(std::ostream& os, InstanceStatus status);
std::ostream& operator<<(std::ostream& os, DesiredState desired);
std::ostream& operator<<(std::ostream& os, QueueEntryStatus status);

}  // namespace gpuwerk::sched

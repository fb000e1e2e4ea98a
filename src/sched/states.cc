#include "sched/states.h"

#include <array>
#include <ostream>
#include <utility>

namespace gpuwerk::sched {
namespace {

template <class E, size_t N>
using Labels = std::array<std::pair<E, std::string_view>, N>;

constexpr Labels<InstanceStatus, 8> kInstanceStatus{{
    {InstanceStatus::kProvisioning, "provisioning"},
    {InstanceStatus::kRunning, "running"},
    {InstanceStatus::kRestarting, "restarting"},
    {InstanceStatus::kExited, "exited"},
    {InstanceStatus::kUnknown, "unknown"},
    {InstanceStatus::kDeleting, "deleting"},
    {InstanceStatus::kFailed, "failed"},
    {InstanceStatus::kDeleted, "deleted"},
}};
constexpr Labels<DesiredState, 2> kDesired{{
    {DesiredState::kRunning, "running"},
    {DesiredState::kDeleted, "deleted"},
}};
constexpr Labels<QueueEntryStatus, 3> kQueueEntryStatus{{
    {QueueEntryStatus::kOpen, "open"},
    {QueueEntryStatus::kLaunched, "launched"},
    {QueueEntryStatus::kCancelled, "cancelled"},
}};

template <class E, size_t N>
std::string_view Label(const Labels<E, N>& labels, E value) {
  for (const auto& [v, label] : labels) {
    if (v == value) return label;
  }
  return "";
}

template <class E, size_t N>
std::optional<E> Parse(const Labels<E, N>& labels, std::string_view label) {
  for (const auto& [v, l] : labels) {
    if (l == label) return v;
  }
  return std::nullopt;
}

}  // namespace

std::string_view ToString(InstanceStatus status) { return Label(kInstanceStatus, status); }
std::string_view ToString(DesiredState desired) { return Label(kDesired, desired); }
std::string_view ToString(QueueEntryStatus status) { return Label(kQueueEntryStatus, status); }

std::optional<InstanceStatus> InstanceStatusFrom(std::string_view label) {
  return Parse(kInstanceStatus, label);
}
std::optional<DesiredState> DesiredStateFrom(std::string_view label) {
  return Parse(kDesired, label);
}
std::optional<QueueEntryStatus> QueueEntryStatusFrom(std::string_view label) {
  return Parse(kQueueEntryStatus, label);
}

std::ostream& operator<<(std::ostream& os, InstanceStatus status) { return os << ToString(status); }
std::ostream& operator<<(std::ostream& os, DesiredState desired) { return os << ToString(desired); }
std::ostream& operator<<(std::ostream& os, QueueEntryStatus status) {
  return os << ToString(status);
}

}  // namespace gpuwerk::sched

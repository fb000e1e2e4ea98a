#include "agent/reconciler.h"

#include <algorithm>
#include <charconv>
#include <utility>

namespace gpuwerk::agent {
namespace {

/// A decimal integer label value; `fallback` when missing or not exactly a number.
int64_t LabelNumber(const ContainerInfo& c, std::string_view label, int64_t fallback) {
  auto it = c.labels.find(std::string(label));
  if (it == c.labels.end()) return fallback;
  int64_t value = 0;
  const char* begin = it->second.data();
  const char* end = begin + it->second.size();
  auto [ptr, ec] = std::from_chars(begin, end, value);
  if (ec != std::errc() || ptr != end || begin == end) return fallback;
  return value;
}

}  // namespace

std::string_view ActionKindName(ActionKind kind) {
  switch (kind) {
    case ActionKind::kCreate:
      return "create";
    case ActionKind::kStart:
      return "start";
    case ActionKind::kRestart:
      return "restart";
    case ActionKind::kRemove:
      return "remove";
  }
  return "?";
}

int64_t AppliedGeneration(const ContainerInfo& container, const AppliedGenerations& applied) {
  int64_t gen = LabelNumber(container, kGenerationLabel, 0);
  if (auto it = applied.find(container.id); it != applied.end()) gen = std::max(gen, it->second);
  return gen;
}

ContainerKey KeyOf(const ContainerInfo& container) {
  ContainerKey key;
  if (auto it = container.labels.find(std::string(kInstanceLabel)); it != container.labels.end()) {
    key.instance_id = it->second;
  }
  key.node_index = static_cast<int>(LabelNumber(container, kNodeLabel, -1));
  return key;
}

std::vector<Action> Reconcile(const std::vector<DesiredContainer>& desired,
                              const std::vector<ContainerInfo>& observed,
                              const AppliedGenerations& applied) {
  // Group the observed containers by (instance, node), each group sorted by id (determinism).
  std::map<ContainerKey, std::vector<const ContainerInfo*>> by_key;
  for (const auto& c : observed) by_key[KeyOf(c)].push_back(&c);
  for (auto& [key, group] : by_key) {
    std::sort(group.begin(), group.end(),
              [](const ContainerInfo* a, const ContainerInfo* b) { return a->id < b->id; });
  }

  std::vector<Action> removals;
  std::vector<Action> steps;
  std::map<ContainerKey, bool> wanted;
  for (const auto& d : desired) {
    const ContainerKey key{d.instance_id, d.node_index};
    if (wanted[key]) continue;  // a duplicate desired entry: the first wins
    wanted[key] = true;
    auto it = by_key.find(key);
    if (it == by_key.end() || it->second.empty()) {
      steps.push_back(
          {.kind = ActionKind::kCreate, .desired = d, .generation = d.restart_generation});
      continue;
    }
    const auto& group = it->second;
    const ContainerInfo* keep = nullptr;
    for (const auto* c : group) {
      if (c->name == d.container_name) keep = c;
    }
    for (const auto* c : group) {
      if (keep == nullptr && c->state == ContainerState::kRunning) keep = c;
    }
    if (keep == nullptr) keep = group.front();
    for (const auto* c : group) {
      if (c != keep) removals.push_back({.kind = ActionKind::kRemove, .container_id = c->id});
    }
    const int64_t have = AppliedGeneration(*keep, applied);
    switch (keep->state) {
      case ContainerState::kCreated:
      case ContainerState::kExited:
        steps.push_back({.kind = ActionKind::kStart,
                         .container_id = keep->id,
                         .desired = d,
                         .generation = std::max(have, d.restart_generation)});
        break;
      case ContainerState::kRunning:
        if (d.restart_generation > have) {
          steps.push_back({.kind = ActionKind::kRestart,
                           .container_id = keep->id,
                           .desired = d,
                           .generation = d.restart_generation});
        }
        break;
      case ContainerState::kDead:
        removals.push_back({.kind = ActionKind::kRemove, .container_id = keep->id});
        break;
      case ContainerState::kRestarting:
      case ContainerState::kPaused:
      case ContainerState::kRemoving:
      case ContainerState::kUnknown:
        break;
    }
  }
  for (const auto& [key, group] : by_key) {
    if (wanted.contains(key)) continue;
    for (const auto* c : group) {
      // A container already on its way out needs nothing more.
      if (c->state == ContainerState::kRemoving) continue;
      removals.push_back({.kind = ActionKind::kRemove, .container_id = c->id});
    }
  }
  removals.insert(removals.end(), std::make_move_iterator(steps.begin()),
                  std::make_move_iterator(steps.end()));
  return removals;
}

ContainerReport ReportContainer(const ContainerInfo& container, int64_t applied_generation,
                                bool ssh_ready, bool engine_ok, std::string_view engine_error) {
  const ContainerKey key = KeyOf(container);
  ContainerReport r;
  r.instance_id = key.instance_id;
  r.node_index = key.node_index;
  r.container_id = container.id;
  r.exit_code = container.exit_code;
  r.started_at = container.started_at;
  r.finished_at = container.finished_at.substr(0, 64);
  r.ssh_port = container.ssh_port;
  r.restart_generation = applied_generation;
  if (engine_ok) {
    r.state = std::string(ContainerStateName(container.state));
    r.ssh_ready = ssh_ready && container.state == ContainerState::kRunning;
    r.error = container.error;
  } else {
    r.state = "unknown";
    r.ssh_ready = false;
    r.error = std::string(engine_error);
  }
  return r;
}

}  // namespace gpuwerk::agent

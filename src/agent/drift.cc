#include "agent/drift.h"

#include <algorithm>

namespace gpuwerk::agent {
namespace {

bool Stopped(ContainerState s) {
  return s == ContainerState::kCreated || s == ContainerState::kExited ||
         s == ContainerState::kDead;
}

}  // namespace

std::vector<DriftReport> DetectDrift(const KnownContainers& before,
                                     const std::vector<ContainerInfo>& now,
                                     const std::set<std::string>& touched,
                                     const std::set<std::string>& started_lately,
                                     const std::vector<DesiredContainer>& desired) {
  std::set<ContainerKey> wanted;
  for (const auto& d : desired) wanted.insert({d.instance_id, d.node_index});
  std::map<std::string, const ContainerInfo*> by_id;
  for (const auto& c : now) by_id[c.id] = &c;

  std::vector<DriftReport> out;
  for (const auto& [key, was] : before) {
    if (!wanted.contains(key)) continue;
    // The agent's own start, restart or removal explains a change of the container's life (not
    // of its name, image or limits, which it never changes).
    const bool own = touched.contains(was.container_id);
    const bool own_start = own || started_lately.contains(was.container_id);
    DriftReport d{.instance_id = key.instance_id,
                  .node_index = key.node_index,
                  .container_id = was.container_id};
    auto it = by_id.find(was.container_id);
    if (it == by_id.end()) {
      if (own) continue;
      d.kind = "removed";
      out.push_back(std::move(d));
      continue;
    }
    const ContainerInfo& c = *it->second;
    if (was.id_only || c.state == ContainerState::kUnknown) continue;
    const bool was_serving = !own_start && was.ready && was.state == ContainerState::kRunning;
    if (was_serving && Stopped(c.state)) {
      d.kind = "stopped";
      d.exit_code = c.exit_code;
      d.oom_killed = c.oom_killed;
      d.at = c.finished_at;
      out.push_back(d);
    } else if (was_serving && c.state == ContainerState::kRunning &&
               c.started_at != was.started_at) {
      d.kind = "restarted";
      d.at = c.started_at;
      out.push_back(d);
    } else if (!own && was.state != ContainerState::kPaused && c.state == ContainerState::kPaused) {
      d.kind = "paused";
      out.push_back(d);
    }
    std::vector<std::string> changes;
    if (c.name != was.name) changes.push_back("name");
    if (c.image != was.image) changes.push_back("image");
    if (c.memory_bytes != was.memory_bytes) changes.push_back("memory");
    if (c.nano_cpus != was.nano_cpus) changes.push_back("cpus");
    if (c.pids_limit != was.pids_limit) changes.push_back("pids");
    if (!changes.empty()) {
      DriftReport changed{.instance_id = key.instance_id,
                          .node_index = key.node_index,
                          .kind = "changed",
                          .container_id = was.container_id,
                          .changes = std::move(changes)};
      out.push_back(std::move(changed));
    }
  }
  return out;
}

KnownContainers KnownFrom(const std::vector<ContainerInfo>& now,
                          const std::set<std::string>& ready_ids) {
  std::vector<const ContainerInfo*> sorted;
  for (const auto& c : now) sorted.push_back(&c);
  std::sort(sorted.begin(), sorted.end(),
            [](const ContainerInfo* a, const ContainerInfo* b) { return a->id < b->id; });
  KnownContainers known;
  for (const ContainerInfo* c : sorted) {
    const ContainerKey key = KeyOf(*c);
    auto it = known.find(key);
    if (it != known.end() &&
        (it->second.state == ContainerState::kRunning || c->state != ContainerState::kRunning)) {
      continue;
    }
    known[key] = {.container_id = c->id,
                  .name = c->name,
                  .image = c->image,
                  .state = c->state,
                  .started_at = c->started_at,
                  .ready = ready_ids.contains(c->id),
                  .memory_bytes = c->memory_bytes,
                  .nano_cpus = c->nano_cpus,
                  .pids_limit = c->pids_limit,
                  // Not inspected (the engine failed to answer): its fields are the list's.
                  .id_only = c->state == ContainerState::kUnknown};
  }
  return known;
}

}  // namespace gpuwerk::agent

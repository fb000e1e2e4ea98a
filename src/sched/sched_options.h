#pragma once

#include <cstdint>
#include <string>

#include "billing/billing_account.h"

namespace gpuwerk::sched {

/// Settings shared by the scheduler's services; from ServerConfig.
struct SchedOptions {
  /// The container image every instance runs (a config value, R-7 / issue 3).
  std::string instance_image = "localhost/gpuwerk-instance:bookworm";
  /// The memory limit of each container in bytes; 0 means no limit.
  int64_t instance_memory_bytes = 0;
  /// A host not heard from for this long (seconds) makes its instances `unknown` and gets no
  /// new instances.
  int64_t host_unknown_after_seconds = 30;
  /// The period the server asks agents to sync at (seconds).
  int64_t sync_interval_seconds = 2;
  /// Which billing account a launch is billed to (R-15: a team member's launches go to the team).
  /// Called inside the launch's transaction; empty: everyone pays alone (billing::SoloAccountOf).
  billing::ResolveAccount resolve_account;
};

}  // namespace gpuwerk::sched

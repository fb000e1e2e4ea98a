#pragma once

#include <string>
#include <vector>

#include "core/clock.h"
#include "core/error.h"
#include "sched/instance_service.h"
#include "sched/queue_service.h"
#include "sched/sched_options.h"
#include "store/database.h"

namespace gpuwerk::sched {

/// What a person's event stream (`GET /api/v1/events`, docs/api.md "Events") shows, read in one
/// read transaction so that a queue launch is seen whole (the entry `launched` and its instance
/// together).
struct PersonState {
  /// The person's live instances (not finally deleted), oldest first, status derived as
  /// InstanceService shows it.
  std::vector<Instance> instances;
  /// The person's open queue entries with their positions, oldest first.
  std::vector<QueueEntry> queue_entries;
  /// Of the instance ids asked about: those finally deleted since (status "deleted",
  /// `deleted_at` set), in the order asked.
  std::vector<Instance> ended_instances;
  /// Of the queue entry ids asked about: those no longer open (status "launched" with
  /// `instance_id`, or "cancelled"; `left_at` set), in the order asked.
  std::vector<QueueEntry> left_entries;
};

/// Reads PersonState from the store. Stateless over the store and thread-safe.
class PersonStateReader {
 public:
  /// References must outlive the reader. `options.host_unknown_after_seconds` drives the
  /// derived `unknown` status, as for InstanceService.
  PersonStateReader(store::Database& db, core::Clock& clock, SchedOptions options)
      : db_(db), clock_(clock), options_(std::move(options)) {}

  /// `person_id`'s live instances and open queue entries; plus, of `instance_ids` and
  /// `entry_ids` (ids the caller saw live or open before), those that are live or open no more.
  /// An id that is still live or open, unknown, or another person's is left out of the ended
  /// and left lists. Errors: the store's.
  core::Result<PersonState> Read(const std::string& person_id,
                                 const std::vector<std::string>& instance_ids,
                                 const std::vector<std::string>& entry_ids);

 private:
  store::Database& db_;
  core::Clock& clock_;
  SchedOptions options_;
};

}  // namespace gpuwerk::sched

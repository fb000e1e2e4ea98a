#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "api/http_types.h"
#include "core/error.h"

namespace gpuwerk::sched {
class DesiredStateNotifier;
class PersonStateReader;
}  // namespace gpuwerk::sched

namespace gpuwerk::api {

class SshCommandFormat;

/// One thing a person's event stream shows: an instance or a queue entry.
struct EventItem {
  std::string kind;     ///< "instance" or "queue_entry": the SSE event name of its changes
  std::string id;       ///< "ins_…" / "qen_…"
  nlohmann::json json;  ///< exactly as GET /api/v1/instances or /api/v1/queue-entries shows it
};

/// What the hub reads for one person at a time (EventHub::Reader).
struct PersonItems {
  /// The live instances, then the open queue entries, each oldest first.
  std::vector<EventItem> live;
  /// Of the items asked about, those no longer live or open, as they are now (an instance with
  /// status "deleted"; an entry "launched" or "cancelled").
  std::vector<EventItem> ended;
};

/// Server-sent event streams of people's instance and queue changes (`GET /api/v1/events`,
/// docs/api.md "Events"; the framing is the WHATWG HTML Standard, "Server-sent events" §9.2).
///
/// Each stream starts with `retry: <retry ms>` and an `event: snapshot` whose data is
/// `{"instances": [...], "queue_entries": [...]}`, then has an `event: instance` or
/// `event: queue_entry` (data: the item's JSON) for every item whose JSON changed, appeared or
/// ended since the stream last showed it; an ended item's event is its last. Every event carries
/// an `id:`, 1, 2, 3, … per stream. A comment line `: keep-alive` goes out after
/// `heartbeat_interval` without a write, so proxies keep the connection open.
///
/// How changes are found: the hub does not track changes itself. Wake() (called by whatever may
/// have changed something: instance lifecycle through DesiredStateNotifier, agent syncs, queue
/// joins and leaves) and a timer every `recheck_interval` (for statuses derived from time: a
/// host going silent makes its instances `unknown`) start a pass: for each person with an open
/// stream, one Reader call (one read transaction), then each of their streams sends what
/// differs from what it last sent. Passes run on the hub's own thread, at most one every
/// `min_pass_interval`; wakes during a pass make one more pass. Only a person's own items are
/// ever read for their streams.
///
/// Thread-safety: all members may be called from any thread.
class EventHub {
 public:
  struct Options {
    /// Open streams one person whose address is proven may hold; one more is refused with 429
    /// `rate_limited`.
    size_t max_streams_per_person = 8;
    /// Open streams one person whose address is not proven (docs/accounts.md) may hold.
    size_t max_streams_per_unproven_person = 2;
    /// Open streams of all unproven persons together; one more of theirs is refused with 503
    /// `too_many_streams`. Accounts cost nothing to make until their address is proven, so
    /// they get a corner of max_streams, never all of it.
    size_t max_unproven_streams = 64;
    /// Open streams in all; one more is refused with 503 `too_many_streams`.
    size_t max_streams = 512;
    /// The periodic re-read of every stream's items.
    std::chrono::milliseconds recheck_interval = std::chrono::seconds(2);
    /// A `: keep-alive` comment after this long without a write.
    std::chrono::milliseconds heartbeat_interval = std::chrono::seconds(15);
    /// The shortest time between two passes (a burst of wakes makes one pass).
    std::chrono::milliseconds min_pass_interval = std::chrono::milliseconds(50);
    /// The `retry:` a stream starts with: how long a client waits before reconnecting.
    std::chrono::milliseconds retry = std::chrono::seconds(3);
    /// How often a stream's StillAllowed is asked while the stream gets only keep-alives (at the
    /// first pass after it is due); a write that carries events always asks first.
    std::chrono::milliseconds reauth_interval = std::chrono::seconds(10);
  };

  /// Reads `person_id`'s items: every live one, and of `known` ((kind, id) pairs the person's
  /// streams showed before) those that ended. Called on the hub's thread only. An error skips
  /// the person until the next pass (and is logged).
  using Reader = std::function<core::Result<PersonItems>(
      const std::string& person_id, const std::vector<std::pair<std::string, std::string>>& known)>;

  /// What Open() gives a handler to put in Response::stream.
  using Producer = std::function<void(std::shared_ptr<ResponseStream>)>;

  /// Whether the credentials a stream was opened with still admit its person (they may be
  /// signed out, deleted or expired meanwhile); false ends the stream. Called on the hub's
  /// thread every `reauth_interval`.
  using StillAllowed = std::function<bool()>;

  /// Starts the hub's thread.
  explicit EventHub(Reader reader, Options options);
  explicit EventHub(Reader reader) : EventHub(std::move(reader), Options{}) {}
  /// Shutdown(), then joins the thread.
  ~EventHub();
  EventHub(const EventHub&) = delete;
  EventHub& operator=(const EventHub&) = delete;

  /// Reserves a stream for `person_id` (whose address is proven or not: `email_proven`, which
  /// picks the limits that apply) and returns the Producer that fills it once the server
  /// hands it a ResponseStream; the reservation is released if the Producer is dropped uncalled
  /// (e.g. HEAD), and the stream when it ends. `still_allowed` (optional) is asked before every
  /// write that carries events and every `reauth_interval`; once it says no, the stream ends
  /// without another event. Errors:
  /// kResourceExhausted "rate_limited" (429, `retry_after_seconds`) over max_streams_per_person
  /// (max_streams_per_unproven_person); kUnavailable "too_many_streams" (503,
  /// `retry_after_seconds`) over max_streams, or for an unproven person over
  /// max_unproven_streams; kUnavailable "shutting_down" after Shutdown().
  core::Result<Producer> Open(const std::string& person_id, bool email_proven,
                              StillAllowed still_allowed = {});

  /// Something a person's stream shows may have changed: start a pass soon. Cheap; never blocks
  /// on a pass.
  void Wake();

  /// Also Wake() on every DesiredStateNotifier::Notify (creates, restarts, deletes, queue
  /// launches) until Shutdown. `notifier` must outlive the hub. Call at most once.
  void ListenTo(sched::DesiredStateNotifier& notifier);

  /// Ends every open stream (each gets its last chunk) and refuses new ones. Idempotent.
  void Shutdown();

  /// Streams open or reserved now (metrics, tests).
  size_t open_streams() const;

 private:
  struct Core;
  std::shared_ptr<Core> core_;
  sched::DesiredStateNotifier* notifier_ = nullptr;
  uint64_t listener_id_ = 0;
  std::thread thread_;
};

/// The Reader of the server's event streams: sched::PersonStateReader's state, shown with the
/// REST API's own JSON shapes. `state` and `ssh` must outlive the hub.
EventHub::Reader PersonEventReader(sched::PersonStateReader& state, const SshCommandFormat& ssh);

}  // namespace gpuwerk::api

#include "api/event_hub.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <condition_variable>
#include <map>
#include <mutex>
#include <set>

#include "sched/desired_state_notifier.h"

namespace gpuwerk::api {

using Clock = std::chrono::steady_clock;
using ItemKey = std::pair<std::string, std::string>;  // (kind, id)

namespace {

std::string Dump(const nlohmann::json& j) {
  // One line (SSE data may not hold a line break; JSON escapes those inside strings), and
  // invalid UTF-8 replaced rather than thrown on.
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace

struct EventHub::Core {
  /// One open (or reserved) stream.
  struct Stream {
    uint64_t id = 0;
    std::string person_id;
    bool email_proven = true;
    std::shared_ptr<ResponseStream> out;  ///< null while reserved; set under `mu`
    StillAllowed still_allowed;           ///< may be empty
    // Touched by the hub's thread only:
    bool snapshot_sent = false;
    uint64_t next_event_id = 1;
    std::map<ItemKey, std::string> shown;  ///< what the client last got, per item (JSON text)
    Clock::time_point last_write = Clock::now();
    Clock::time_point next_reauth;
  };

  Core(Reader r, Options o) : reader(std::move(r)), options(o) {}

  const Reader reader;
  const Options options;

  mutable std::mutex mu;
  std::mutex join_mu;  ///< one Shutdown joins the hub's thread; the others wait for it
  std::condition_variable cv;
  bool shut_down = false;
  bool dirty = false;
  uint64_t next_id = 1;
  std::map<uint64_t, std::shared_ptr<Stream>> streams;
  std::map<std::string, size_t> per_person;
  size_t unproven = 0;  // open streams of persons whose address is not proven

  void Release(uint64_t id) {
    std::lock_guard lock(mu);
    auto it = streams.find(id);
    if (it == streams.end()) return;
    auto count = per_person.find(it->second->person_id);
    if (count != per_person.end() && --count->second == 0) per_person.erase(count);
    if (!it->second->email_proven) --unproven;
    streams.erase(it);
  }

  void Run();
  void Refresh(const std::vector<std::shared_ptr<Stream>>& work);
  void Update(Stream& s, const PersonItems& items, Clock::time_point now);
  void Heartbeats(const std::vector<std::shared_ptr<Stream>>& work, Clock::time_point now);
  /// Holds a reservation until the server hands over the stream; releases it if it never does.
  struct Reservation {
    std::weak_ptr<Core> core;
    uint64_t id = 0;
    bool attached = false;
    ~Reservation() {
      if (attached) return;
      if (auto c = core.lock()) c->Release(id);
    }
  };

  std::string Event(Stream& s, std::string_view name, const std::string& data) {
    return "id: " + std::to_string(s.next_event_id++) + "\nevent: " + std::string(name) +
           "\ndata: " + data + "\n\n";
  }
};

EventHub::EventHub(Reader reader, Options options)
    : core_(std::make_shared<Core>(std::move(reader), options)) {
  thread_ = std::thread([core = core_] { core->Run(); });
}

EventHub::~EventHub() { Shutdown(); }

core::Result<EventHub::Producer> EventHub::Open(const std::string& person_id, bool email_proven,
                                                StillAllowed still_allowed) {
  const auto retry_seconds =
      std::max<int64_t>(1, std::chrono::ceil<std::chrono::seconds>(core_->options.retry).count());
  uint64_t id = 0;
  {
    std::lock_guard lock(core_->mu);
    if (core_->shut_down) {
      return core::Fail(core::ErrorCode::kUnavailable, "shutting_down",
                        "The server is shutting down; reconnect in a moment.");
    }
    auto count = core_->per_person.find(person_id);
    const size_t per_person = email_proven ? core_->options.max_streams_per_person
                                           : core_->options.max_streams_per_unproven_person;
    if (count != core_->per_person.end() && count->second >= per_person) {
      return core::Fail(core::Error(core::ErrorCode::kResourceExhausted, "rate_limited",
                                    "You have " + std::to_string(count->second) +
                                        " event streams open, the most allowed; close one "
                                        "(e.g. another browser tab) first.")
                            .WithDetail("retry_after_seconds", retry_seconds));
    }
    if (!email_proven && core_->unproven >= core_->options.max_unproven_streams) {
      return core::Fail(core::Error(core::ErrorCode::kUnavailable, "too_many_streams",
                                    "The server has as many event streams open for accounts "
                                    "whose address is not proven as it allows; prove your "
                                    "address with the link we mailed, or try again shortly.")
                            .WithDetail("retry_after_seconds", retry_seconds));
    }
    if (core_->streams.size() >= core_->options.max_streams) {
      return core::Fail(core::Error(core::ErrorCode::kUnavailable, "too_many_streams",
                                    "The server has as many event streams open as it allows; "
                                    "try again shortly.")
                            .WithDetail("retry_after_seconds", retry_seconds));
    }
    id = core_->next_id++;
    auto stream = std::make_shared<Core::Stream>();
    stream->id = id;
    stream->person_id = person_id;
    stream->email_proven = email_proven;
    stream->still_allowed = std::move(still_allowed);
    stream->next_reauth = Clock::now() + core_->options.reauth_interval;
    core_->streams.emplace(id, std::move(stream));
    ++core_->per_person[person_id];
    if (!email_proven) ++core_->unproven;
  }
  auto reservation = std::make_shared<Core::Reservation>();
  reservation->core = core_;
  reservation->id = id;
  return Producer([reservation](std::shared_ptr<ResponseStream> out) {
    reservation->attached = true;
    auto core = reservation->core.lock();
    if (!core) return out->End();
    const uint64_t id = reservation->id;
    bool attached = false;
    {
      std::lock_guard lock(core->mu);
      auto it = core->streams.find(id);
      if (it != core->streams.end() && !core->shut_down) {
        it->second->out = out;
        core->dirty = true;  // its snapshot goes out with the next pass
        attached = true;
      }
    }
    if (!attached) {
      core->Release(id);
      return out->End();
    }
    core->cv.notify_all();
    // Runs at once when the stream has already ended (HEAD, a stopping server).
    out->OnEnd([weak = std::weak_ptr<Core>(core), id] {
      if (auto c = weak.lock()) c->Release(id);
    });
  });
}

void EventHub::Wake() {
  {
    std::lock_guard lock(core_->mu);
    core_->dirty = true;
  }
  core_->cv.notify_all();
}

void EventHub::ListenTo(sched::DesiredStateNotifier& notifier) {
  notifier_ = &notifier;
  listener_id_ =
      notifier.AddListener([weak = std::weak_ptr<Core>(core_)](const std::vector<std::string>&) {
        if (auto core = weak.lock()) {
          {
            std::lock_guard lock(core->mu);
            core->dirty = true;
          }
          core->cv.notify_all();
        }
      });
}

void EventHub::Shutdown() {
  std::vector<std::shared_ptr<ResponseStream>> open;
  bool first = false;
  {
    std::lock_guard lock(core_->mu);
    if (!core_->shut_down) {
      first = true;
      core_->shut_down = true;
      for (auto& [id, s] : core_->streams) {
        if (s->out) open.push_back(s->out);
      }
    }
  }
  if (first) {
    core_->cv.notify_all();
    if (notifier_ != nullptr) notifier_->RemoveListener(listener_id_);
    for (auto& out : open) out->End();  // their OnEnd callbacks release them
  }
  // A pass may be running outside the lock, calling the Reader and streams' StillAllowed (which
  // refer to the server's parts): it ends before this returns, as the thread does.
  std::lock_guard join(core_->join_mu);
  if (thread_.joinable() && thread_.get_id() != std::this_thread::get_id()) thread_.join();
}

size_t EventHub::open_streams() const {
  std::lock_guard lock(core_->mu);
  return core_->streams.size();
}

void EventHub::Core::Run() {
  std::unique_lock lock(mu);
  Clock::time_point next_recheck = Clock::now() + options.recheck_interval;
  Clock::time_point last_pass{};
  while (!shut_down) {
    const auto now = Clock::now();
    const bool pass =
        now >= next_recheck || (dirty && now >= last_pass + options.min_pass_interval);
    auto heartbeat_due = Clock::time_point::max();
    for (const auto& [id, s] : streams) {
      if (s->out)
        heartbeat_due = std::min(heartbeat_due, s->last_write + options.heartbeat_interval);
    }
    if (!pass && now < heartbeat_due) {
      auto until = std::min(next_recheck, heartbeat_due);
      if (dirty) until = std::min(until, last_pass + options.min_pass_interval);
      cv.wait_until(lock, until);
      continue;
    }
    std::vector<std::shared_ptr<Stream>> work;
    for (const auto& [id, s] : streams) {
      if (s->out) work.push_back(s);
    }
    if (pass) {
      dirty = false;
      last_pass = now;
      next_recheck = now + options.recheck_interval;
    }
    lock.unlock();
    if (pass) Refresh(work);
    Heartbeats(work, Clock::now());
    work.clear();  // drop our references outside the lock
    lock.lock();
  }
}

void EventHub::Core::Refresh(const std::vector<std::shared_ptr<Stream>>& work) {
  std::map<std::string, std::vector<Stream*>> by_person;
  const auto start = Clock::now();
  for (const auto& s : work) {
    if (s->still_allowed && start >= s->next_reauth) {
      s->next_reauth = start + options.reauth_interval;
      if (!s->still_allowed()) {
        spdlog::info("events: ending a stream of person {}: its sign-in ended", s->person_id);
        s->out->End();  // its OnEnd releases it
        continue;
      }
    }
    by_person[s->person_id].push_back(s.get());
  }
  for (auto& [person_id, person_streams] : by_person) {
    std::set<ItemKey> known_set;
    for (Stream* s : person_streams) {
      for (const auto& [key, json] : s->shown) known_set.insert(key);
    }
    const std::vector<ItemKey> known(known_set.begin(), known_set.end());
    core::Result<PersonItems> items;
    try {
      items = reader(person_id, known);
    } catch (const std::exception& e) {
      items = core::Internal(std::string("reading a person's items threw: ") + e.what());
    }
    if (!items) {
      spdlog::warn("events: cannot read the items of person {}: {} (retried at the next pass)",
                   person_id, items.error().message);
      continue;
    }
    const auto now = Clock::now();
    for (Stream* s : person_streams) Update(*s, *items, now);
  }
}

void EventHub::Core::Update(Stream& s, const PersonItems& items, Clock::time_point now) {
  std::string out;
  if (!s.snapshot_sent) {
    nlohmann::json snapshot = {{"instances", nlohmann::json::array()},
                               {"queue_entries", nlohmann::json::array()}};
    for (const auto& item : items.live) {
      snapshot[item.kind == "instance" ? "instances" : "queue_entries"].push_back(item.json);
      s.shown[{item.kind, item.id}] = Dump(item.json);
    }
    out += "retry: " + std::to_string(options.retry.count()) + "\n\n";
    out += Event(s, "snapshot", Dump(snapshot));
    s.snapshot_sent = true;
  } else {
    std::set<ItemKey> live;
    for (const auto& item : items.live) {
      ItemKey key{item.kind, item.id};
      live.insert(key);
      std::string text = Dump(item.json);
      auto it = s.shown.find(key);
      if (it != s.shown.end() && it->second == text) continue;
      out += Event(s, item.kind, text);
      s.shown[key] = std::move(text);
    }
    for (const auto& item : items.ended) {
      if (s.shown.erase({item.kind, item.id}) == 0) continue;  // never shown on this stream
      out += Event(s, item.kind, Dump(item.json));
    }
    // Gone without an ended row (not expected: rows are kept): its last event says so.
    for (auto it = s.shown.begin(); it != s.shown.end();) {
      if (live.contains(it->first)) {
        ++it;
        continue;
      }
      nlohmann::json last = nlohmann::json::parse(it->second, nullptr, false);
      if (last.is_object()) {
        last["status"] = it->first.first == "instance" ? "deleted" : "cancelled";
        out += Event(s, it->first.first, Dump(last));
      }
      it = s.shown.erase(it);
    }
  }
  if (out.empty()) return;
  // Nothing new goes out on credentials that no longer admit the person (a claim of the
  // address, a reset, a password change, a sign-out): asked again right before each write that
  // carries events, besides every reauth_interval for streams that only get keep-alives.
  if (s.still_allowed && !s.still_allowed()) {
    spdlog::info("events: ending a stream of person {}: its sign-in ended", s.person_id);
    s.out->End();  // its OnEnd releases it
    return;
  }
  s.out->Write(std::move(out));  // false: the stream ended; its OnEnd releases it
  s.last_write = now;
}

void EventHub::Core::Heartbeats(const std::vector<std::shared_ptr<Stream>>& work,
                                Clock::time_point now) {
  for (const auto& s : work) {
    if (now < s->last_write + options.heartbeat_interval) continue;
    s->out->Write(": keep-alive\n\n");
    s->last_write = now;
  }
}

}  // namespace gpuwerk::api

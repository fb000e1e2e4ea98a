#include "relay/http_relay_session_log.h"

#include <pthread.h>
#include <signal.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <limits>
#include <optional>

#include "core/strings.h"
#include "core/time_format.h"

namespace gpuwerk::relay {
namespace {

int64_t UnixSeconds(std::chrono::system_clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::seconds>(t.time_since_epoch()).count();
}

int64_t Bytes(uint64_t n) {
  return static_cast<int64_t>(
      std::min<uint64_t>(n, static_cast<uint64_t>(std::numeric_limits<int64_t>::max())));
}

}  // namespace

protocol::RelaySessionReport ToWire(const RelaySessionRecord& r, bool ended) {
  protocol::RelaySessionReport report{.relay = "",
                                      .person_id = r.person_id,
                                      .key_fingerprint = r.key_fingerprint,
                                      .instance_id = r.instance_id,
                                      .hostname = r.hostname,
                                      .login = r.login,
                                      .source_address = r.source_address,
                                      .started_at = core::FormatRfc3339(UnixSeconds(r.started_at)),
                                      .ended_at = std::nullopt,
                                      .bytes_from_client = Bytes(r.bytes_from_client),
                                      .bytes_to_client = Bytes(r.bytes_to_client),
                                      .end_reason = ended ? r.end_reason : std::string()};
  if (ended) report.ended_at = core::FormatRfc3339(UnixSeconds(r.ended_at));
  return report;
}

HttpRelaySessionLog::HttpRelaySessionLog(HttpRelaySessionLogOptions options)
    : options_(std::move(options)),
      api_(protocol::ApiClient::ForService(options_.server_url, options_.token, "gpuwerk-relay",
                                           options_.request_timeout)) {}

HttpRelaySessionLog::~HttpRelaySessionLog() { Stop(); }

void HttpRelaySessionLog::Start() {
  std::lock_guard lock(mu_);
  if (started_ || stopping_) return;
  started_ = true;
  queue_.push_front(Item{.announcement = true, .ended = false, .record = {}});
  // The thread inherits a mask that blocks every signal: SIGINT and SIGTERM must reach the
  // thread that sigwaits for them, never this one.
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, &old);
  thread_ = std::thread([this] { Run(); });
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
}

void HttpRelaySessionLog::Stop() {
  {
    std::lock_guard lock(mu_);
    if (!stopping_) {
      stopping_ = true;
      drain_deadline_ = std::chrono::steady_clock::now() + options_.drain_timeout;
    }
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  std::lock_guard lock(mu_);
  stopped_ = true;
  if (!queue_.empty()) {  // never started, or left after the drain
    spdlog::warn("relay: {} relay session report(s) not sent to the server before stopping",
                 queue_.size());
    stats_.dropped += queue_.size();
    queue_.clear();
  }
  cv_.notify_all();
}

void HttpRelaySessionLog::OnStart(const RelaySessionRecord& record) {
  Enqueue(Item{.announcement = false, .ended = false, .record = record});
}

void HttpRelaySessionLog::OnEnd(const RelaySessionRecord& record) {
  Enqueue(Item{.announcement = false, .ended = true, .record = record});
}

void HttpRelaySessionLog::OnRefused(const RelayRefusalRecord& r) {
  const std::string at = core::FormatRfc3339(
      UnixSeconds(r.at.time_since_epoch().count() != 0 ? r.at : std::chrono::system_clock::now()));
  std::string key;
  for (const std::string* field :
       {&r.code, &r.source_address, &r.user, &r.key_fingerprint, &r.person_id, &r.instance_id,
        &r.expected_host_key, &r.presented_host_key}) {
    key += *field;
    key += '\0';
  }
  {
    std::lock_guard lock(mu_);
    ++stats_.refusals;
    if (stopped_) return;
    if (auto it = refusal_groups_.find(key); it != refusal_groups_.end()) {
      it->second.count = std::min<int64_t>(it->second.count + 1, 1'000'000);
      it->second.last_at = at;
    } else if (refusal_groups_.size() < protocol::kMaxRefusalGroups) {
      refusal_groups_.emplace(
          key, protocol::RelayRefusalGroup{.code = r.code,
                                           .user = r.user,
                                           .key_fingerprint = r.key_fingerprint,
                                           .person_id = r.person_id,
                                           .instance_id = r.instance_id,
                                           .source_address = r.source_address,
                                           .expected_host_key = r.expected_host_key,
                                           .presented_host_key = r.presented_host_key,
                                           .count = 1,
                                           .first_at = at,
                                           .last_at = at});
    } else {
      ++refusals_dropped_;
      ++stats_.refusals_dropped;
    }
    if (refusal_flush_at_) return;
    refusal_flush_at_ = std::chrono::steady_clock::now() + options_.refusal_interval;
  }
  cv_.notify_all();  // the sender thread now has a deadline to wait for
}

void HttpRelaySessionLog::FlushRefusalsLocked(std::chrono::steady_clock::time_point now) {
  if (!refusal_flush_at_ || (!stopping_ && now < *refusal_flush_at_)) return;
  protocol::RelayRefusalReport report;
  for (auto& [key, group] : refusal_groups_) report.refusals.push_back(std::move(group));
  report.dropped = refusals_dropped_;
  refusal_groups_.clear();
  refusals_dropped_ = 0;
  refusal_flush_at_.reset();
  queue_.push_back(
      Item{.announcement = false, .ended = false, .record = {}, .refusals = std::move(report)});
}

void HttpRelaySessionLog::Enqueue(Item item) {
  {
    std::lock_guard lock(mu_);
    if (stopped_) {
      ++stats_.dropped;
      spdlog::warn("relay: relay session {} reported after the log stopped; not sent",
                   item.record.id);
      return;
    }
    const size_t first = in_flight_ ? 1 : 0;  // the one being sent is not touched
    if (item.ended) {
      // Its start still waits: send the end instead (the server inserts the whole row).
      for (size_t i = first; i < queue_.size(); ++i) {
        Item& queued = queue_[i];
        if (!queued.announcement && !queued.ended && queued.record.id == item.record.id) {
          queued = std::move(item);
          return;
        }
      }
    }
    if (queue_.size() >= std::max<size_t>(options_.max_queued, 1)) {
      for (size_t i = first; i < queue_.size(); ++i) {
        if (queue_[i].announcement) continue;
        if (stats_.dropped % 1000 == 0) {
          spdlog::warn(
              "relay: {} relay session reports wait for the server; dropping the oldest ({} "
              "dropped so far)",
              queue_.size(), stats_.dropped + 1);
        }
        queue_.erase(queue_.begin() + static_cast<std::ptrdiff_t>(i));
        ++stats_.dropped;
        break;
      }
    }
    queue_.push_back(std::move(item));
  }
  cv_.notify_all();
}

HttpRelaySessionLog::Outcome HttpRelaySessionLog::Send(const Item& item) {
  if (item.refusals) {
    const nlohmann::json body = protocol::ToJson(*item.refusals);
    auto answer = api_.Call("POST", kRefusalsPath, &body);
    if (!answer) {
      spdlog::debug("relay: cannot send the refusal report: {}",
                    core::BoundedPrintable(answer.error().message));
      return Outcome::kRetry;
    }
    const int status = answer->status;
    if (status >= 200 && status < 300) {
      std::lock_guard lock(mu_);
      ++stats_.refusal_reports;
      return Outcome::kDone;
    }
    if (status == 401 || status == 403 || status == 408 || status >= 500) return Outcome::kRetry;
    spdlog::warn("relay: the server refused a report of {} refused login group(s) ({}): {}",
                 item.refusals->refusals.size(), status, core::BoundedPrintable(answer->text));
    return Outcome::kDrop;  // 429 too: the next period's report comes anyway
  }
  const nlohmann::json body = item.announcement ? protocol::ToJson(protocol::RelayRestarted{})
                                                : protocol::ToJson(ToWire(item.record, item.ended));
  auto answer = item.announcement
                    ? api_.Call("POST", kRestartedPath, &body)
                    : api_.Call("PUT", kSessionsPath + protocol::PathEscape(item.record.id), &body);
  const std::string what = item.announcement ? std::string("the restart announcement")
                                             : "relay session " + item.record.id;
  if (!answer) {
    spdlog::debug("relay: cannot send {}: {}", what,
                  core::BoundedPrintable(answer.error().message));
    return Outcome::kRetry;
  }
  const int status = answer->status;
  if (status >= 200 && status < 300) {
    if (item.announcement) {
      // The name the server files this relay's rows under: its credential's.
      std::string name;
      if (answer->body.is_object()) {
        if (auto it = answer->body.find("relay"); it != answer->body.end() && it->is_string()) {
          name = core::BoundedPrintable(it->get<std::string>());
        }
      }
      spdlog::info("relay: the server at {} records this relay's relay sessions as relay '{}'",
                   api_.base_url(), name);
      std::lock_guard lock(mu_);
      stats_.relay_name = std::move(name);
    }
    return Outcome::kDone;
  }
  if (status == 401 || status == 403 || status == 408 || status == 429 || status >= 500) {
    spdlog::debug("relay: the server answered {} to {}", status, what);
    if (status == 401 || status == 403) {
      spdlog::error(
          "relay: the server refused the relay's credential ({}) for {}; it must be a relay "
          "credential (gwr_..., 'gpuwerk admin relays add NAME') that is not revoked. Retrying.",
          status, what);
    }
    return Outcome::kRetry;
  }
  spdlog::error("relay: the server refused {} for good ({}): {}", what, status,
                core::BoundedPrintable(answer->text));
  return Outcome::kDrop;
}

void HttpRelaySessionLog::Run() {
  std::unique_lock lock(mu_);
  auto backoff = options_.initial_backoff;
  std::optional<std::chrono::steady_clock::time_point> retry_at;
  bool failing = false;
  while (true) {
    FlushRefusalsLocked(std::chrono::steady_clock::now());
    if (queue_.empty()) {
      if (stopping_) break;
      if (refusal_flush_at_) {
        cv_.wait_until(lock, *refusal_flush_at_);
      } else {
        cv_.wait(lock, [this] { return stopping_ || !queue_.empty() || refusal_flush_at_; });
      }
      continue;
    }
    const auto now = std::chrono::steady_clock::now();
    if (stopping_ && now >= drain_deadline_) break;
    if (retry_at && now < *retry_at) {
      auto until = *retry_at;
      if (stopping_) until = std::min(until, drain_deadline_);
      if (refusal_flush_at_) until = std::min(until, *refusal_flush_at_);
      cv_.wait_until(lock, until);
      continue;
    }
    Item item = queue_.front();
    in_flight_ = true;
    lock.unlock();
    const Outcome outcome = Send(item);
    lock.lock();
    in_flight_ = false;
    if (outcome == Outcome::kRetry) {
      ++stats_.failed_attempts;
      if (!failing) {
        spdlog::warn(
            "relay: cannot report relay sessions to the server at {}; retrying with back-off "
            "({} waiting)",
            api_.base_url(), queue_.size());
        failing = true;
      }
      retry_at = std::chrono::steady_clock::now() + backoff;
      backoff = std::min(backoff * 2, options_.max_backoff);
    } else {
      if (failing) {
        spdlog::info("relay: relay session reports reach the server again ({} waiting)",
                     queue_.size());
        failing = false;
      }
      queue_.pop_front();
      retry_at.reset();
      backoff = options_.initial_backoff;
      if (outcome == Outcome::kDone) {
        ++stats_.sent;
        if (item.announcement) stats_.announced = true;
      } else {
        ++stats_.dropped;
      }
    }
    cv_.notify_all();
  }
}

HttpRelaySessionLogStats HttpRelaySessionLog::Stats() const {
  std::lock_guard lock(mu_);
  HttpRelaySessionLogStats s = stats_;
  s.queued = queue_.size();
  return s;
}

bool HttpRelaySessionLog::WaitUntilIdle(std::chrono::milliseconds limit) const {
  std::unique_lock lock(mu_);
  return cv_.wait_for(lock, limit, [this] { return queue_.empty(); });
}

}  // namespace gpuwerk::relay

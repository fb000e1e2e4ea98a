#include "sched/desired_state_notifier.h"

#include <random>

namespace gpuwerk::sched {

using Steady = std::chrono::steady_clock;

DesiredStateNotifier::DesiredStateNotifier() {
  // Not a secret: only needs to differ between server processes.
  std::random_device rd;
  epoch_ = (static_cast<uint64_t>(rd()) << 32 | rd()) & ((uint64_t{1} << 52) - 1);
  next_version_ = epoch_ + 1;
  timer_ = std::thread([this] { TimerLoop(); });
}

DesiredStateNotifier::~DesiredStateNotifier() {
  Shutdown();
  if (timer_.joinable()) timer_.join();
}

uint64_t DesiredStateNotifier::VersionLocked(const std::string& host) {
  auto it = versions_.find(host);
  return it == versions_.end() ? epoch_ : it->second;
}

uint64_t DesiredStateNotifier::Version(const std::string& host) {
  std::lock_guard lock(mu_);
  return VersionLocked(host);
}

void DesiredStateNotifier::Notify(const std::vector<std::string>& hosts) {
  std::vector<std::pair<Callback, uint64_t>> fire;
  {
    std::lock_guard lock(mu_);
    for (const auto& host : hosts) {
      const uint64_t v = next_version_++;
      versions_[host] = v;
      for (auto it = waiters_.begin(); it != waiters_.end();) {
        if (it->second.host == host) {
          fire.emplace_back(std::move(it->second.done), v);
          it = waiters_.erase(it);
        } else {
          ++it;
        }
      }
    }
  }
  for (auto& [done, v] : fire) done(v);
  std::lock_guard listeners_lock(listeners_mu_);
  for (auto& [id, listener] : listeners_) listener(hosts);
}

uint64_t DesiredStateNotifier::AddListener(Listener listener) {
  std::lock_guard lock(listeners_mu_);
  const uint64_t id = next_listener_++;
  listeners_.emplace(id, std::move(listener));
  return id;
}

void DesiredStateNotifier::RemoveListener(uint64_t id) {
  std::lock_guard lock(listeners_mu_);
  listeners_.erase(id);
}

void DesiredStateNotifier::Wait(const std::string& host, uint64_t known,
                                std::chrono::milliseconds max_wait, Callback done) {
  uint64_t now_version;
  {
    std::lock_guard lock(mu_);
    now_version = VersionLocked(host);
    if (now_version == known && !shut_down_ && max_wait.count() > 0) {
      const uint64_t id = next_waiter_++;
      waiters_.emplace(id, Waiter{id, host, Steady::now() + max_wait, std::move(done)});
      timer_cv_.notify_all();
      return;
    }
  }
  done(now_version);
}

void DesiredStateNotifier::Shutdown() {
  std::vector<std::pair<Callback, uint64_t>> fire;
  {
    std::lock_guard lock(mu_);
    shut_down_ = true;
    for (auto& [id, w] : waiters_) fire.emplace_back(std::move(w.done), VersionLocked(w.host));
    waiters_.clear();
  }
  timer_cv_.notify_all();
  for (auto& [done, v] : fire) done(v);
}

size_t DesiredStateNotifier::waiting() {
  std::lock_guard lock(mu_);
  return waiters_.size();
}

void DesiredStateNotifier::TimerLoop() {
  std::unique_lock lock(mu_);
  while (!shut_down_) {
    auto next = Steady::time_point::max();
    for (const auto& [id, w] : waiters_) next = std::min(next, w.deadline);
    if (next == Steady::time_point::max()) {
      timer_cv_.wait(lock);
    } else {
      timer_cv_.wait_until(lock, next);
    }
    const auto now = Steady::now();
    std::vector<std::pair<Callback, uint64_t>> fire;
    for (auto it = waiters_.begin(); it != waiters_.end();) {
      if (it->second.deadline <= now) {
        fire.emplace_back(std::move(it->second.done), VersionLocked(it->second.host));
        it = waiters_.erase(it);
      } else {
        ++it;
      }
    }
    if (fire.empty()) continue;
    lock.unlock();
    for (auto& [done, v] : fire) done(v);
    lock.lock();
  }
}

}  // namespace gpuwerk::sched

#include "relay/internal/source_limiter.h"

namespace gpuwerk::relay::internal {

void SourceLimiter::Prune(const std::string& source, Clock::time_point now) {
  auto it = failures_.find(source);
  if (it == failures_.end()) return;
  while (!it->second.empty() && now - it->second.front() >= window_) it->second.pop_front();
  if (it->second.empty()) failures_.erase(it);
}

bool SourceLimiter::TryAcquire(const std::string& source, Clock::time_point now) {
  std::lock_guard lock(mu_);
  if (total_ >= max_total_) return false;
  if (open_[source] >= max_per_source_) return false;
  Prune(source, now);
  if (auto it = failures_.find(source);
      it != failures_.end() && static_cast<int>(it->second.size()) >= max_failures_) {
    if (open_[source] == 0) open_.erase(source);
    return false;
  }
  ++open_[source];
  ++total_;
  return true;
}

void SourceLimiter::Release(const std::string& source) {
  std::lock_guard lock(mu_);
  auto it = open_.find(source);
  if (it == open_.end()) return;
  --total_;
  if (--it->second <= 0) open_.erase(it);
}

void SourceLimiter::RecordAuthFailure(const std::string& source, Clock::time_point now) {
  std::lock_guard lock(mu_);
  Prune(source, now);
  auto& q = failures_[source];
  q.push_back(now);
  // Keep memory bounded however hard one source tries.
  while (static_cast<int>(q.size()) > max_failures_ + 1) q.pop_front();
}

int SourceLimiter::open_total() const {
  std::lock_guard lock(mu_);
  return total_;
}

}  // namespace gpuwerk::relay::internal

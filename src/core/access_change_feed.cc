#include "core/access_change_feed.h"

namespace gpuwerk::core {

uint64_t AccessChangeFeed::Subscribe(Listener listener) {
  std::lock_guard lock(mu_);
  const uint64_t id = next_id_++;
  listeners_.emplace(id, std::move(listener));
  return id;
}

void AccessChangeFeed::Unsubscribe(uint64_t id) {
  std::lock_guard lock(mu_);
  listeners_.erase(id);
}

void AccessChangeFeed::Publish(const AccessChange& change) {
  if (change.empty()) return;
  std::shared_lock lock(mu_);
  for (const auto& [id, l] : listeners_) l(change);
}

}  // namespace gpuwerk::core

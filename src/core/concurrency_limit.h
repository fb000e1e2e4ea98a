#pragma once

#include <atomic>
#include <optional>

namespace gpuwerk::core {

/// At most `max` holders at once, refusing rather than queueing: TryAcquire either hands out a
/// Slot at once or says no. For work that is expensive on purpose (password hashing) and runs on
/// threads that cheap requests need too: a caller told no answers 503 instead of parking one
/// more thread. Thread-safe; must outlive its slots.
class ConcurrencyLimit {
 public:
  /// A held place; given back when destroyed. Movable, not copyable.
  class Slot {
   public:
    Slot(Slot&& other) noexcept : limit_(other.limit_) { other.limit_ = nullptr; }
    Slot& operator=(Slot&&) = delete;
    Slot(const Slot&) = delete;
    Slot& operator=(const Slot&) = delete;
    ~Slot() {
      if (limit_ != nullptr) limit_->in_use_.fetch_sub(1);
    }

   private:
    friend class ConcurrencyLimit;
    explicit Slot(ConcurrencyLimit* limit) : limit_(limit) {}
    ConcurrencyLimit* limit_;
  };

  /// `max` ≥ 1 places (a smaller value counts as 1).
  explicit ConcurrencyLimit(int max) : max_(max < 1 ? 1 : max) {}
  ConcurrencyLimit(const ConcurrencyLimit&) = delete;
  ConcurrencyLimit& operator=(const ConcurrencyLimit&) = delete;

  /// A slot when fewer than max() are held; nullopt otherwise (never waits).
  std::optional<Slot> TryAcquire() {
    if (in_use_.fetch_add(1) >= max_) {
      in_use_.fetch_sub(1);
      return std::nullopt;
    }
    return Slot(this);
  }
  int max() const { return max_; }
  /// Slots held now (a snapshot).
  int in_use() const { return in_use_.load(); }

 private:
  const int max_;
  std::atomic<int> in_use_{0};
};

}  // namespace gpuwerk::core

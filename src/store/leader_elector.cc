#include "store/leader_elector.h"

#include <spdlog/spdlog.h>

#include <utility>

#include "core/check.h"
#include "core/strings.h"

namespace gpuwerk::store {

LeaderElector::LeaderElector(Database& db, Options options)
    : db_(db), options_(std::move(options)) {
  GPUWERK_CHECK(!options_.holder.empty());
  clock_ = options_.clock ? options_.clock : DatabaseClock(db_.Backend());
}

LeaderElector::~LeaderElector() { Stop(); }

int64_t LeaderElector::SteadyMs() const {
  if (options_.steady_ms) return options_.steady_ms();
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

bool LeaderElector::Holding() const {
  return epoch_.load() > 0 && SteadyMs() < valid_until_ms_.load();
}

void LeaderElector::NoteLossIfAny(const std::string& why) {
  if (Holding() || !announced_.exchange(false)) return;
  spdlog::warn(
      "leader: this server no longer holds the {} lease (epoch {}): {}; it stops the "
      "leader-only work",
      options_.name, epoch_.load(), why);
}

core::Result<bool> LeaderElector::Step() {
  std::lock_guard step(step_mu_);
  // Measured before the lease clock is read: the local bound ends before the lease does.
  const int64_t started = SteadyMs();
  auto state = db_.Write([&](Transaction& tx) {
    return LeaderLease::Acquire(tx, clock_, options_.name, options_.holder, epoch_.load(),
                                options_.lease.count());
  });
  if (!state) {
    NoteLossIfAny("renewing failed: " + state.error().message);
    return std::unexpected(state.error());
  }
  if (!state->HeldBy(options_.holder)) {
    valid_until_ms_ = 0;
    NoteLossIfAny(fmt::format("held by {} (epoch {})", core::BoundedPrintable(state->holder, 128),
                              state->epoch));
    return false;
  }
  const bool new_epoch = state->epoch != epoch_.load();
  epoch_ = state->epoch;
  valid_until_ms_ = started + options_.lease.count();
  if (new_epoch || !announced_.exchange(true)) {
    announced_ = true;
    ++gains_total_;
    spdlog::info(
        "leader: this server holds the {} lease (epoch {}, holder {}, {} ms); it runs "
        "the leader-only work",
        options_.name, state->epoch, core::BoundedPrintable(options_.holder, 128),
        options_.lease.count());
    if (options_.on_gain) options_.on_gain();
  }
  return true;
}

void LeaderElector::Start() {
  std::lock_guard lock(mu_);
  if (thread_.joinable()) return;
  stop_ = false;
  thread_ = std::thread([this] {
    std::unique_lock lock(mu_);
    while (!stop_) {
      lock.unlock();
      auto stepped = Step();
      if (!stepped) spdlog::warn("leader: lease round failed: {}", stepped.error().message);
      lock.lock();
      cv_.wait_for(lock, options_.renew_every, [this] { return stop_; });
    }
  });
}

void LeaderElector::Stop() {
  std::thread thread;
  {
    std::lock_guard lock(mu_);
    stop_ = true;
    thread = std::move(thread_);
  }
  cv_.notify_all();
  if (thread.joinable()) thread.join();
  std::lock_guard step(step_mu_);
  if (!Holding()) return;
  const int64_t epoch = epoch_.load();
  valid_until_ms_ = 0;
  announced_ = false;
  auto released = db_.Write([&](Transaction& tx) {
    return LeaderLease::Release(tx, options_.name, options_.holder, epoch);
  });
  if (!released) {
    spdlog::warn("leader: giving the {} lease up failed (it runs out on its own): {}",
                 options_.name, released.error().message);
  } else {
    spdlog::info("leader: this server gave the {} lease up (epoch {})", options_.name, epoch);
  }
}

core::Result<void> LeaderElector::Check(Transaction& tx) const {
  const int64_t epoch = epoch_.load();
  if (!Holding()) {
    ++fence_refused_total_;
    return core::Fail(NotLeaderError("this server does not hold the " + options_.name +
                                     " lease (epoch " + std::to_string(epoch) + ")"));
  }
  auto checked = LeaderLease::Check(tx, clock_, options_.name, options_.holder, epoch);
  if (checked) {
    ++fence_passed_total_;
  } else if (IsNotLeader(checked.error())) {
    ++fence_refused_total_;
  }
  return checked;
}

core::Result<std::unique_ptr<Transaction>> FencedDatabase::Begin(TxMode mode) {
  GPUWERK_ASSIGN_OR_RETURN(std::unique_ptr<Transaction> tx, inner_.Begin(mode));
  if (mode == TxMode::kWrite) GPUWERK_TRY(fence_.Check(*tx));
  return tx;
}

}  // namespace gpuwerk::store

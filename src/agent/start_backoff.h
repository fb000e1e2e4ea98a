#pragma once

#include <algorithm>
#include <chrono>

namespace gpuwerk::agent {

/// The pause before starting again a container that keeps exiting right after its start (a
/// broken sshd_config, a full disk), so the agent does not start it in a tight loop: no pause
/// for the first start, then 2, 4, 8, 16, 32 s and 60 s from there on while each start follows
/// the previous one's pause within a minute. A container that ran for a minute or more past its
/// pause before it stopped starts again at once, and its count starts over.
///
/// Time points are on the monotonic clock (std::chrono::steady_clock); the caller passes `now`,
/// so tests drive it with made-up times. Not thread-safe (one per container, used by the
/// agent's round).
class StartBackoff {
 public:
  using TimePoint = std::chrono::steady_clock::time_point;

  /// The longest pause.
  static constexpr std::chrono::seconds kMaxPause{60};
  /// A start later than this past the previous pause counts as a fresh first start.
  static constexpr std::chrono::seconds kInARowWindow{60};

  /// Whether a start may happen at `now`; when it may, counts the start and sets the pause that
  /// must pass before the next one (pause()).
  bool TryStart(TimePoint now) {
    if (starts_in_a_row_ > 0 && now < next_allowed_) return false;
    starts_in_a_row_ =
        (starts_in_a_row_ > 0 && now - next_allowed_ < kInARowWindow) ? starts_in_a_row_ + 1 : 1;
    pause_ =
        starts_in_a_row_ <= 1
            ? std::chrono::seconds(0)
            : std::min(kMaxPause, std::chrono::seconds(1 << std::min(starts_in_a_row_ - 1, 6)));
    next_allowed_ = now + pause_;
    return true;
  }

  /// The pause set by the last allowed start (0 s before any).
  std::chrono::seconds pause() const { return pause_; }
  /// Starts counted in a row (0 before any).
  int starts_in_a_row() const { return starts_in_a_row_; }

 private:
  TimePoint next_allowed_{};
  std::chrono::seconds pause_{0};
  int starts_in_a_row_ = 0;
};

}  // namespace gpuwerk::agent

#include "agent/start_backoff.h"

#include <gtest/gtest.h>

#include <optional>
#include <vector>

namespace gpuwerk::agent {
namespace {

using std::chrono::seconds;
using TimePoint = StartBackoff::TimePoint;

/// Agent rounds one second apart over `rounds` seconds from `now` against a container that exits
/// right after each start: the seconds between consecutive starts.
std::vector<long> GapsBetweenStarts(StartBackoff& b, TimePoint& now, int rounds) {
  std::vector<long> gaps;
  std::optional<TimePoint> last;
  for (int i = 0; i < rounds; ++i, now += seconds(1)) {
    if (!b.TryStart(now)) continue;
    if (last) gaps.push_back((now - *last) / seconds(1));
    last = now;
  }
  return gaps;
}

TEST(StartBackoffTest, AContainerThatKeepsExitingWaitsLongerEachTimeUpToAMinuteAndStaysThere) {
  StartBackoff b;
  TimePoint now{seconds(1000)};
  // First start, then one a round later (no pause after the first), then the doubling pauses;
  // at the cap it stays at a minute rather than starting over (a defect of the first version:
  // a start that waited out the 60 s pause counted as a fresh first start, so the pauses ran
  // 2 … 32, 60, 0, 2 … again).
  EXPECT_EQ(GapsBetweenStarts(b, now, 400),
            (std::vector<long>{1, 2, 4, 8, 16, 32, 60, 60, 60, 60, 60}));
  EXPECT_EQ(b.pause(), StartBackoff::kMaxPause);
}

TEST(StartBackoffTest, AStartIsRefusedUntilThePauseHasPassed) {
  StartBackoff b;
  const TimePoint t{seconds(50)};
  ASSERT_TRUE(b.TryStart(t));
  EXPECT_EQ(b.pause(), seconds(0));
  ASSERT_TRUE(b.TryStart(t + seconds(1)));
  EXPECT_EQ(b.pause(), seconds(2));
  EXPECT_FALSE(b.TryStart(t + seconds(2)));
  EXPECT_EQ(b.starts_in_a_row(), 2);  // a refused start is not counted
  EXPECT_TRUE(b.TryStart(t + seconds(3)));
  EXPECT_EQ(b.pause(), seconds(4));
}

TEST(StartBackoffTest, AContainerThatRanForAMinutePastItsPauseStartsAtOnceAndCountsAfresh) {
  StartBackoff b;
  TimePoint now{seconds(0)};
  GapsBetweenStarts(b, now, 100);  // into the back-off
  ASSERT_GT(b.starts_in_a_row(), 3);
  // It then ran well: the next start comes more than a minute after the pause ended.
  now += seconds(600);
  ASSERT_TRUE(b.TryStart(now));
  EXPECT_EQ(b.starts_in_a_row(), 1);
  EXPECT_EQ(b.pause(), seconds(0));
}

}  // namespace
}  // namespace gpuwerk::agent

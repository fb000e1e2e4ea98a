#include "billing/metering.h"

#include <gtest/gtest.h>

#include "core/time_format.h"

namespace gpuwerk::billing {
namespace {

constexpr int64_t kSilentAfter = 30;

int64_t At(const char* rfc3339) { return core::ParseRfc3339(rfc3339).value(); }

/// A session launched at 10:00:00 whose host reported every 10 s until 10:20:00 with a container
/// started at 10:00:05, then went silent; the host comes back at 11:00:00.
class SilentHostTest : public ::testing::Test {
 protected:
  const int64_t start_ = At("2026-11-10T10:00:00Z");
  const int64_t last_ = At("2026-11-10T10:20:00Z");
  const int64_t back_ = At("2026-11-10T11:00:00Z");
  const std::string run_ = "2026-11-10T10:00:05.123456Z";
  const Evidence before_{.at = last_, .container_started = run_};

  BillingSessionRow Session(int64_t evidence_at, std::optional<int64_t> ended = std::nullopt) {
    return {.id = "bil_1",
            .price_minor_per_hour = 65,
            .currency = "usd",
            .started_at = start_,
            .ended_at = ended,
            .evidence_at = evidence_at};
  }
};

TEST_F(SilentHostTest, ReportsWithinTheSilenceThresholdChangeNothingBilled) {
  const auto step = NextEvidence(before_, {.now = last_ + 30}, kSilentAfter);
  EXPECT_FALSE(step.gap);
  EXPECT_EQ(step.next, (Evidence{.at = last_ + 30, .container_started = run_}));
}

TEST_F(SilentHostTest, SameStartTimeAndRunningBillsTheWholeGap) {
  const auto step = NextEvidence(before_,
                                 {.now = back_,
                                  .container_reported = true,
                                  .container_started = run_,
                                  .container_running = true,
                                  .container_finished = "0001-01-01T00:00:00Z"},
                                 kSilentAfter);
  EXPECT_FALSE(step.gap);
  EXPECT_EQ(step.next.at, back_);
  // Reporting again until its delete at 11:05: billed 10:00 → 11:05, 65 minutes.
  const auto segments =
      BilledSegments(Session(back_ + 300, back_ + 300), {}, back_ + 600, kSilentAfter);
  EXPECT_EQ(BilledSeconds(segments), back_ + 300 - start_);
  EXPECT_EQ(BilledMinutes(BilledSeconds(segments)), 65);
}

TEST_F(SilentHostTest, ADifferentStartTimeBillsUpToTheOldRunsFinishAndFromTheNewStart) {
  // The host rebooted: the old run finished at 10:25:00, the container started again at 10:58:00.
  const auto step = NextEvidence(before_,
                                 {.now = back_,
                                  .container_reported = true,
                                  .container_started = "2026-11-10T10:58:00.5Z",
                                  .container_running = true,
                                  .container_finished = "2026-11-10T10:25:00.9Z"},
                                 kSilentAfter);
  ASSERT_TRUE(step.gap);
  EXPECT_EQ(*step.gap,
            (Segment{.from = At("2026-11-10T10:25:00Z"), .to = At("2026-11-10T10:58:00Z")}));
  EXPECT_EQ(step.next.container_started, "2026-11-10T10:58:00.5Z");
  // Deleted at 11:00:00: 25 + 2 minutes billed.
  const auto segments = BilledSegments(Session(back_, back_), {*step.gap}, back_, kSilentAfter);
  EXPECT_EQ(BilledSeconds(segments), 27 * 60);
}

TEST_F(SilentHostTest, ADifferentStartTimeWithNoFinishKnownBillsUpToTheLastSighting) {
  const auto step = NextEvidence(before_,
                                 {.now = back_,
                                  .container_reported = true,
                                  .container_started = "garbage",
                                  .container_running = true},
                                 kSilentAfter);
  ASSERT_TRUE(step.gap);
  EXPECT_EQ(*step.gap, (Segment{.from = last_, .to = back_}));
}

TEST_F(SilentHostTest, SameStartTimeButStoppedBillsUpToItsOwnFinish) {
  const auto step = NextEvidence(before_,
                                 {.now = back_,
                                  .container_reported = true,
                                  .container_started = run_,
                                  .container_running = false,
                                  .container_finished = "2026-11-10T10:40:00Z"},
                                 kSilentAfter);
  ASSERT_TRUE(step.gap);
  EXPECT_EQ(*step.gap, (Segment{.from = At("2026-11-10T10:40:00Z"), .to = back_}));
  // A finish time outside the silence (the engine's clock, or a lie) moves nothing before the
  // last sighting and nothing past now.
  const auto early = NextEvidence(before_,
                                  {.now = back_,
                                   .container_reported = true,
                                   .container_started = run_,
                                   .container_finished = "2026-11-10T09:00:00Z"},
                                  kSilentAfter);
  EXPECT_EQ(*early.gap, (Segment{.from = last_, .to = back_}));
  const auto late = NextEvidence(before_,
                                 {.now = back_,
                                  .container_reported = true,
                                  .container_started = run_,
                                  .container_finished = "2027-01-01T00:00:00Z"},
                                 kSilentAfter);
  EXPECT_FALSE(late.gap);
}

TEST_F(SilentHostTest, NoContainerReportedBillsUpToTheLastSighting) {
  const auto step = NextEvidence(before_, {.now = back_}, kSilentAfter);
  ASSERT_TRUE(step.gap);
  EXPECT_EQ(*step.gap, (Segment{.from = last_, .to = back_}));
  EXPECT_EQ(step.next.container_started, run_);  // kept: no new evidence about the container
}

TEST_F(SilentHostTest, AHostThatNeverReturnsBillsUpToItsLastSighting) {
  // Still active an hour later: billed up to the last sighting only.
  auto segments = BilledSegments(Session(last_), {}, back_, kSilentAfter);
  EXPECT_EQ(segments, (std::vector<Segment>{{start_, last_}}));
  // Deleted while silent: the same.
  segments = BilledSegments(Session(last_, back_), {}, back_ + 86400, kSilentAfter);
  EXPECT_EQ(segments, (std::vector<Segment>{{start_, last_}}));
  EXPECT_EQ(BilledMinutes(BilledSeconds(segments)), 20);
  // Within the threshold the host is not silent: billed up to now.
  segments = BilledSegments(Session(last_), {}, last_ + kSilentAfter, kSilentAfter);
  EXPECT_EQ(segments, (std::vector<Segment>{{start_, last_ + kSilentAfter}}));
}

TEST_F(SilentHostTest, ASessionThatEndedDuringTheSilenceHasItsGapCutAtItsEnd) {
  const auto step = NextEvidence(before_, {.now = back_}, kSilentAfter, last_ + 600);
  ASSERT_TRUE(step.gap);
  EXPECT_EQ(*step.gap, (Segment{.from = last_, .to = last_ + 600}));
  const auto segments =
      BilledSegments(Session(back_, last_ + 600), {*step.gap}, back_ + 100, kSilentAfter);
  EXPECT_EQ(segments, (std::vector<Segment>{{start_, last_}}));
}

TEST_F(SilentHostTest, GapsSplitTheBilledTime) {
  const std::vector<Segment> gaps{{start_ + 100, start_ + 200}, {start_ + 300, start_ + 400}};
  const auto segments =
      BilledSegments(Session(start_ + 500, start_ + 500), gaps, start_ + 600, kSilentAfter);
  EXPECT_EQ(segments, (std::vector<Segment>{{start_, start_ + 100},
                                            {start_ + 200, start_ + 300},
                                            {start_ + 400, start_ + 500}}));
}

}  // namespace
}  // namespace gpuwerk::billing

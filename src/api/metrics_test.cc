#include "api/metrics.h"

#include <gtest/gtest.h>

#include <stdexcept>
#include <thread>

namespace gpuwerk::api {
namespace {

bool Contains(const std::string& text, const std::string& needle) {
  return text.find(needle) != std::string::npos;
}

TEST(MetricsTest, RendersCountersAndGaugesInTextFormat) {
  Metrics m;
  m.CounterFor("gpuwerk_mail_sent_total", "Mails sent.", {{"outcome", "ok"}}).Increment();
  m.CounterFor("gpuwerk_mail_sent_total", "Mails sent.", {{"outcome", "ok"}}).Increment(2);
  m.GaugeFor("gpuwerk_hosts", "Hosts known.").Set(3);
  std::string text = m.Render();
  EXPECT_TRUE(Contains(text,
                       "# HELP gpuwerk_mail_sent_total Mails sent.\n"
                       "# TYPE gpuwerk_mail_sent_total counter\n"
                       "gpuwerk_mail_sent_total{outcome=\"ok\"} 3\n"))
      << text;
  EXPECT_TRUE(Contains(text, "# TYPE gpuwerk_hosts gauge\ngpuwerk_hosts 3\n")) << text;
}

TEST(MetricsTest, EscapesLabelValuesAndSortsLabels) {
  Metrics m;
  m.CounterFor("c_total", "Help with \\ and\nnewline.", {{"z", "a\"b\\c\nd"}, {"a", "1"}})
      .Increment();
  std::string text = m.Render();
  EXPECT_TRUE(Contains(text, "# HELP c_total Help with \\\\ and\\nnewline.\n")) << text;
  EXPECT_TRUE(Contains(text, "c_total{a=\"1\",z=\"a\\\"b\\\\c\\nd\"} 1\n")) << text;
}

TEST(MetricsTest, CallbacksRunAtScrapeTime) {
  Metrics m;
  double value = 1;
  m.AddGauge("gpuwerk_queue_length", "Entries waiting.", [&] { return value; },
             {{"gpu_type", "spark-1x"}});
  m.AddGauge("gpuwerk_broken", "Throws.", []() -> double { throw std::runtime_error("x"); });
  EXPECT_TRUE(Contains(m.Render(), "gpuwerk_queue_length{gpu_type=\"spark-1x\"} 1\n"));
  value = 2.5;
  std::string text = m.Render();
  EXPECT_TRUE(Contains(text, "gpuwerk_queue_length{gpu_type=\"spark-1x\"} 2.5\n"));
  EXPECT_TRUE(Contains(text, "# TYPE gpuwerk_broken gauge\n"));
  EXPECT_FALSE(Contains(text, "\ngpuwerk_broken "));  // the series is dropped, not the scrape
}

TEST(MetricsTest, HttpRequestsFeedCounterAndHistogram) {
  Metrics m;
  m.ObserveHttpRequest("/api/v1/ssh-keys/{id}", "GET", 200, 0.003);
  m.ObserveHttpRequest("/api/v1/ssh-keys/{id}", "GET", 200, 0.01);  // on a bucket bound
  m.ObserveHttpRequest("/api/v1/ssh-keys/{id}", "GET", 200, 7);
  m.ObserveHttpRequest("unmatched", "BREW", 404, 0.0001);
  std::string text = m.Render();
  EXPECT_TRUE(Contains(text,
                       "gpuwerk_http_requests_total{method=\"GET\",route=\"/api/v1/"
                       "ssh-keys/{id}\",status=\"200\"} 3\n"))
      << text;
  EXPECT_TRUE(Contains(text,
                       "gpuwerk_http_requests_total{method=\"other\",route=\"unmatched\","
                       "status=\"404\"} 1\n"))
      << text;
  const std::string series = "method=\"GET\",route=\"/api/v1/ssh-keys/{id}\"";
  EXPECT_TRUE(Contains(text, "# TYPE gpuwerk_http_request_duration_seconds histogram\n"));
  EXPECT_TRUE(Contains(text, "_bucket{" + series + ",le=\"0.001\"} 0\n")) << text;
  EXPECT_TRUE(Contains(text, "_bucket{" + series + ",le=\"0.005\"} 1\n"));
  EXPECT_TRUE(Contains(text, "_bucket{" + series + ",le=\"0.01\"} 2\n"));
  EXPECT_TRUE(Contains(text, "_bucket{" + series + ",le=\"5\"} 2\n"));
  EXPECT_TRUE(Contains(text, "_bucket{" + series + ",le=\"+Inf\"} 3\n"));
  const std::string sum_prefix = "gpuwerk_http_request_duration_seconds_sum{" + series + "} ";
  size_t at = text.find(sum_prefix);
  ASSERT_NE(at, std::string::npos) << text;
  EXPECT_NEAR(std::stod(text.substr(at + sum_prefix.size())), 7.013, 1e-9);
  EXPECT_TRUE(Contains(text, "gpuwerk_http_request_duration_seconds_count{" + series + "} 3\n"));
}

TEST(MetricsTest, EmptyRegistryAnnouncesHttpFamilies) {
  Metrics m;
  std::string text = m.Render();
  EXPECT_TRUE(Contains(text, "# TYPE gpuwerk_http_requests_total counter\n"));
  EXPECT_TRUE(Contains(text, "# TYPE gpuwerk_http_request_duration_seconds histogram\n"));
}

TEST(MetricsTest, ConcurrentIncrementsAreNotLost) {
  Metrics m;
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 1000; ++i) {
        m.CounterFor("x_total", "X.").Increment();
        m.ObserveHttpRequest("r", "GET", 200, 0.001);
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(m.CounterFor("x_total", "X.").Value(), 4000);
  EXPECT_TRUE(Contains(m.Render(), "_count{method=\"GET\",route=\"r\"} 4000\n"));
}

TEST(MetricsDeathTest, ConflictingRegistrationsAbort) {
  Metrics m;
  m.CounterFor("a_total", "A.");
  EXPECT_DEATH(m.GaugeFor("a_total", "A."), "invariant");
  EXPECT_DEATH(m.CounterFor("a_total", "Other help."), "invariant");
  EXPECT_DEATH(m.CounterFor("bad-name", "B."), "invariant");
  EXPECT_DEATH(m.CounterFor("b_total", "B.", {{"le", "1"}}), "invariant");
  EXPECT_DEATH(m.CounterFor("a_total", "A.").Increment(-1), "invariant");
}

}  // namespace
}  // namespace gpuwerk::api

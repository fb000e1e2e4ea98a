#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace gpuwerk::api {

/// Label name/value pairs of one series, e.g. {{"route", "/api/v1/me"}, {"method", "GET"}}. The
/// order does not matter (series are keyed by the sorted labels). Keep values from small closed
/// sets: every distinct combination is a series held forever.
using MetricLabels = std::vector<std::pair<std::string, std::string>>;

/// A monotonically increasing value. Thread-safe, lock-free.
class Counter {
 public:
  /// Adds `by` (≥ 0; a negative amount aborts, counters never go down).
  void Increment(double by = 1);
  double Value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0};
};

/// A value that goes up and down. Thread-safe, lock-free.
class Gauge {
 public:
  void Set(double value) { value_.store(value, std::memory_order_relaxed); }
  void Add(double by) { value_.fetch_add(by, std::memory_order_relaxed); }
  double Value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0};
};

/// Counts observations into cumulative buckets (Prometheus histogram). Thread-safe.
class Histogram {
 public:
  /// `upper_bounds` strictly increasing, finite; +Inf is implicit.
  explicit Histogram(std::vector<double> upper_bounds);
  /// Records one observation (e.g. a duration in seconds).
  void Observe(double value);

  struct Snapshot {
    std::vector<uint64_t> cumulative;  // one per upper bound, then +Inf (== count)
    uint64_t count = 0;
    double sum = 0;
  };
  /// A consistent copy of the counts.
  Snapshot Read() const;
  const std::vector<double>& upper_bounds() const { return upper_bounds_; }

 private:
  const std::vector<double> upper_bounds_;
  mutable std::mutex mu_;
  std::vector<uint64_t> counts_;  // per bucket, not cumulative; last is +Inf
  uint64_t count_ = 0;
  double sum_ = 0;
};

/// The process's metrics registry, rendered in the Prometheus text exposition format 0.0.4
/// (https://prometheus.io/docs/instrumenting/exposition_formats/). Built once by app/ and passed
/// by reference to whoever records metrics.
///
/// Series are created on first use and live as long as the registry: `CounterFor(name, help,
/// labels)` returns the same Counter for the same name and labels, so callers may either keep
/// the reference or look it up per event. Registering one name with two types, two help texts or
/// two bucket layouts, or an invalid metric or label name, aborts (a programming error).
///
/// Built in: `gpuwerk_http_requests_total{route,method,status}` (counter) and
/// `gpuwerk_http_request_duration_seconds{route,method}` (histogram, buckets 1 ms … 5 s), fed by
/// ObserveHttpRequest(). Thread-safe.
class Metrics {
 public:
  Metrics();
  Metrics(const Metrics&) = delete;
  Metrics& operator=(const Metrics&) = delete;

  /// The counter `name{labels}`; the reference stays valid for the registry's lifetime.
  Counter& CounterFor(std::string_view name, std::string_view help,
                      const MetricLabels& labels = {});
  /// The gauge `name{labels}`; the reference stays valid for the registry's lifetime.
  Gauge& GaugeFor(std::string_view name, std::string_view help, const MetricLabels& labels = {});
  /// The histogram `name{labels}` with `upper_bounds` (finite, increasing; +Inf implicit).
  Histogram& HistogramFor(std::string_view name, std::string_view help,
                          const std::vector<double>& upper_bounds, const MetricLabels& labels = {});

  /// A gauge whose value `fn` computes at every scrape (e.g. queue length from the store).
  /// `fn` runs on the scraping thread without the registry's lock held; an exception from it
  /// drops that series from the scrape (logged). Registering the same name and labels again
  /// replaces the callback.
  void AddGauge(std::string_view name, std::string_view help, std::function<double()> fn,
                const MetricLabels& labels = {});
  /// A counter whose value `fn` computes at every scrape (it must never decrease).
  void AddCounter(std::string_view name, std::string_view help, std::function<double()> fn,
                  const MetricLabels& labels = {});

  /// Records one HTTP request: `route` a route name (never a raw path), `method` the request
  /// method (folded to "other" unless a standard one), `status` the response status, `seconds`
  /// its duration.
  void ObserveHttpRequest(std::string_view route, std::string_view method, int status,
                          double seconds);

  /// All metrics in text format 0.0.4, families sorted by name, series by labels. Serve it with
  /// `Content-Type: text/plain; version=0.0.4; charset=utf-8`.
  std::string Render() const;

  /// The HTTP duration buckets in seconds: 0.001 … 5 (+Inf implicit).
  static const std::vector<double>& HttpDurationBuckets();

 private:
  enum class Type { kCounter, kGauge, kHistogram };
  struct Series {
    std::string label_text;  // `a="x",b="y"`, escaped, sorted by name; "" when no labels
    std::unique_ptr<Counter> counter;
    std::unique_ptr<Gauge> gauge;
    std::unique_ptr<Histogram> histogram;
    std::shared_ptr<const std::function<double()>> callback;
  };
  struct Family {
    std::string name;
    std::string help;
    Type type = Type::kCounter;
    std::vector<double> upper_bounds;
    std::map<std::string, Series> series;  // by label_text
  };

  static std::string_view TypeName(Type type);
  Series& SeriesFor(std::string_view name, std::string_view help, Type type,
                    const std::vector<double>& upper_bounds, const MetricLabels& labels);
  void AddCallback(std::string_view name, std::string_view help, Type type,
                   std::function<double()> fn, const MetricLabels& labels);

  mutable std::mutex mu_;
  std::map<std::string, Family, std::less<>> families_;
};

}  // namespace gpuwerk::api

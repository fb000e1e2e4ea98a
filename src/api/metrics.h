#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace prometheus {
class Counter;
class Gauge;
class Histogram;
class Registry;
template <typename T>
class Family;
}  // namespace prometheus

namespace gpuwerk::api {

/// Label name/value pairs of one series, e.g. {{"route", "/api/v1/me"}, {"method", "GET"}}. The
/// order does not matter (series are keyed by the sorted labels). Keep values from small closed
/// sets: every distinct combination is a series held forever.
using MetricLabels = std::vector<std::pair<std::string, std::string>>;

/// A monotonically increasing value (a prometheus-cpp counter). Thread-safe, lock-free.
class Counter {
 public:
  explicit Counter(prometheus::Counter& counter) : counter_(counter) {}
  /// Adds `by` (≥ 0; a negative amount aborts, counters never go down).
  void Increment(double by = 1);
  double Value() const;

 private:
  prometheus::Counter& counter_;
};

/// A value that goes up and down (a prometheus-cpp gauge). Thread-safe, lock-free.
class Gauge {
 public:
  explicit Gauge(prometheus::Gauge& gauge) : gauge_(gauge) {}
  void Set(double value);
  void Add(double by);
  double Value() const;

 private:
  prometheus::Gauge& gauge_;
};

/// Counts observations into cumulative buckets (a prometheus-cpp histogram). Thread-safe.
class Histogram {
 public:
  explicit Histogram(prometheus::Histogram& histogram) : histogram_(histogram) {}
  /// Records one observation (e.g. a duration in seconds).
  void Observe(double value);

 private:
  prometheus::Histogram& histogram_;
};

/// The process's metrics registry, rendered in the Prometheus text exposition format 0.0.4
/// (https://prometheus.io/docs/instrumenting/exposition_formats/). Built once by app/ and passed
/// by reference to whoever records metrics. Counters, gauges and histograms live in a
/// prometheus-cpp `Registry` and are written by its `TextSerializer` (prometheus-cpp core only:
/// gpuwerk serves /metrics itself); this class adds the checks below, series computed at scrape
/// time, families announced before their first series, and a stable order.
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
  ~Metrics();
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

  /// All metrics in text format 0.0.4, families sorted by name, series by labels (a family with
  /// no series yet shows its HELP and TYPE lines). Serve it with
  /// `Content-Type: text/plain; version=0.0.4; charset=utf-8`.
  std::string Render() const;

  /// The HTTP duration buckets in seconds: 0.001 … 5 (+Inf implicit).
  static const std::vector<double>& HttpDurationBuckets();

 private:
  enum class Type { kCounter, kGauge, kHistogram };
  using Labels = std::map<std::string, std::string>;
  struct Callback {
    Labels labels;
    std::shared_ptr<const std::function<double()>> fn;
  };
  /// What is known of one metric name: its declaration and its series.
  struct Family {
    Type type = Type::kCounter;
    std::string help;
    std::vector<double> upper_bounds;
    /// The prometheus-cpp family of `type`, registered with the first series of that kind.
    prometheus::Family<prometheus::Counter>* counter_family = nullptr;
    prometheus::Family<prometheus::Gauge>* gauge_family = nullptr;
    prometheus::Family<prometheus::Histogram>* histogram_family = nullptr;
    std::map<Labels, std::unique_ptr<Counter>> counters;
    std::map<Labels, std::unique_ptr<Gauge>> gauges;
    std::map<Labels, std::unique_ptr<Histogram>> histograms;
    std::map<Labels, Callback> callbacks;
  };

  /// The family `name`, declared on first use; aborts on a conflicting declaration. Caller holds
  /// mu_.
  Family& FamilyFor(std::string_view name, std::string_view help, Type type,
                    const std::vector<double>& upper_bounds);
  void AddCallback(std::string_view name, std::string_view help, Type type,
                   std::function<double()> fn, const MetricLabels& labels);

  std::shared_ptr<prometheus::Registry> registry_;
  prometheus::Family<prometheus::Counter>* http_requests_ = nullptr;
  prometheus::Family<prometheus::Histogram>* http_durations_ = nullptr;
  mutable std::mutex mu_;
  std::map<std::string, Family, std::less<>> families_;
  /// The HTTP series by "route\nmethod\nstatus" and "route\nmethod" (guarded by mu_): a
  /// prometheus-cpp Family::Add builds a new metric before it finds an existing series, too
  /// much for every request.
  std::unordered_map<std::string, prometheus::Counter*> http_requests_by_key_;
  std::unordered_map<std::string, prometheus::Histogram*> http_durations_by_key_;
};

}  // namespace gpuwerk::api

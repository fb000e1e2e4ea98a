#include "api/metrics.h"

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/metric_family.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <exception>
#include <tuple>

#include "core/check.h"

namespace gpuwerk::api {
namespace {

bool IsMetricName(std::string_view name) {
  if (name.empty()) return false;
  for (size_t i = 0; i < name.size(); ++i) {
    char c = name[i];
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == ':' ||
              (i > 0 && c >= '0' && c <= '9');
    if (!ok) return false;
  }
  return true;
}

bool IsLabelName(std::string_view name) {
  if (name.empty() || name.starts_with("__") || name == "le") return false;
  for (size_t i = 0; i < name.size(); ++i) {
    char c = name[i];
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' ||
              (i > 0 && c >= '0' && c <= '9');
    if (!ok) return false;
  }
  return true;
}

/// Escapes a HELP text (backslash and line feed), as the text format asks. prometheus-cpp 1.0's
/// TextSerializer writes HELP verbatim (label values it escapes itself), so families are
/// registered with the escaped text.
std::string EscapeHelp(std::string_view help) {
  std::string out;
  out.reserve(help.size());
  for (char c : help) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

/// `labels` as prometheus-cpp keys series: sorted by name; aborts on an invalid or repeated name.
std::map<std::string, std::string> SortedLabels(const MetricLabels& labels) {
  std::map<std::string, std::string> out;
  for (const auto& [name, value] : labels) {
    GPUWERK_CHECK(IsLabelName(name));
    GPUWERK_CHECK(out.emplace(name, value).second);
  }
  return out;
}

std::string_view NormalizeMethod(std::string_view method) {
  static constexpr std::string_view kKnown[] = {"GET",     "HEAD",  "POST",    "PUT",  "DELETE",
                                                "OPTIONS", "PATCH", "CONNECT", "TRACE"};
  for (std::string_view m : kKnown) {
    if (m == method) return m;
  }
  return "other";
}

bool LabelsBefore(const prometheus::ClientMetric& a, const prometheus::ClientMetric& b) {
  return std::lexicographical_compare(
      a.label.begin(), a.label.end(), b.label.begin(), b.label.end(),
      [](const prometheus::ClientMetric::Label& x, const prometheus::ClientMetric::Label& y) {
        return std::tie(x.name, x.value) < std::tie(y.name, y.value);
      });
}

constexpr std::string_view kHttpRequests = "gpuwerk_http_requests_total";
constexpr std::string_view kHttpRequestsHelp =
    "HTTP requests answered, by route, method and status.";
constexpr std::string_view kHttpDuration = "gpuwerk_http_request_duration_seconds";
constexpr std::string_view kHttpDurationHelp =
    "Time from the start of a request to its response, in seconds.";

/// Registers the prometheus-cpp family `name` that `builder` builds, with the escaped `help`.
template <class Metric>
prometheus::Family<Metric>& Register(prometheus::detail::Builder<Metric> builder,
                                     std::string_view name, std::string_view help,
                                     prometheus::Registry& registry) {
  return builder.Name(std::string(name)).Help(EscapeHelp(help)).Register(registry);
}

/// The wrapper of series `labels` in `series`, made on first use: the series is added to
/// `family` (registered with `builder` when this is its first series) with `args` (a
/// histogram's buckets).
template <class Wrapper, class Metric, class... Args>
Wrapper& SeriesIn(std::map<prometheus::Labels, std::unique_ptr<Wrapper>>& series,
                  prometheus::Family<Metric>*& family, prometheus::detail::Builder<Metric> builder,
                  std::string_view name, std::string_view help, prometheus::Registry& registry,
                  const prometheus::Labels& labels, const Args&... args) {
  std::unique_ptr<Wrapper>& wrapper = series[labels];
  if (!wrapper) {
    if (!family) family = &Register(builder, name, help, registry);
    wrapper = std::make_unique<Wrapper>(family->Add(labels, args...));
  }
  return *wrapper;
}

}  // namespace

void Counter::Increment(double by) {
  GPUWERK_CHECK(by >= 0);
  counter_.Increment(by);
}

double Counter::Value() const { return counter_.Value(); }

void Gauge::Set(double value) { gauge_.Set(value); }

void Gauge::Add(double by) {
  if (by >= 0) {
    gauge_.Increment(by);
  } else {
    gauge_.Decrement(-by);
  }
}

double Gauge::Value() const { return gauge_.Value(); }

void Histogram::Observe(double value) { histogram_.Observe(value); }

const std::vector<double>& Metrics::HttpDurationBuckets() {
  static const std::vector<double> kBuckets = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
                                               0.1,   0.25,   0.5,   1,    2.5,   5};
  return kBuckets;
}

Metrics::Metrics() : registry_(std::make_shared<prometheus::Registry>()) {
  // Declare the HTTP families from the start, so that a scrape before the first request shows
  // them (with no series), and keep their prometheus-cpp families for the per-request path.
  std::lock_guard lock(mu_);
  Family& requests = FamilyFor(kHttpRequests, kHttpRequestsHelp, Type::kCounter, {});
  requests.counter_family =
      &Register(prometheus::BuildCounter(), kHttpRequests, kHttpRequestsHelp, *registry_);
  http_requests_ = requests.counter_family;
  Family& durations =
      FamilyFor(kHttpDuration, kHttpDurationHelp, Type::kHistogram, HttpDurationBuckets());
  durations.histogram_family =
      &Register(prometheus::BuildHistogram(), kHttpDuration, kHttpDurationHelp, *registry_);
  http_durations_ = durations.histogram_family;
}

Metrics::~Metrics() = default;

Metrics::Family& Metrics::FamilyFor(std::string_view name, std::string_view help, Type type,
                                    const std::vector<double>& upper_bounds) {
  auto it = families_.find(name);
  if (it == families_.end()) {
    GPUWERK_CHECK(IsMetricName(name));
    for (size_t i = 0; i < upper_bounds.size(); ++i) {
      GPUWERK_CHECK(std::isfinite(upper_bounds[i]));
      GPUWERK_CHECK(i == 0 || upper_bounds[i - 1] < upper_bounds[i]);
    }
    Family family;
    family.type = type;
    family.help = std::string(help);
    family.upper_bounds = upper_bounds;
    it = families_.emplace(std::string(name), std::move(family)).first;
  }
  Family& family = it->second;
  GPUWERK_CHECK(family.type == type);
  GPUWERK_CHECK(family.help == help);
  GPUWERK_CHECK(family.upper_bounds == upper_bounds);
  return family;
}

Counter& Metrics::CounterFor(std::string_view name, std::string_view help,
                             const MetricLabels& labels) {
  Labels sorted = SortedLabels(labels);
  std::lock_guard lock(mu_);
  Family& family = FamilyFor(name, help, Type::kCounter, {});
  GPUWERK_CHECK(!family.callbacks.contains(sorted));
  return SeriesIn(family.counters, family.counter_family, prometheus::BuildCounter(), name, help,
                  *registry_, sorted);
}

Gauge& Metrics::GaugeFor(std::string_view name, std::string_view help, const MetricLabels& labels) {
  Labels sorted = SortedLabels(labels);
  std::lock_guard lock(mu_);
  Family& family = FamilyFor(name, help, Type::kGauge, {});
  GPUWERK_CHECK(!family.callbacks.contains(sorted));
  return SeriesIn(family.gauges, family.gauge_family, prometheus::BuildGauge(), name, help,
                  *registry_, sorted);
}

Histogram& Metrics::HistogramFor(std::string_view name, std::string_view help,
                                 const std::vector<double>& upper_bounds,
                                 const MetricLabels& labels) {
  Labels sorted = SortedLabels(labels);
  std::lock_guard lock(mu_);
  Family& family = FamilyFor(name, help, Type::kHistogram, upper_bounds);
  return SeriesIn(family.histograms, family.histogram_family, prometheus::BuildHistogram(), name,
                  help, *registry_, sorted, prometheus::Histogram::BucketBoundaries(upper_bounds));
}

void Metrics::AddCallback(std::string_view name, std::string_view help, Type type,
                          std::function<double()> fn, const MetricLabels& labels) {
  GPUWERK_CHECK(fn != nullptr);
  Labels sorted = SortedLabels(labels);
  std::lock_guard lock(mu_);
  Family& family = FamilyFor(name, help, type, {});
  GPUWERK_CHECK(!family.counters.contains(sorted) && !family.gauges.contains(sorted));
  family.callbacks[sorted] =
      Callback{sorted, std::make_shared<const std::function<double()>>(std::move(fn))};
}

void Metrics::AddGauge(std::string_view name, std::string_view help, std::function<double()> fn,
                       const MetricLabels& labels) {
  AddCallback(name, help, Type::kGauge, std::move(fn), labels);
}

void Metrics::AddCounter(std::string_view name, std::string_view help, std::function<double()> fn,
                         const MetricLabels& labels) {
  AddCallback(name, help, Type::kCounter, std::move(fn), labels);
}

void Metrics::ObserveHttpRequest(std::string_view route, std::string_view method, int status,
                                 double seconds) {
  const std::string_view m = NormalizeMethod(method);
  const std::string status_text = std::to_string(status);
  std::string key;
  key.reserve(route.size() + m.size() + status_text.size() + 2);
  key.append(route).append("\n").append(m);
  prometheus::Histogram* duration = nullptr;
  prometheus::Counter* requests = nullptr;
  {
    std::lock_guard lock(mu_);
    prometheus::Histogram*& d = http_durations_by_key_[key];
    if (!d) {
      d = &http_durations_->Add({{"route", std::string(route)}, {"method", std::string(m)}},
                                HttpDurationBuckets());
    }
    duration = d;
    key.append("\n").append(status_text);
    prometheus::Counter*& r = http_requests_by_key_[key];
    if (!r) {
      r = &http_requests_->Add(
          {{"route", std::string(route)}, {"method", std::string(m)}, {"status", status_text}});
    }
    requests = r;
  }
  requests->Increment();
  duration->Observe(seconds);
}

std::string Metrics::Render() const {
  // Every declared family (so that one without series still shows), with the series computed
  // at scrape time; callbacks run without the lock: they may take other locks or touch the store.
  struct Pending {
    std::string family;
    Type type;
    Labels labels;
    std::shared_ptr<const std::function<double()>> fn;
  };
  std::map<std::string, prometheus::MetricFamily> out;
  std::vector<Pending> pending;
  {
    std::lock_guard lock(mu_);
    for (const auto& [name, family] : families_) {
      static constexpr prometheus::MetricType kTypes[] = {prometheus::MetricType::Counter,
                                                          prometheus::MetricType::Gauge,
                                                          prometheus::MetricType::Histogram};
      out[name] = prometheus::MetricFamily{
          name, EscapeHelp(family.help), kTypes[static_cast<int>(family.type)], {}};
      for (const auto& [labels, callback] : family.callbacks) {
        pending.push_back({name, family.type, labels, callback.fn});
      }
    }
  }
  for (prometheus::MetricFamily& collected : registry_->Collect()) {
    prometheus::MetricFamily& family = out[collected.name];
    if (family.name.empty()) {
      family = std::move(collected);
    } else {
      family.metric.insert(family.metric.end(), std::make_move_iterator(collected.metric.begin()),
                           std::make_move_iterator(collected.metric.end()));
    }
  }
  for (const Pending& p : pending) {
    prometheus::ClientMetric metric;
    try {
      const double value = (*p.fn)();
      if (p.type == Type::kCounter) {
        metric.counter.value = value;
      } else {
        metric.gauge.value = value;
      }
    } catch (const std::exception& e) {
      spdlog::warn("metrics: callback for {} failed: {}", p.family, e.what());
      continue;
    } catch (...) {
      spdlog::warn("metrics: callback for {} failed", p.family);
      continue;
    }
    for (const auto& [name, value] : p.labels) metric.label.push_back({name, value});
    out[p.family].metric.push_back(std::move(metric));
  }
  std::vector<prometheus::MetricFamily> families;
  families.reserve(out.size());
  for (auto& [name, family] : out) {
    std::stable_sort(family.metric.begin(), family.metric.end(), LabelsBefore);
    families.push_back(std::move(family));
  }
  return prometheus::TextSerializer().Serialize(families);
}

}  // namespace gpuwerk::api

#include "api/metrics.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <exception>

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

/// Escapes a label value: backslash, double quote and line feed.
std::string EscapeLabelValue(std::string_view value) {
  std::string out;
  out.reserve(value.size());
  for (char c : value) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

/// Escapes a HELP text: backslash and line feed.
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

std::string LabelText(const MetricLabels& labels) {
  MetricLabels sorted = labels;
  std::sort(sorted.begin(), sorted.end());
  std::string out;
  for (size_t i = 0; i < sorted.size(); ++i) {
    GPUWERK_CHECK(IsLabelName(sorted[i].first));
    GPUWERK_CHECK(i == 0 || sorted[i].first != sorted[i - 1].first);
    if (!out.empty()) out += ',';
    out += sorted[i].first;
    out += "=\"";
    out += EscapeLabelValue(sorted[i].second);
    out += '"';
  }
  return out;
}

/// A sample value as Prometheus reads it (Go ParseFloat syntax, "+Inf", "-Inf", "NaN").
std::string FormatValue(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  return fmt::format("{}", v);
}

/// `name{labels}` or `name{labels,extra}` or `name`.
std::string SeriesName(std::string_view name, std::string_view labels, std::string_view extra) {
  std::string out(name);
  if (labels.empty() && extra.empty()) return out;
  out += '{';
  out += labels;
  if (!labels.empty() && !extra.empty()) out += ',';
  out += extra;
  out += '}';
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

constexpr std::string_view kHttpRequests = "gpuwerk_http_requests_total";
constexpr std::string_view kHttpRequestsHelp =
    "HTTP requests answered, by route, method and status.";
constexpr std::string_view kHttpDuration = "gpuwerk_http_request_duration_seconds";
constexpr std::string_view kHttpDurationHelp =
    "Time from the start of a request to its response, in seconds.";

}  // namespace

void Counter::Increment(double by) {
  GPUWERK_CHECK(by >= 0);
  value_.fetch_add(by, std::memory_order_relaxed);
}

Histogram::Histogram(std::vector<double> upper_bounds)
    : upper_bounds_(std::move(upper_bounds)), counts_(upper_bounds_.size() + 1, 0) {
  for (size_t i = 0; i < upper_bounds_.size(); ++i) {
    GPUWERK_CHECK(std::isfinite(upper_bounds_[i]));
    GPUWERK_CHECK(i == 0 || upper_bounds_[i - 1] < upper_bounds_[i]);
  }
}

void Histogram::Observe(double value) {
  // The first bucket whose upper bound is >= value (Prometheus buckets are `le`).
  size_t bucket =
      std::lower_bound(upper_bounds_.begin(), upper_bounds_.end(), value) - upper_bounds_.begin();
  std::lock_guard lock(mu_);
  ++counts_[bucket];
  ++count_;
  sum_ += value;
}

Histogram::Snapshot Histogram::Read() const {
  Snapshot s;
  std::lock_guard lock(mu_);
  s.cumulative.reserve(counts_.size());
  uint64_t running = 0;
  for (uint64_t c : counts_) {
    running += c;
    s.cumulative.push_back(running);
  }
  s.count = count_;
  s.sum = sum_;
  return s;
}

std::string_view Metrics::TypeName(Type type) {
  switch (type) {
    case Type::kCounter:
      return "counter";
    case Type::kGauge:
      return "gauge";
    case Type::kHistogram:
      return "histogram";
  }
  return "untyped";
}

const std::vector<double>& Metrics::HttpDurationBuckets() {
  static const std::vector<double> kBuckets = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
                                               0.1,   0.25,   0.5,   1,    2.5,   5};
  return kBuckets;
}

Metrics::Metrics() {
  // Announce the HTTP families from the start so that a scrape before the first request shows
  // them (with no series).
  std::lock_guard lock(mu_);
  Family& requests = families_[std::string(kHttpRequests)];
  requests.name = kHttpRequests;
  requests.help = kHttpRequestsHelp;
  requests.type = Type::kCounter;
  Family& durations = families_[std::string(kHttpDuration)];
  durations.name = kHttpDuration;
  durations.help = kHttpDurationHelp;
  durations.type = Type::kHistogram;
  durations.upper_bounds = HttpDurationBuckets();
}

Metrics::Series& Metrics::SeriesFor(std::string_view name, std::string_view help, Type type,
                                    const std::vector<double>& upper_bounds,
                                    const MetricLabels& labels) {
  // Caller holds mu_.
  auto it = families_.find(name);
  if (it == families_.end()) {
    GPUWERK_CHECK(IsMetricName(name));
    Family family;
    family.name = std::string(name);
    family.help = std::string(help);
    family.type = type;
    family.upper_bounds = upper_bounds;
    it = families_.emplace(std::string(name), std::move(family)).first;
  }
  Family& family = it->second;
  GPUWERK_CHECK(family.type == type);
  GPUWERK_CHECK(family.help == help);
  GPUWERK_CHECK(family.upper_bounds == upper_bounds);
  std::string key = LabelText(labels);
  auto [series_it, inserted] = family.series.try_emplace(key);
  if (inserted) series_it->second.label_text = key;
  return series_it->second;
}

Counter& Metrics::CounterFor(std::string_view name, std::string_view help,
                             const MetricLabels& labels) {
  std::lock_guard lock(mu_);
  Series& s = SeriesFor(name, help, Type::kCounter, {}, labels);
  GPUWERK_CHECK(s.callback == nullptr);
  if (!s.counter) s.counter = std::make_unique<Counter>();
  return *s.counter;
}

Gauge& Metrics::GaugeFor(std::string_view name, std::string_view help, const MetricLabels& labels) {
  std::lock_guard lock(mu_);
  Series& s = SeriesFor(name, help, Type::kGauge, {}, labels);
  GPUWERK_CHECK(s.callback == nullptr);
  if (!s.gauge) s.gauge = std::make_unique<Gauge>();
  return *s.gauge;
}

Histogram& Metrics::HistogramFor(std::string_view name, std::string_view help,
                                 const std::vector<double>& upper_bounds,
                                 const MetricLabels& labels) {
  std::lock_guard lock(mu_);
  Series& s = SeriesFor(name, help, Type::kHistogram, upper_bounds, labels);
  if (!s.histogram) s.histogram = std::make_unique<Histogram>(upper_bounds);
  return *s.histogram;
}

void Metrics::AddCallback(std::string_view name, std::string_view help, Type type,
                          std::function<double()> fn, const MetricLabels& labels) {
  GPUWERK_CHECK(fn != nullptr);
  std::lock_guard lock(mu_);
  Series& s = SeriesFor(name, help, type, {}, labels);
  GPUWERK_CHECK(!s.counter && !s.gauge);
  s.callback = std::make_shared<const std::function<double()>>(std::move(fn));
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
  std::string_view m = NormalizeMethod(method);
  CounterFor(kHttpRequests, kHttpRequestsHelp,
             {{"route", std::string(route)},
              {"method", std::string(m)},
              {"status", std::to_string(status)}})
      .Increment();
  HistogramFor(kHttpDuration, kHttpDurationHelp, HttpDurationBuckets(),
               {{"route", std::string(route)}, {"method", std::string(m)}})
      .Observe(seconds);
}

std::string Metrics::Render() const {
  // Evaluate callbacks first, without the lock: they may take other locks or touch the store.
  struct Pending {
    std::string family;
    std::string labels;
    std::shared_ptr<const std::function<double()>> fn;
  };
  std::vector<Pending> pending;
  {
    std::lock_guard lock(mu_);
    for (const auto& [name, family] : families_) {
      for (const auto& [labels, series] : family.series) {
        if (series.callback) pending.push_back({name, labels, series.callback});
      }
    }
  }
  std::map<std::pair<std::string, std::string>, double> evaluated;
  for (const Pending& p : pending) {
    try {
      evaluated[{p.family, p.labels}] = (*p.fn)();
    } catch (const std::exception& e) {
      spdlog::warn("metrics: callback for {} failed: {}", p.family, e.what());
    } catch (...) {
      spdlog::warn("metrics: callback for {} failed", p.family);
    }
  }

  std::string out;
  std::lock_guard lock(mu_);
  for (const auto& [name, family] : families_) {
    out += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, EscapeHelp(family.help), name,
                       TypeName(family.type));
    for (const auto& [labels, series] : family.series) {
      if (series.callback) {
        auto it = evaluated.find({name, labels});
        if (it == evaluated.end()) continue;
        out += fmt::format("{} {}\n", SeriesName(name, labels, ""), FormatValue(it->second));
      } else if (series.counter) {
        out += fmt::format("{} {}\n", SeriesName(name, labels, ""),
                           FormatValue(series.counter->Value()));
      } else if (series.gauge) {
        out += fmt::format("{} {}\n", SeriesName(name, labels, ""),
                           FormatValue(series.gauge->Value()));
      } else if (series.histogram) {
        Histogram::Snapshot snap = series.histogram->Read();
        const std::vector<double>& bounds = series.histogram->upper_bounds();
        for (size_t i = 0; i < bounds.size(); ++i) {
          out += fmt::format(
              "{} {}\n",
              SeriesName(name + "_bucket", labels, "le=\"" + FormatValue(bounds[i]) + "\""),
              snap.cumulative[i]);
        }
        out +=
            fmt::format("{} {}\n", SeriesName(name + "_bucket", labels, "le=\"+Inf\""), snap.count);
        out += fmt::format("{} {}\n", SeriesName(name + "_sum", labels, ""), FormatValue(snap.sum));
        out += fmt::format("{} {}\n", SeriesName(name + "_count", labels, ""), snap.count);
      }
    }
  }
  return out;
}

}  // namespace gpuwerk::api

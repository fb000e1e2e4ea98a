#include "api/router.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <exception>
#include <utility>

#include "core/check.h"

namespace gpuwerk::api {
namespace {

/// Splits "/a/b" into {"a", "b"}; "/" into {""}. `path` must start with '/'.
std::vector<std::string_view> SplitPath(std::string_view path) {
  std::vector<std::string_view> out;
  path.remove_prefix(1);
  while (true) {
    size_t slash = path.find('/');
    out.push_back(path.substr(0, slash));
    if (slash == std::string_view::npos) break;
    path.remove_prefix(slash + 1);
  }
  return out;
}

bool IsParamName(std::string_view name) {
  if (name.empty()) return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
  });
}

}  // namespace

void Router::Add(std::string method, std::string pattern, Handler handler, std::string route_name) {
  GPUWERK_CHECK(!method.empty());
  GPUWERK_CHECK(!pattern.empty() && pattern.front() == '/');
  GPUWERK_CHECK(handler != nullptr);
  Route route;
  for (std::string_view seg : SplitPath(pattern)) {
    // `{name...}` must be the last segment.
    GPUWERK_CHECK(route.segments.empty() || route.segments.back().kind != SegmentKind::kRest);
    bool braced = seg.size() >= 2 && seg.front() == '{' && seg.back() == '}';
    if (!braced) {
      GPUWERK_CHECK(seg.find_first_of("{}") == std::string_view::npos);
      route.segments.push_back({SegmentKind::kLiteral, std::string(seg)});
      continue;
    }
    std::string_view name = seg.substr(1, seg.size() - 2);
    SegmentKind kind = SegmentKind::kParam;
    if (name.ends_with("...")) {
      name.remove_suffix(3);
      kind = SegmentKind::kRest;
    }
    GPUWERK_CHECK(IsParamName(name));
    route.segments.push_back({kind, std::string(name)});
  }
  route.method = std::move(method);
  route.name = route_name.empty() ? pattern : std::move(route_name);
  route.pattern = std::move(pattern);
  route.handler = std::move(handler);
  std::unique_lock lock(mu_);
  for (const auto& other : routes_) {
    GPUWERK_CHECK(!(other->method == route.method && other->pattern == route.pattern));
  }
  routes_.push_back(std::make_unique<const Route>(std::move(route)));
}

bool Router::MatchSegments(const Route& route, const std::vector<std::string_view>& path,
                           std::vector<int>* score) {
  score->clear();
  size_t i = 0;
  for (const Segment& seg : route.segments) {
    if (seg.kind == SegmentKind::kRest) {
      score->push_back(0);
      return true;  // takes whatever is left, possibly nothing
    }
    if (i >= path.size()) return false;
    if (seg.kind == SegmentKind::kLiteral) {
      if (path[i] != seg.text) return false;
      score->push_back(2);
    } else {
      if (path[i].empty()) return false;
      score->push_back(1);
    }
    ++i;
  }
  return i == path.size();
}

Router::Match Router::Find(std::string_view method, std::string_view path) const {
  Match match;
  if (path.empty() || path.front() != '/') return match;
  std::vector<std::string_view> segments = SplitPath(path);
  std::vector<int> score;
  std::vector<int> best_score;
  std::vector<int> best_get_score;
  const Route* best_get = nullptr;
  std::shared_lock lock(mu_);
  for (const auto& route_ptr : routes_) {
    const Route& route = *route_ptr;
    if (!MatchSegments(route, segments, &score)) continue;
    if (match.path_route == nullptr) match.path_route = &route;
    if (std::find(match.allowed.begin(), match.allowed.end(), route.method) ==
        match.allowed.end()) {
      match.allowed.push_back(route.method);
    }
    if (route.method == method && (match.route == nullptr || score > best_score)) {
      match.route = &route;
      best_score = score;
    }
    if (route.method == "GET" && (best_get == nullptr || score > best_get_score)) {
      best_get = &route;
      best_get_score = score;
    }
  }
  if (match.route == nullptr && method == "HEAD") match.route = best_get;
  bool has_get =
      std::find(match.allowed.begin(), match.allowed.end(), "GET") != match.allowed.end();
  bool has_head =
      std::find(match.allowed.begin(), match.allowed.end(), "HEAD") != match.allowed.end();
  if (has_get && !has_head) match.allowed.push_back("HEAD");
  std::sort(match.allowed.begin(), match.allowed.end());
  return match;
}

std::string Router::RouteNameFor(const Request& request) const {
  Match match = Find(request.method, request.path);
  if (match.route != nullptr) return match.route->name;
  if (match.path_route != nullptr) return match.path_route->pattern;
  return "unmatched";
}

void Router::SetFallback(Fallback fallback) {
  auto shared = std::make_shared<const Fallback>(std::move(fallback));
  std::unique_lock lock(mu_);
  fallback_ = std::move(shared);
}

Response Router::Dispatch(Request& request) const {
  Match match = Find(request.method, request.path);
  request.path_params.clear();
  if (match.route == nullptr) {
    if (match.path_route == nullptr) {
      request.route = "unmatched";
      std::shared_ptr<const Fallback> fallback;
      {
        std::shared_lock lock(mu_);
        fallback = fallback_;
      }
      if (fallback != nullptr && *fallback) {
        if (std::optional<Response> answer = (*fallback)(request)) return std::move(*answer);
      }
      return Problem(core::Error(core::ErrorCode::kNotFound, "not_found",
                                 "no such resource: " + request.method + " " + request.path));
    }
    request.route = match.path_route->pattern;
    std::string allow;
    for (const std::string& m : match.allowed) {
      if (!allow.empty()) allow += ", ";
      allow += m;
    }
    Response r = Problem(405, core::Error(core::ErrorCode::kInvalidArgument, "method_not_allowed",
                                          "method " + request.method +
                                              " is not allowed here; "
                                              "allowed: " +
                                              allow));
    r.SetHeader("Allow", allow);
    return r;
  }

  const Route& route = *match.route;
  request.route = route.name;
  std::vector<std::string_view> segments = SplitPath(request.path);
  for (size_t i = 0; i < route.segments.size(); ++i) {
    const Segment& seg = route.segments[i];
    if (seg.kind == SegmentKind::kLiteral) continue;
    std::string raw;
    if (seg.kind == SegmentKind::kParam) {
      raw = std::string(segments[i]);
    } else {
      for (size_t j = i; j < segments.size(); ++j) {
        if (j > i) raw += '/';
        raw += segments[j];
      }
    }
    auto decoded = PercentDecode(raw, /*plus_as_space=*/false);
    if (!decoded) {
      return Problem(core::Error(core::ErrorCode::kInvalidArgument, "invalid_path",
                                 "the path has a malformed percent-escape"));
    }
    request.path_params[seg.text] = std::move(*decoded);
  }

  try {
    return route.handler(request);
  } catch (const std::exception& e) {
    spdlog::error("http handler failed: request_id={} route={} exception={}", request.request_id,
                  route.name, e.what());
  } catch (...) {
    spdlog::error("http handler failed: request_id={} route={} exception=(not std::exception)",
                  request.request_id, route.name);
  }
  core::Error error(core::ErrorCode::kInternal, "internal", "internal error");
  if (!request.request_id.empty()) {
    error.message += "; quote request id " + request.request_id + " when reporting it";
    error.details["request_id"] = request.request_id;
  }
  return Problem(error);
}

}  // namespace gpuwerk::api

#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <vector>

#include "api/http_types.h"

namespace gpuwerk::api {

/// Handles one request. Runs synchronously on an HTTP server thread; may block briefly (store,
/// password hashing). Expected failures are returned as Problem(error) responses; an exception
/// that escapes is answered with 500 (api code "internal") and logged.
using Handler = std::function<Response(Request&)>;

/// Maps (method, path) to handlers. Patterns are absolute paths whose segments are literals,
/// `{name}` (one non-empty segment, percent-decoded into Request::path_params), or, as the last
/// segment only, `{name...}` (the rest of the path, possibly empty, decoded, slashes kept), e.g.
/// `/api/v1/ssh-keys/{id}` or `/assets/{file...}`. When several patterns match, the most
/// specific wins, segment by segment: literal over `{name}` over `{name...}`. Matching is exact:
/// a trailing slash is a different path.
///
/// A HEAD request runs the GET handler when no HEAD handler is registered (the server drops the
/// body). Thread-safety: all members are safe to call concurrently; a route added while the
/// server runs serves from the next request on. Handlers run without any router lock held.
class Router {
 public:
  Router() = default;
  Router(const Router&) = delete;
  Router& operator=(const Router&) = delete;

  /// Registers `handler` for `method` (e.g. "GET") on `pattern`. `route_name` labels metrics and
  /// logs; it defaults to the pattern. Aborts (programming error) on a malformed pattern or a
  /// duplicate (method, pattern).
  void Add(std::string method, std::string pattern, Handler handler, std::string route_name = {});

  /// Answers a request whose path no route matches, in place of the 404 problem, when it returns
  /// a response (nullopt: the problem). One at most; a later call replaces it. Used by the
  /// dashboard to answer a browser's navigation to an unknown page with the app (status 404).
  using Fallback = std::function<std::optional<Response>(Request&)>;
  void SetFallback(Fallback fallback);

  /// Routes `request`: fills its path_params and route, runs the handler and returns its
  /// response. Unknown path: the fallback's answer, else a 404 problem, code "not_found". Known
  /// path, other method: 405 problem, code "method_not_allowed", with an `Allow` header. Path
  /// parameter with a malformed percent-escape: 400 problem, code "invalid_path". A handler
  /// exception: 500 problem, code "internal" (the exception text is logged, never sent).
  Response Dispatch(Request& request) const;

  /// The route name `request` would match (without running anything): the route's name, the
  /// pattern for a wrong-method path, or "unmatched".
  std::string RouteNameFor(const Request& request) const;

 private:
  enum class SegmentKind { kLiteral, kParam, kRest };
  struct Segment {
    SegmentKind kind;
    std::string text;  // the literal, or the parameter name
  };
  struct Route {
    std::string method;
    std::string pattern;
    std::string name;
    std::vector<Segment> segments;
    Handler handler;
  };
  struct Match {
    const Route* route = nullptr;       // the route for the method, if any
    const Route* path_route = nullptr;  // a route for the path with another method
    std::vector<std::string> allowed;   // methods the path accepts
  };

  static bool MatchSegments(const Route& route, const std::vector<std::string_view>& path,
                            std::vector<int>* score);
  Match Find(std::string_view method, std::string_view path) const;

  mutable std::shared_mutex mu_;
  std::vector<std::unique_ptr<const Route>> routes_;  // never removed, so Route* stay valid
  std::shared_ptr<const Fallback> fallback_;          // guarded by mu_
};

}  // namespace gpuwerk::api

// The dashboard's files, served from the binary (docs/dashboard.md "Serving").
#include "api/dashboard.h"

#include <cstdlib>
#include <string>

#include "api/router.h"

namespace gpuwerk::api {
namespace {

constexpr std::string_view kCsp =
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
    "connect-src 'self'; manifest-src 'self'; base-uri 'none'; form-action 'self'; "
    "frame-ancestors 'none'";

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

/// Calls `each` with every comma-separated element of a list-valued field (RFC 9110 §5.6.1),
/// trimmed, empty ones skipped.
template <class F>
void ForEachListElement(std::string_view value, F each) {
  while (!value.empty()) {
    size_t comma = value.find(',');
    std::string_view element = Trim(value.substr(0, comma));
    if (!element.empty()) each(element);
    if (comma == std::string_view::npos) break;
    value.remove_prefix(comma + 1);
  }
}

/// Whether `Accept-Encoding` admits gzip: a `gzip` (or `x-gzip`) or `*` coding with q > 0.
bool AcceptsGzip(const Request& req) {
  bool gzip = false;
  for (const auto& [name, value] : req.headers) {
    if (!EqualsIgnoreCase(name, "Accept-Encoding")) continue;
    ForEachListElement(value, [&](std::string_view element) {
      size_t semi = element.find(';');
      std::string_view coding = Trim(element.substr(0, semi));
      if (!EqualsIgnoreCase(coding, "gzip") && !EqualsIgnoreCase(coding, "x-gzip") &&
          coding != "*") {
        return;
      }
      bool zero = false;
      if (semi != std::string_view::npos) {
        std::string_view params = element.substr(semi + 1);
        while (!params.empty()) {
          size_t next = params.find(';');
          std::string_view p = Trim(params.substr(0, next));
          if (p.size() > 2 && (p[0] == 'q' || p[0] == 'Q') && p[1] == '=') {
            std::string q(p.substr(2));
            zero = std::strtod(q.c_str(), nullptr) <= 0.0;
          }
          if (next == std::string_view::npos) break;
          params.remove_prefix(next + 1);
        }
      }
      if (!zero) gzip = true;
    });
  }
  return gzip;
}

/// `tag` without a weak prefix (W/), for the weak comparison of If-None-Match.
std::string_view Opaque(std::string_view tag) {
  if (tag.size() > 2 && tag[0] == 'W' && tag[1] == '/') tag.remove_prefix(2);
  return tag;
}

/// Whether `If-None-Match` names one of `tags`, or is `*`.
bool NoneMatchHits(const Request& req, std::string_view tag_a, std::string_view tag_b) {
  bool hit = false;
  for (const auto& [name, value] : req.headers) {
    if (!EqualsIgnoreCase(name, "If-None-Match")) continue;
    ForEachListElement(value, [&](std::string_view element) {
      std::string_view t = Opaque(element);
      if (element == "*" || t == tag_a || (!tag_b.empty() && t == tag_b)) hit = true;
    });
  }
  return hit;
}

const WebAsset* Find(std::span<const WebAsset> assets, std::string_view path) {
  for (const WebAsset& a : assets) {
    if (a.path == path) return &a;
  }
  return nullptr;
}

}  // namespace

Response DashboardResponse(const WebAsset& asset, const Request& req) {
  std::string gzip_tag;
  if (!asset.gzip.empty() && asset.etag.size() >= 2) {
    gzip_tag = std::string(asset.etag.substr(0, asset.etag.size() - 1)) + "-gz\"";
  }
  const bool gzip = !asset.gzip.empty() && AcceptsGzip(req);
  Response r;
  r.SetHeader("ETag", gzip ? gzip_tag : std::string(asset.etag));
  r.SetHeader("Cache-Control",
              asset.immutable ? "public, max-age=31536000, immutable" : "no-cache");
  if (!asset.gzip.empty()) r.SetHeader("Vary", "Accept-Encoding");
  if (NoneMatchHits(req, asset.etag, gzip_tag)) {
    r.status = 304;
    return r;
  }
  r.status = 200;
  r.SetHeader("Content-Type", std::string(asset.content_type));
  if (gzip) {
    r.SetHeader("Content-Encoding", "gzip");
    r.body = std::string(asset.gzip);
  } else {
    r.body = std::string(asset.body);
  }
  if (asset.content_type.starts_with("text/html")) {
    r.SetHeader("Content-Security-Policy", std::string(kCsp));
    r.SetHeader("Referrer-Policy", "same-origin");
  }
  return r;
}

void RegisterDashboardRoutes(Router& router, std::span<const WebAsset> assets,
                             std::span<const std::string_view> pages) {
  const WebAsset* index = Find(assets, "/index.html");
  if (index == nullptr) std::abort();  // the build always has one (embed.mjs checks)
  for (const WebAsset& asset : assets) {
    router.Add(
        "GET", std::string(asset.path),
        [&asset](Request& req) { return DashboardResponse(asset, req); },
        asset.immutable ? "dashboard asset" : std::string(asset.path));
  }
  for (std::string_view page : pages) {
    if (page == "/index.html") continue;
    router.Add(
        "GET", std::string(page), [index](Request& req) { return DashboardResponse(*index, req); },
        "dashboard page");
  }
  // A browser's navigation (it accepts text/html) to a path nothing serves gets the app, which
  // shows its "no such page" with a way back, status 404; programs (and anything under /api/)
  // keep the 404 problem JSON.
  router.SetFallback([index](Request& req) -> std::optional<Response> {
    if (req.method != "GET" && req.method != "HEAD") return std::nullopt;
    if (req.path == "/api" || req.path.starts_with("/api/")) return std::nullopt;
    if (req.Header("Accept").find("text/html") == std::string_view::npos) return std::nullopt;
    Response r = DashboardResponse(*index, req);
    if (r.status == 200) r.status = 404;
    return r;
  });
}

}  // namespace gpuwerk::api

#pragma once

#include <span>
#include <string_view>

#include "api/http_types.h"
#include "api/web_assets.h"

namespace gpuwerk::api {

class Router;

/// Serves the dashboard (docs/dashboard.md "Serving"): `GET` (and so `HEAD`) of every file in
/// `assets` at its path, and of index.html at every path in `pages` (the single-page app's
/// routes; any other path stays the router's 404, except that a browser's navigation to one, a
/// GET accepting text/html outside /api/, gets index.html with status 404: the app says "no such
/// page"). Adds nothing under /api/. Public: no
/// credentials are read. Aborts (a programming error) when `assets` has no "/index.html" or a
/// path is registered twice.
void RegisterDashboardRoutes(Router& router, std::span<const WebAsset> assets,
                             std::span<const std::string_view> pages);

/// The answer for `asset` to `req` (exposed for tests):
/// - `Content-Type`, `ETag`, and `Cache-Control`: `public, max-age=31536000, immutable` for a
///   content-hashed file, `no-cache` (revalidate each time) for the rest, index.html included;
/// - the gzip bytes with `Content-Encoding: gzip` when the asset has them and `Accept-Encoding`
///   admits gzip (RFC 9110 §12.5.3: a `gzip` or `*` coding whose q is not 0), plus `Vary:
///   Accept-Encoding`; each representation has its own strong ETag;
/// - `304 Not Modified` without a body when `If-None-Match` names either representation's tag
///   or `*` (weak comparison, RFC 9110 §13.1.2);
/// - on HTML: the page's Content-Security-Policy (scripts, styles, images and connections from
///   this origin only; no frames, no base URI, forms to this origin) and `Referrer-Policy:
///   same-origin`.
Response DashboardResponse(const WebAsset& asset, const Request& req);

}  // namespace gpuwerk::api

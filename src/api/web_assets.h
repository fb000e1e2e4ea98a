#pragma once

// The dashboard's files, embedded in the binary. The table is generated at build time by
// web/tools/embed.mjs from the Vite build of web/ (CMake option GPUWERK_WEB, on by default); a
// build without it links web_assets_off.cc, whose only page says the dashboard was not built.
// docs/dashboard.md "Build" and "Serving".
#include <span>
#include <string_view>

namespace gpuwerk::api {

/// One file of the dashboard's build. Every view points into static storage (the binary's own
/// read-only data) and lives as long as the program.
struct WebAsset {
  std::string_view path;          ///< the URL path it is served at: "/index.html", "/assets/…"
  std::string_view content_type;  ///< e.g. "text/javascript; charset=utf-8"
  std::string_view body;          ///< the file's bytes
  std::string_view gzip;          ///< the bytes gzipped (RFC 1952); empty when not smaller
  /// A strong entity tag of `body` (RFC 9110 §8.8.3), quotes included: the first 128 bits of its
  /// SHA-256 in hex. The gzip representation's tag is this one with "-gz" before the last quote.
  std::string_view etag;
  /// The name carries a content hash (Vite's assets/NAME-HASH.EXT): cached for a year and never
  /// revalidated (`immutable`); other files are revalidated on every use.
  bool immutable = false;
};

/// Every embedded file; "/index.html" among them.
std::span<const WebAsset> WebAssets();

/// The paths the single-page app answers (web/src/routes.json): the server serves index.html at
/// each of them.
std::span<const std::string_view> DashboardPages();

/// Whether the real dashboard is embedded (false: GPUWERK_WEB=OFF, a placeholder page only).
bool DashboardBuilt();

}  // namespace gpuwerk::api

// The dashboard's files in a build configured with -DGPUWERK_WEB=OFF (no Node.js: fuzz and other
// C++-only builds): one page at "/" that says so. The API and the mailed links' pages still work.
#include <array>

#include "api/web_assets.h"

namespace gpuwerk::api {
namespace {

constexpr std::string_view kPage = R"html(<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>gpuwerk: dashboard not built</title></head>
<body style="font-family:system-ui,sans-serif;max-width:36rem;margin:4rem auto;padding:0 1rem">
<h1>Dashboard not built</h1>
<p>This gpuwerk binary was built without its web dashboard (<code>-DGPUWERK_WEB=OFF</code>).
The API under <code>/api/v1</code> and the <code>gpuwerk</code> command-line client work as
usual.</p>
<p>To get the dashboard, build with <code>-DGPUWERK_WEB=ON</code> (the default; it needs Node.js
and npm: <code>scripts/setup.sh build</code>).</p>
</body></html>
)html";

}  // namespace

std::span<const WebAsset> WebAssets() {
  static const std::array<WebAsset, 1> kAssets = {{
      {"/index.html", "text/html; charset=utf-8", kPage, {}, "\"dashboard-not-built\"", false},
  }};
  return kAssets;
}

std::span<const std::string_view> DashboardPages() {
  static constexpr std::array<std::string_view, 1> kPages = {"/"};
  return kPages;
}

bool DashboardBuilt() { return false; }

}  // namespace gpuwerk::api

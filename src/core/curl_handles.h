#pragma once

// RAII for libcurl handles, shared by every component that speaks through libcurl (SMTP, the
// Docker Engine API, the CLI's HTTP client). Include only from .cc files: it pulls in curl.h.
#include <curl/curl.h>

#include <memory>
#include <mutex>

namespace gpuwerk::core {

struct CurlEasyCleanup {
  void operator()(CURL* h) const { curl_easy_cleanup(h); }
};
struct CurlSlistFree {
  void operator()(curl_slist* l) const { curl_slist_free_all(l); }
};
/// An easy handle (curl_easy_init), cleaned up when it goes.
using CurlEasy = std::unique_ptr<CURL, CurlEasyCleanup>;
/// A header or recipient list (curl_slist_append), freed when it goes.
using CurlList = std::unique_ptr<curl_slist, CurlSlistFree>;

/// curl_global_init must not race with other curl calls: do it once, before the first handle.
inline void CurlGlobalInitOnce() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

}  // namespace gpuwerk::core

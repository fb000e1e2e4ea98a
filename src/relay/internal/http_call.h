#pragma once

#include <chrono>
#include <string>
#include <string_view>

#include "core/error.h"

namespace gpuwerk::relay::internal {

/// A server's answer: the HTTP status and the body as received.
struct HttpAnswer {
  long status = 0;
  std::string body;
};

/// One HTTP(S) request with libcurl: `method` to `url` with `Authorization: Bearer <token>`,
/// `Accept: application/json` and, when `json_body` is not empty, that body as
/// `Content-Type: application/json`. At most `timeout` in all; no signals (CURLOPT_NOSIGNAL), so
/// it is safe on any thread. Any status is an answer. Errors: kUnavailable "server_unavailable"
/// when no answer came (the message names `url` and libcurl's reason); kInternal when libcurl
/// cannot start.
core::Result<HttpAnswer> CallJson(std::string_view method, const std::string& url,
                                  const std::string& token, const std::string& json_body,
                                  std::chrono::milliseconds timeout);

}  // namespace gpuwerk::relay::internal

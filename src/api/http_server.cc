#include "api/http_server.h"

#include <memory>
#include <utility>

#include "api/internal/server_core.h"
#include "core/check.h"

namespace gpuwerk::api {

/// The pimpl of HttpServer (kept a distinct name so that Connection can name ServerCore).
class HttpServer::Impl : public internal::ServerCore {
 public:
  using ServerCore::ServerCore;
};

HttpServer::HttpServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

HttpServer::~HttpServer() {
  GPUWERK_CHECK(!impl_->IsIoThread());
  impl_->Stop();
}

core::Result<std::unique_ptr<HttpServer>> HttpServer::Start(Options options, Router& router,
                                                            Metrics& metrics) {
  if (options.threads < 1 || options.body_limit == 0 || options.header_limit == 0 ||
      options.stream_buffer_limit == 0 || options.read_timeout.count() <= 0 ||
      options.idle_timeout.count() <= 0) {
    return core::InvalidArgument("invalid_option",
                                 "HTTP server options: threads, limits and timeouts must be "
                                 "positive");
  }
  auto impl = std::make_unique<Impl>(std::move(options), router, metrics);
  GPUWERK_TRY(impl->Listen());
  impl->Run();
  return std::unique_ptr<HttpServer>(new HttpServer(std::move(impl)));
}

uint16_t HttpServer::port() const { return impl_->port(); }

size_t HttpServer::max_connections() const { return impl_->max_connections(); }

std::string HttpServer::base_url() const { return impl_->base_url(); }

void HttpServer::Stop() { impl_->Stop(); }

void AddOperationalRoutes(Router& router, Metrics& metrics, MetricsAccess may_read_metrics) {
  GPUWERK_CHECK(may_read_metrics != nullptr);
  router.Add("GET", "/healthz", [](Request& req) {
    if (auto none = RefuseBody(req); !none) return Problem(none.error());
    return Response::Json(200, {{"status", "ok"}});
  });
  router.Add("GET", "/metrics", [&metrics, may_read = std::move(may_read_metrics)](Request& req) {
    if (auto none = RefuseBody(req); !none) return Problem(none.error());
    if (auto admitted = may_read(req); !admitted) return Problem(admitted.error());
    return Response::Text(200, metrics.Render(), "text/plain; version=0.0.4; charset=utf-8");
  });
}

}  // namespace gpuwerk::api

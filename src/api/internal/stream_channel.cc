#include "api/internal/stream_channel.h"

#include "api/internal/connection.h"

namespace gpuwerk::api::internal {

void StreamChannel::Kick() {
  std::shared_ptr<Connection> connection;  // released after the lock, should it be the last owner
  std::lock_guard lock(liveness_->mu);
  if (!liveness_->alive) return;
  connection = connection_.lock();
  if (connection) connection->PostFlush();
}

}  // namespace gpuwerk::api::internal

#include "relay/internal/connection_teardown.h"

#include <spdlog/spdlog.h>

#include <chrono>
#include <mutex>

#include "relay/internal/libssh_calls.h"

namespace gpuwerk::relay::internal {

std::string CloseNotice(const std::string& reason) {
  return "gpuwerk: relay session closed: " + reason;
}

void TearDown(ConnectionHandles& handles, ChannelForwarding* forwarding, RelaySessionRecord* record,
              const std::string& end_reason, RelaySessionLog& log, ConnectionControl& control) {
  // Flush what is queued (the notice, closes) with a short bound; a stalled client costs this
  // thread at most that long.
  if (handles.client != nullptr && IsConnected(handles.client.get())) {
    ssh_set_blocking(handles.client.get(), 1);
    SetTimeout(handles.client.get(), std::chrono::milliseconds(2000));
  }
  if (forwarding != nullptr) forwarding->CloseAll();
  if (record != nullptr) {
    record->ended_at = std::chrono::system_clock::now();
    record->end_reason = end_reason.empty() ? "ended" : end_reason;
    if (forwarding != nullptr) {
      record->bytes_from_client = forwarding->bytes().from_client;
      record->bytes_to_client = forwarding->bytes().to_client;
    }
    log.OnEnd(*record);
    spdlog::info("relay: relay session {} ended ({}): {} bytes in, {} bytes out", control.id,
                 record->end_reason, record->bytes_from_client, record->bytes_to_client);
  }
  if (handles.event != nullptr) {
    ssh_event_remove_fd(handles.event.get(), control.wake_fd);
    if (handles.client != nullptr) {
      ssh_event_remove_session(handles.event.get(), handles.client.get());
    }
    if (handles.upstream != nullptr && handles.upstream_polled) {
      ssh_event_remove_session(handles.event.get(), handles.upstream.get());
    }
    handles.event.reset();
  }
  handles.upstream.reset();
  if (handles.client != nullptr) {
    {
      std::lock_guard lock(control.mu);
      control.client_fd = -1;
    }
    handles.client.reset();
  }
}

}  // namespace gpuwerk::relay::internal

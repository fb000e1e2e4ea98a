#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace gpuwerk::protocol {

/// One server-sent event (WHATWG HTML Standard, "Server-sent events", §9.2.6 "Interpreting an
/// event stream").
struct ServerSentEvent {
  std::string type = "message";  ///< the `event:` field, "message" when none
  std::string data;              ///< the `data:` lines joined with "\n"
  std::string id;                ///< the last event ID at dispatch ("" when none so far)
};

/// Parses a text/event-stream incrementally, as the WHATWG algorithm does: lines end in CRLF, LF
/// or CR; `:` starts a comment; a blank line dispatches the event (none when no data came);
/// `retry:` with only digits sets the reconnection time; an `id:` holding NUL is ignored; a
/// leading U+FEFF is skipped. Not thread-safe.
class SseParser {
 public:
  /// Feeds the next bytes; returns the events they complete, in order.
  std::vector<ServerSentEvent> Feed(std::string_view bytes);
  /// The last `retry:` in milliseconds, or -1 when none came.
  int64_t retry_ms() const { return retry_ms_; }
  /// Comment lines seen so far (the server's `: keep-alive` heartbeats).
  int64_t comments() const { return comments_; }

 private:
  void Line(std::string_view line, std::vector<ServerSentEvent>& out);

  std::string buffer_;
  bool started_ = false;  // past a possible byte order mark
  std::string data_;
  std::string type_;
  std::string last_id_;
  int64_t retry_ms_ = -1;
  int64_t comments_ = 0;
};

}  // namespace gpuwerk::protocol

// events: the person's instance and queue changes as they happen (GET /api/v1/events).
#include <algorithm>
#include <chrono>
#include <ctime>
#include <thread>

#include "cli/internal/verb_groups.h"
#include "cli/output.h"
#include "core/time_format.h"

namespace gpuwerk::cli::internal {
namespace {

using core::ErrorCode;
using nlohmann::json;

/// The options of the events verb.
struct EventOptions {
  int64_t count = 0;  ///< --count: stop after this many events (0: never)
};

/// One line for an event of GET /api/v1/events (docs/api.md "Events"), prefixed with the time
/// it arrived.
std::string EventLine(const ServerSentEvent& event, const json& data) {
  auto instance_text = [](const json& in) {
    std::string s = SafeText(Str(in, "name")) + " " + SafeText(Str(in, "status"));
    if (!Str(in, "status_reason").empty()) s += " (" + SafeText(Str(in, "status_reason")) + ")";
    return s;
  };
  auto entry_text = [](const json& e) {
    std::string s = SafeText(Str(e, "name")) + " in the " + SafeText(Str(e, "gpu_type")) +
                    " queue: " + SafeText(Str(e, "status"));
    if (Str(e, "status") == "open") s += ", position " + PositionText(e);
    if (Str(e, "status") == "launched") s += " as instance " + SafeText(Str(e, "instance_id"));
    if (!Str(e, "last_failure").empty()) {
      s += " (last failure: " + SafeText(Str(e, "last_failure")) + ")";
    }
    return s;
  };
  std::string line = core::FormatRfc3339(std::time(nullptr)) + "  ";
  if (event.type == "snapshot") {
    const json& instances = Field(data, "instances");
    const json& entries = Field(data, "queue_entries");
    const size_t n = instances.is_array() ? instances.size() : 0;
    const size_t m = entries.is_array() ? entries.size() : 0;
    line += "now: " + std::to_string(n) + (n == 1 ? " instance" : " instances");
    for (size_t i = 0; i < n; ++i) line += (i == 0 ? ": " : ", ") + instance_text(instances[i]);
    line += "; " + std::to_string(m) + (m == 1 ? " queue entry" : " queue entries");
    for (size_t i = 0; i < m; ++i) line += (i == 0 ? ": " : ", ") + entry_text(entries[i]);
  } else if (event.type == "instance") {
    line += "instance " + instance_text(data);
  } else if (event.type == "queue_entry") {
    line += "queue entry " + entry_text(data);
  } else {
    line += SafeText(event.type) + " " + SafeText(event.data);
  }
  return line;
}

core::Result<void> EventsVerb(VerbContext& ctx, const EventOptions& opt) {
  if (opt.count < 0) {
    return core::Fail(ErrorCode::kInvalidArgument, "invalid_count",
                      "--count must be a whole number from 1 (or 0 for no limit)");
  }
  GPUWERK_ASSIGN_OR_RETURN(ServerConnection server, Connect(ctx));
  int64_t printed = 0;
  int64_t retry_ms = 3000;
  bool connected = false;  // once the server has streamed to us, failures are retried
  while (true) {
    SseParser parser;
    auto sink = [&](std::string_view bytes) {
      for (const auto& event : parser.Feed(bytes)) {
        json data = json::parse(event.data, nullptr, /*allow_exceptions=*/false);
        if (data.is_discarded()) data = event.data;
        if (ctx.common.json) {
          Print(ctx, json{{"event", event.type}, {"id", event.id}, {"data", data}}.dump(
                         -1, ' ', false, json::error_handler_t::replace) +
                         "\n");
        } else {
          Print(ctx, EventLine(event, data) + "\n");
        }
        if (opt.count > 0 && ++printed >= opt.count) return false;
      }
      return true;
    };
    // The server sends a heartbeat every 15 s: 45 s of silence means the connection is gone.
    auto end = server.client().Stream("/api/v1/events", {"Accept: text/event-stream"}, sink,
                                      std::chrono::seconds(45));
    if (parser.retry_ms() >= 0) retry_ms = std::min<int64_t>(parser.retry_ms(), 60'000);
    if (end && end->stopped) return {};  // --count reached
    if (end && !end->response.ok())
      return core::Fail(server.Explain(ErrorFromResponse(end->response)));
    if (end || end.error().api_code == "stream_interrupted") connected = true;
    if (!connected) return core::Fail(server.Explain(std::move(end).error()));
    Warn(ctx,
         (end ? std::string("the server ended the event stream") : std::move(end).error().message) +
             "; reconnecting in " + std::to_string((retry_ms + 999) / 1000) + " s");
    std::this_thread::sleep_for(std::chrono::milliseconds(retry_ms));
  }
}

}  // namespace

void AddEventVerbs(CLI::App& app, const VerbRegistry& verbs) {
  auto opt = std::make_shared<EventOptions>();
  verbs
      .AddVerb(app, "events",
               "Print your instance and queue changes as they happen, one line each (Ctrl-C ends)",
               opt, &EventsVerb)
      ->add_option("--count", opt->count, "exit after this many events (the first is a snapshot)");
}

}  // namespace gpuwerk::cli::internal

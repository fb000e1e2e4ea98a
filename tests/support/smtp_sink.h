#pragma once

// A real SMTP server for tests: tests/support/smtp_sink.py (aiosmtpd) as a child process that
// stores every received message as an .eml file.
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "tests/support/listening_child.h"
#include "tests/support/source_dir.h"

namespace gpuwerk::testing {

namespace fs = std::filesystem;

inline constexpr const char* kPython = "/usr/bin/python3";

/// Why the real SMTP server cannot run here, or nullopt when it can.
inline std::optional<std::string> SinkUnavailable() {
  if (::access(kPython, X_OK) != 0) return std::string(kPython) + " is missing";
  if (std::system("/usr/bin/python3 -c 'import aiosmtpd' >/dev/null 2>&1") != 0) {
    return "python3-aiosmtpd is not installed (scripts/setup.sh installs it)";
  }
  return std::nullopt;
}

/// tests/support/smtp_sink.py as a child process (ListeningChild). Killed (and reaped) by Stop or
/// the destructor; PR_SET_PDEATHSIG kills it if this test process dies first.
class SmtpSink {
 public:
  SmtpSink() = default;
  SmtpSink(const SmtpSink&) = delete;
  SmtpSink& operator=(const SmtpSink&) = delete;

  /// Starts the sink on `port` (0: any) storing mails in `dir`; returns false with a reason in
  /// `error` when it did not report "listening <port>" within 20 s.
  bool Start(int port, const fs::path& dir, const std::vector<std::string>& extra,
             std::string* error) {
    std::vector<std::string> args = {
        kPython, (fs::path(SourceDir()) / "tests/support/smtp_sink.py").string(),
        std::to_string(port), dir.string()};
    args.insert(args.end(), extra.begin(), extra.end());
    return child_.Start(std::move(args), "the SMTP sink", error);
  }

  /// Terminates and reaps the sink; idempotent.
  void Stop() { child_.Stop(); }

  int port() const { return child_.port(); }

 private:
  ListeningChild child_;
};

}  // namespace gpuwerk::testing

#include "cli/internal/ssh_argv.h"

#include "cli/internal/verb_support.h"
#include "core/host_address.h"

namespace gpuwerk::cli::internal {

using core::ErrorCode;
using nlohmann::json;

size_t LeadingSshOptions(const std::vector<std::string>& args) {
  // ssh(1)'s options that take a value (OpenSSH 9: -B -b -c -D -E -e -F -I -i -J -L -l -m -O -o
  // -P -p -Q -R -S -W -w), read as getopt does: in the same word after the letter, or the next.
  static constexpr std::string_view kTakeValue = "BbcDEeFIiJLlmOoPpQRSWw";
  size_t i = 0;
  while (i < args.size()) {
    const std::string& a = args[i];
    if (a == "--") return i + 1;
    if (a.size() < 2 || a[0] != '-') return i;
    ++i;
    for (size_t c = 1; c < a.size(); ++c) {
      if (kTakeValue.find(a[c]) == std::string_view::npos) continue;
      if (c + 1 == a.size() && i < args.size()) ++i;  // the value is the next word
      break;
    }
  }
  return i;
}

core::Result<std::vector<std::string>> SshArgv(const json& in, const std::string& name,
                                               const std::vector<std::string>& args) {
  // The argv is built from the API's separate fields, never by splitting a command line, and
  // the destination follows `--`: whatever a host or server put in them, ssh takes no option
  // from them (issue 12).
  const json& target = in.contains("ssh") ? in["ssh"] : json();
  const std::string host = target.is_object() ? Str(target, "host") : "";
  const std::string user = target.is_object() ? Str(target, "user") : "";
  const int64_t port =
      target.is_object() && target.contains("port") && target["port"].is_number_integer()
          ? target["port"].get<int64_t>()
          : 0;
  if (host.empty() || user.empty() || port <= 0) {
    return core::Fail(
        ErrorCode::kFailedPrecondition, "not_ready",
        "instance " + name + " is " + Str(in, "status") + "; it cannot take SSH connections yet");
  }
  if (!core::IsHostAddress(host) || port > 65535 || user.starts_with('-') ||
      user.find_first_of("@ \t\r\n") != std::string::npos) {
    return core::Fail(ErrorCode::kFailedPrecondition, "unexpected_response",
                      "the server gave instance " + name +
                          " an SSH address that is not a plain host name or address; nothing "
                          "was run. Tell your operator.");
  }
  std::vector<std::string> words = {"ssh"};
  // Known-hosts entries under the instance's hostname, not the address and port: ports are
  // reused by later instances, whose new host keys would otherwise look like an attack. The
  // first connection to an instance records its key (trust on first use, without a prompt that
  // scripts cannot answer); a changed key later is refused as usual.
  const std::string hostname = Str(in, "hostname");
  if (!hostname.empty() && core::IsHostAddress(hostname)) {
    words.insert(words.end(),
                 {"-o", "HostKeyAlias=" + hostname, "-o", "StrictHostKeyChecking=accept-new"});
  }
  words.insert(words.end(), {"-p", std::to_string(port)});
  // The person's own ssh options (`-i KEY`, `-o …`, `-L …`) go before `--`, the remote command
  // after the destination.
  const size_t command = LeadingSshOptions(args);
  for (size_t i = 0; i < command; ++i) {
    if (args[i] != "--") words.push_back(args[i]);
  }
  words.insert(words.end(), {"--", user + "@" + host});
  for (size_t i = command; i < args.size(); ++i) words.push_back(args[i]);
  return words;
}
}  // namespace gpuwerk::cli::internal

#include "agent/network_isolation.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <spawn.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>

namespace gpuwerk::agent {
namespace {

using core::ErrorCode;

constexpr std::string_view kBridges = "gwi+";  // every instance network's bridge

/// The outcome of one command: its exit status (-1: it could not be run) and its stderr.
struct CommandResult {
  int status = -1;
  std::string err;
};

/// Runs `argv` (found on PATH, or in /usr/sbin and /sbin) with `input` on its stdin; waits.
CommandResult RunCommand(const std::vector<std::string>& argv, std::string_view input = "") {
  CommandResult out;
  const int in_fd = ::memfd_create("gpuwerk-rules", MFD_CLOEXEC);
  if (in_fd < 0) {
    out.err = std::strerror(errno);
    return out;
  }
  size_t written = 0;
  while (written < input.size()) {
    const ssize_t n = ::write(in_fd, input.data() + written, input.size() - written);
    if (n <= 0) break;
    written += static_cast<size_t>(n);
  }
  ::lseek(in_fd, 0, SEEK_SET);
  int err_pipe[2];
  if (::pipe2(err_pipe, O_CLOEXEC) != 0) {
    out.err = std::strerror(errno);
    ::close(in_fd);
    return out;
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, in_fd, 0);
  posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, err_pipe[1], 2);
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  // Agents run as services whose PATH may lack the sbin directories.
  std::string path = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
  char* env[] = {path.data(), nullptr};
  pid_t pid = 0;
  const int rc = ::posix_spawnp(&pid, args[0], &actions, nullptr, args.data(), env);
  posix_spawn_file_actions_destroy(&actions);
  ::close(err_pipe[1]);
  ::close(in_fd);
  if (rc != 0) {
    ::close(err_pipe[0]);
    out.err = fmt::format("cannot run {}: {}", argv[0], std::strerror(rc));
    return out;
  }
  char buf[512];
  ssize_t n = 0;
  while ((n = ::read(err_pipe[0], buf, sizeof(buf))) > 0) {
    if (out.err.size() < 2000) out.err.append(buf, static_cast<size_t>(n));
  }
  ::close(err_pipe[0]);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  out.status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  while (!out.err.empty() && (out.err.back() == '\n' || out.err.back() == ' ')) out.err.pop_back();
  return out;
}

std::string Tool(bool ipv6, std::string_view suffix = "") {
  return fmt::format("{}{}", ipv6 ? "ip6tables" : "iptables", suffix);
}

}  // namespace

std::string InstanceNetworkName(std::string_view instance_id) {
  // FNV-1a, 64 bits; 48 of them name the network.
  uint64_t h = 14695981039346656037ull;
  for (unsigned char c : instance_id) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return fmt::format("{}{:012x}", kInstanceNetworkPrefix, h & 0xffffffffffffull);
}

core::Result<std::string> CanonicalCidr(std::string_view text, bool* ipv6) {
  const auto bad = [&] {
    return core::InvalidArgument(
        "invalid_cidr", fmt::format("\"{}\" is not an address or CIDR (e.g. 10.0.0.0/8, fd00::/8)",
                                    text.substr(0, 64)));
  };
  const size_t slash = text.find('/');
  const std::string address(text.substr(0, slash));
  const bool v6 = address.find(':') != std::string::npos;
  unsigned char bytes[16] = {};
  if (::inet_pton(v6 ? AF_INET6 : AF_INET, address.c_str(), bytes) != 1) return bad();
  const int max = v6 ? 128 : 32;
  int len = max;
  if (slash != std::string_view::npos) {
    const std::string_view digits = text.substr(slash + 1);
    if (digits.empty() || digits.size() > 3) return bad();
    len = 0;
    for (char c : digits) {
      if (c < '0' || c > '9') return bad();
      len = len * 10 + (c - '0');
    }
    if (len > max) return bad();
  }
  // Host bits cleared, so that the rule says what it matches.
  for (int bit = len; bit < max; ++bit)
    bytes[bit / 8] &= static_cast<unsigned char>(~(0x80 >> (bit % 8)));
  char buf[INET6_ADDRSTRLEN] = {};
  ::inet_ntop(v6 ? AF_INET6 : AF_INET, bytes, buf, sizeof(buf));
  if (ipv6 != nullptr) *ipv6 = v6;
  return fmt::format("{}/{}", buf, len);
}

core::Result<NetworkIsolationSettings> ParseNetworkIsolation(
    std::string_view enabled_text, const std::vector<std::string>& deny,
    const std::vector<std::string>& allow) {
  NetworkIsolationSettings out;
  if (enabled_text == "on") {
    out.enabled = true;
  } else if (enabled_text == "off") {
    out.enabled = false;
  } else {
    return core::InvalidArgument("invalid_option",
                                 fmt::format("instance_network_isolation is on or off, not \"{}\"",
                                             enabled_text.substr(0, 32)));
  }
  const auto canonical = [](const std::vector<std::string>& list,
                            std::string_view option) -> core::Result<std::vector<std::string>> {
    std::vector<std::string> result;
    for (const std::string& entry : list) {
      auto cidr = CanonicalCidr(entry, nullptr);
      if (!cidr) {
        return core::InvalidArgument("invalid_option",
                                     fmt::format("{}: {}", option, cidr.error().message));
      }
      result.push_back(std::move(*cidr));
    }
    return result;
  };
  GPUWERK_ASSIGN_OR_RETURN(out.deny, canonical(deny, "instance_network_deny"));
  GPUWERK_ASSIGN_OR_RETURN(out.allow, canonical(allow, "instance_network_allow"));
  return out;
}

std::string IsolationRuleset(const NetworkIsolationSettings& settings, bool ipv6) {
  const std::string reject = ipv6 ? "-j REJECT --reject-with icmp6-adm-prohibited"
                                  : "-j REJECT --reject-with icmp-admin-prohibited";
  const auto of_family = [&](const std::vector<std::string>& list) {
    std::vector<std::string> out;
    for (const std::string& entry : list) {
      bool v6 = false;
      auto cidr = CanonicalCidr(entry, &v6);
      if (cidr && v6 == ipv6) out.push_back(*cidr);
    }
    return out;
  };
  const std::vector<std::string> allow = of_family(settings.allow);
  const std::vector<std::string> deny = of_family(settings.deny);
  std::string r = "*filter\n";
  r += fmt::format(":{} - [0:0]\n:{} - [0:0]\n:{} - [0:0]\n", kInputChain, kForwardChain,
                   kOutputChain);
  const std::string replies = "-m conntrack --ctstate ESTABLISHED,RELATED -j RETURN";
  // To the host itself: only replies and what the operator allows.
  r += fmt::format("-A {} -i {} {}\n", kInputChain, kBridges, replies);
  for (const std::string& a : allow) {
    r += fmt::format("-A {} -i {} -d {} -j RETURN\n", kInputChain, kBridges, a);
  }
  r += fmt::format("-A {} -i {} {}\n", kInputChain, kBridges, reject);
  // Through the host: never into another instance network; allow, then deny; the rest passes.
  r += fmt::format("-A {} -i {} {}\n", kForwardChain, kBridges, replies);
  r += fmt::format("-A {} -i {} -o {} {}\n", kForwardChain, kBridges, kBridges, reject);
  for (const std::string& a : allow) {
    r += fmt::format("-A {} -i {} -d {} -j RETURN\n", kForwardChain, kBridges, a);
  }
  for (const std::string& d : deny) {
    r += fmt::format("-A {} -i {} -d {} {}\n", kForwardChain, kBridges, d, reject);
  }
  // Into an instance network: replies and published ports (DNAT) only.
  const std::string inbound = "-m conntrack --ctstate ESTABLISHED,RELATED,DNAT -j RETURN";
  r += fmt::format("-A {} -o {} {}\n", kForwardChain, kBridges, inbound);
  r += fmt::format("-A {} -o {} {}\n", kForwardChain, kBridges, reject);
  // From the host's own processes (a relay's tunnel, anything else): the same.
  r += fmt::format("-A {} -o {} {}\n", kOutputChain, kBridges, inbound);
  r += fmt::format("-A {} -o {} {}\n", kOutputChain, kBridges, reject);
  r += "COMMIT\n";
  return r;
}

core::Result<void> InstallNetworkIsolation(const NetworkIsolationSettings& settings) {
  // Several agents on one host (tests, `up` beside a service) install the same rules: one at a
  // time, so that a hook is never added twice.
  const int lock =
      ::open("/run/gpuwerk-network-isolation.lock", O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (lock >= 0) ::flock(lock, LOCK_EX);
  core::Result<void> result;
  for (const bool ipv6 : {false, true}) {
    const CommandResult restored = RunCommand({Tool(ipv6, "-restore"), "-w", "5", "--noflush"},
                                              IsolationRuleset(settings, ipv6));
    if (restored.status != 0) {
      result = core::Fail(
          ErrorCode::kUnavailable, "network_isolation_unavailable",
          fmt::format("{} failed ({}): {}", Tool(ipv6, "-restore"), restored.status, restored.err));
      break;
    }
    for (const auto& [hook, chain] :
         {std::pair{"INPUT", kInputChain}, std::pair{"FORWARD", kForwardChain},
          std::pair{"OUTPUT", kOutputChain}}) {
      const std::string target(chain);
      if (RunCommand({Tool(ipv6), "-w", "5", "-C", hook, "-j", target}).status == 0) continue;
      const CommandResult inserted =
          RunCommand({Tool(ipv6), "-w", "5", "-I", hook, "1", "-j", target});
      if (inserted.status != 0) {
        result = core::Fail(ErrorCode::kUnavailable, "network_isolation_unavailable",
                            fmt::format("{} -I {} failed ({}): {}", Tool(ipv6), hook,
                                        inserted.status, inserted.err));
        break;
      }
    }
    if (!result) break;
  }
  if (lock >= 0) ::close(lock);
  return result;
}

std::string PrepareNetworkIsolation(const NetworkIsolationSettings& settings) {
  if (!settings.enabled) {
    return "network: instance_network_isolation is off: instances share the engine's default "
           "bridge and reach each other, this host and its networks";
  }
  if (auto installed = InstallNetworkIsolation(settings); !installed) {
    return "network: the filter rules are not installed (" + installed.error().message +
           "): instances have networks of their own but may reach this host and its networks";
  }
  return "";
}

void RemoveNetworkIsolation() {
  for (const bool ipv6 : {false, true}) {
    for (const auto& [hook, chain] :
         {std::pair{"INPUT", kInputChain}, std::pair{"FORWARD", kForwardChain},
          std::pair{"OUTPUT", kOutputChain}}) {
      const std::string target(chain);
      for (int i = 0; i < 16; ++i) {
        if (RunCommand({Tool(ipv6), "-w", "5", "-D", hook, "-j", target}).status != 0) break;
      }
      RunCommand({Tool(ipv6), "-w", "5", "-F", target});
      RunCommand({Tool(ipv6), "-w", "5", "-X", target});
    }
  }
}

}  // namespace gpuwerk::agent

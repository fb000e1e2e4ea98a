#include "agent/network_isolation.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <spawn.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <map>
#include <set>
#include <utility>

#include "core/strings.h"

namespace gpuwerk::agent {
namespace {

using core::ErrorCode;

constexpr std::string_view kBridges = "gwi+";  // every instance network's bridge

/// At most this much of a tool's stdout is read (an iptables-save of a host with many rules).
constexpr size_t kMaxToolOutput = 16u << 20;
/// Tries of a repair whose transaction failed because the table changed meanwhile.
constexpr int kRepairAttempts = 4;

/// The hooks and the agent's chain each jumps to, in the order FilterState lists them.
constexpr std::array<std::pair<std::string_view, std::string_view>, 3> kHooks = {
    std::pair{"INPUT", kInputChain}, std::pair{"FORWARD", kForwardChain},
    std::pair{"OUTPUT", kOutputChain}};

/// Several agents on one host (tests, `up` beside a service) check and repair the same rules: one
/// at a time, so that a jump is never added twice. Held while alive.
class HostLock {
 public:
  HostLock()
      : fd_(::open("/run/gpuwerk-network-isolation.lock", O_RDWR | O_CREAT | O_CLOEXEC, 0600)) {
    if (fd_ >= 0) ::flock(fd_, LOCK_EX);
  }
  ~HostLock() {
    if (fd_ >= 0) ::close(fd_);
  }
  HostLock(const HostLock&) = delete;
  HostLock& operator=(const HostLock&) = delete;

 private:
  int fd_;
};

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

FirewallCommandResult RunFirewallTool(const std::vector<std::string>& argv,
                                      std::string_view input) {
  FirewallCommandResult out;
  if (argv.empty()) {
    out.err = "no program";
    return out;
  }
  const int in_fd = ::memfd_create("gpuwerk-rules-in", MFD_CLOEXEC);
  const int out_fd = ::memfd_create("gpuwerk-rules-out", MFD_CLOEXEC);
  int err_pipe[2] = {-1, -1};
  if (in_fd < 0 || out_fd < 0 || ::pipe2(err_pipe, O_CLOEXEC) != 0) {
    out.err = std::strerror(errno);
    for (const int fd : {in_fd, out_fd}) {
      if (fd >= 0) ::close(fd);
    }
    return out;
  }
  size_t written = 0;
  while (written < input.size()) {
    const ssize_t n = ::write(in_fd, input.data() + written, input.size() - written);
    if (n <= 0) break;
    written += static_cast<size_t>(n);
  }
  ::lseek(in_fd, 0, SEEK_SET);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, in_fd, 0);
  posix_spawn_file_actions_adddup2(&actions, out_fd, 1);  // a file: the child never waits on it
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
    ::close(out_fd);
    out.err = fmt::format("cannot run {}: {}", argv[0], std::strerror(rc));
    return out;
  }
  char buf[4096];
  ssize_t n = 0;
  while ((n = ::read(err_pipe[0], buf, sizeof(buf))) > 0) {
    if (out.err.size() < 2000) out.err.append(buf, static_cast<size_t>(n));
  }
  ::close(err_pipe[0]);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  out.status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  ::lseek(out_fd, 0, SEEK_SET);
  while (out.out.size() < kMaxToolOutput &&
         (n = ::read(out_fd, buf, std::min(sizeof(buf), kMaxToolOutput - out.out.size()))) > 0) {
    out.out.append(buf, static_cast<size_t>(n));
  }
  ::close(out_fd);
  if (out.err.size() > 2000) out.err.resize(2000);
  while (!out.err.empty() && (out.err.back() == '\n' || out.err.back() == ' ')) out.err.pop_back();
  return out;
}

FilterState ReadFilterState(std::string_view save_output) {
  FilterState state;
  for (const auto& [hook, chain] : kHooks) {
    state.hooks.push_back({.hook = std::string(hook), .chain = std::string(chain)});
  }
  std::set<std::string, std::less<>> declared;
  std::map<std::string, int, std::less<>> rules;  // rules listed so far, per chain
  bool filter = false;
  size_t pos = 0;
  while (pos < save_output.size()) {
    size_t end = save_output.find('\n', pos);
    if (end == std::string_view::npos) end = save_output.size();
    const std::string_view line = core::Trim(save_output.substr(pos, end - pos), core::kWhitespace);
    pos = end + 1;
    if (line.starts_with('*')) {
      filter = line == "*filter";
      continue;
    }
    if (!filter) continue;
    if (line.starts_with(':')) {
      declared.emplace(line.substr(1, line.find(' ') - 1));
      continue;
    }
    if (!line.starts_with("-A ")) continue;
    const std::string_view rest = line.substr(3);
    const std::string_view chain = rest.substr(0, rest.find(' '));
    const int number = ++rules[std::string(chain)];
    for (HookPlacement& h : state.hooks) {
      if (chain != h.hook) continue;
      if (line == fmt::format("-A {} -j {}", h.hook, h.chain)) {
        ++h.jumps;
        if (h.position == 0) h.position = number;
      } else if (number == 1) {
        h.above = std::string(line);
      }
    }
  }
  for (HookPlacement& h : state.hooks) {
    if (h.position == 1) h.above.clear();
  }
  for (const auto& [hook, chain] : kHooks) {
    const auto listed = rules.find(chain);
    if (!declared.contains(chain) || listed == rules.end() || listed->second == 0) {
      state.missing.emplace_back(chain);
    }
  }
  return state;
}

std::string HookRepairRuleset(const std::vector<HookPlacement>& hooks) {
  std::string r;
  for (const HookPlacement& h : hooks) {
    if (h.First()) continue;
    for (int i = 0; i < h.jumps; ++i) r += fmt::format("-D {} -j {}\n", h.hook, h.chain);
    r += fmt::format("-I {} 1 -j {}\n", h.hook, h.chain);
  }
  return r.empty() ? r : "*filter\n" + r + "COMMIT\n";
}

namespace {

/// The sentence for the log of a jump HookRepairRuleset set right.
IsolationRepair DescribeHookRepair(const HookPlacement& h, bool ipv6) {
  IsolationRepair r{.ipv6 = ipv6};
  if (h.jumps == 0) {
    r.kind = IsolationRepair::Kind::kJumpInserted;
    r.what = fmt::format("{} had no jump to {}: inserted it as rule 1", h.hook, h.chain);
  } else if (h.position != 1) {
    r.kind = IsolationRepair::Kind::kJumpMoved;
    r.what = fmt::format(
        "the jump to {} was rule {} of {}, below \"{}\" (another program's rule, which decides "
        "before gpuwerk's): moved it to rule 1",
        h.chain, h.position, h.hook, core::BoundedPrintable(h.above, 200));
  } else {
    r.kind = IsolationRepair::Kind::kJumpMoved;
    r.what = fmt::format("{} held {} jumps to {}: left one, as rule 1", h.hook, h.jumps, h.chain);
  }
  return r;
}

core::Error Unavailable(std::string message) {
  return core::Error{ErrorCode::kUnavailable, "network_isolation_unavailable", std::move(message)};
}

}  // namespace

core::Result<std::vector<IsolationRepair>> KeepNetworkIsolation(
    const NetworkIsolationSettings& settings, const FirewallRunner& run) {
  const HostLock lock;
  std::vector<IsolationRepair> repairs;
  for (const bool ipv6 : {false, true}) {
    std::string failed;
    bool settled = false;
    for (int attempt = 0; attempt < kRepairAttempts && !settled; ++attempt) {
      const FirewallCommandResult saved = run({Tool(ipv6, "-save"), "-t", "filter"}, "");
      if (saved.status != 0) {
        return core::Fail(Unavailable(
            fmt::format("{} failed ({}): {}", Tool(ipv6, "-save"), saved.status, saved.err)));
      }
      const FilterState state = ReadFilterState(saved.out);
      if (!state.missing.empty()) {
        // Flushed or deleted (`iptables -F`, a firewall reload): the whole ruleset again, then
        // the hooks at the next read.
        const FirewallCommandResult restored =
            run({Tool(ipv6, "-restore"), "-w", "5", "--noflush"}, IsolationRuleset(settings, ipv6));
        if (restored.status != 0) {
          failed = fmt::format("{} failed ({}): {}", Tool(ipv6, "-restore"), restored.status,
                               restored.err);
          continue;
        }
        std::string names;
        for (const std::string& m : state.missing) names += (names.empty() ? "" : ", ") + m;
        repairs.push_back(
            {.kind = IsolationRepair::Kind::kChainsRestored,
             .ipv6 = ipv6,
             .what = fmt::format("{} were gone or empty: installed the rules again", names)});
        continue;
      }
      const std::string fix = HookRepairRuleset(state.hooks);
      if (fix.empty()) {
        settled = true;
        break;
      }
      // Fails as a whole when another program changed the hook since the read: read again.
      const FirewallCommandResult applied =
          run({Tool(ipv6, "-restore"), "-w", "5", "--noflush"}, fix);
      if (applied.status != 0) {
        failed = fmt::format("{} (moving the jumps first) failed ({}): {}", Tool(ipv6, "-restore"),
                             applied.status, applied.err);
        continue;
      }
      for (const HookPlacement& h : state.hooks) {
        if (!h.First()) repairs.push_back(DescribeHookRepair(h, ipv6));
      }
      settled = true;
    }
    if (!settled) {
      return core::Fail(Unavailable(
          failed.empty() ? fmt::format("{}: the rules kept changing", Tool(ipv6)) : failed));
    }
  }
  return repairs;
}

core::Result<std::vector<IsolationRepair>> InstallNetworkIsolation(
    const NetworkIsolationSettings& settings, const FirewallRunner& run) {
  {
    const HostLock lock;
    for (const bool ipv6 : {false, true}) {
      const FirewallCommandResult restored =
          run({Tool(ipv6, "-restore"), "-w", "5", "--noflush"}, IsolationRuleset(settings, ipv6));
      if (restored.status != 0) {
        return core::Fail(Unavailable(fmt::format("{} failed ({}): {}", Tool(ipv6, "-restore"),
                                                  restored.status, restored.err)));
      }
    }
  }
  return KeepNetworkIsolation(settings, run);
}

std::string PrepareNetworkIsolation(const NetworkIsolationSettings& settings,
                                    std::vector<IsolationRepair>* repairs) {
  if (!settings.enabled) {
    return "network: instance_network_isolation is off: instances share the engine's default "
           "bridge and reach each other, this host and its networks";
  }
  auto installed = InstallNetworkIsolation(settings);
  if (!installed) {
    return "network: the filter rules are not installed (" + installed.error().message +
           "): instances have networks of their own but may reach this host and its networks";
  }
  if (repairs != nullptr) *repairs = std::move(*installed);
  return "";
}

void RemoveNetworkIsolation() {
  for (const bool ipv6 : {false, true}) {
    for (const auto& [hook, chain] :
         {std::pair{"INPUT", kInputChain}, std::pair{"FORWARD", kForwardChain},
          std::pair{"OUTPUT", kOutputChain}}) {
      const std::string target(chain);
      for (int i = 0; i < 16; ++i) {
        if (RunFirewallTool({Tool(ipv6), "-w", "5", "-D", hook, "-j", target}, "").status != 0)
          break;
      }
      RunFirewallTool({Tool(ipv6), "-w", "5", "-F", target}, "");
      RunFirewallTool({Tool(ipv6), "-w", "5", "-X", target}, "");
    }
  }
}

}  // namespace gpuwerk::agent

#include "agent/instance_limits.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>

namespace gpuwerk::agent {
namespace {

/// capabilities(7), by bit number.
constexpr std::array<std::string_view, 41> kCapabilityNames = {
    "CHOWN",
    "DAC_OVERRIDE",
    "DAC_READ_SEARCH",
    "FOWNER",
    "FSETID",
    "KILL",
    "SETGID",
    "SETUID",
    "SETPCAP",
    "LINUX_IMMUTABLE",
    "NET_BIND_SERVICE",
    "NET_BROADCAST",
    "NET_ADMIN",
    "NET_RAW",
    "IPC_LOCK",
    "IPC_OWNER",
    "SYS_MODULE",
    "SYS_RAWIO",
    "SYS_CHROOT",
    "SYS_PTRACE",
    "SYS_PACCT",
    "SYS_ADMIN",
    "SYS_BOOT",
    "SYS_NICE",
    "SYS_RESOURCE",
    "SYS_TIME",
    "SYS_TTY_CONFIG",
    "MKNOD",
    "LEASE",
    "AUDIT_WRITE",
    "AUDIT_CONTROL",
    "SETFCAP",
    "MAC_OVERRIDE",
    "MAC_ADMIN",
    "SYSLOG",
    "WAKE_ALARM",
    "BLOCK_SUSPEND",
    "AUDIT_READ",
    "PERFMON",
    "BPF",
    "CHECKPOINT_RESTORE",
};

core::Error ConfigError(std::string message) {
  return core::Error(core::ErrorCode::kInvalidArgument, "invalid_config", std::move(message));
}

}  // namespace

core::Result<std::string> NormaliseCapability(std::string_view name) {
  std::string upper;
  for (char c : name) upper += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  std::string_view bare = upper;
  if (bare.starts_with("CAP_")) bare.remove_prefix(4);
  if (std::find(kCapabilityNames.begin(), kCapabilityNames.end(), bare) == kCapabilityNames.end()) {
    return core::InvalidArgument(
        "invalid_capability",
        fmt::format("'{}' is not a Linux capability (e.g. NET_RAW)", name.substr(0, 64)));
  }
  return "CAP_" + std::string(bare);
}

uint64_t CapabilityMask(const std::vector<std::string>& names) {
  uint64_t mask = 0;
  for (const std::string& name : names) {
    std::string_view bare = name;
    if (bare.starts_with("CAP_")) bare.remove_prefix(4);
    auto it = std::find(kCapabilityNames.begin(), kCapabilityNames.end(), bare);
    if (it != kCapabilityNames.end()) mask |= uint64_t{1} << (it - kCapabilityNames.begin());
  }
  return mask;
}

core::Result<int64_t> ParseCpus(std::string_view text) {
  const auto bad = [&] {
    return core::Fail(ConfigError(fmt::format(
        "'{}' is not a number of CPUs (a positive decimal number such as 2 or 7.5, at most three "
        "decimals)",
        text.substr(0, 32))));
  };
  const size_t dot = text.find('.');
  const std::string_view whole = text.substr(0, dot);
  const std::string_view fraction = dot == std::string_view::npos ? "" : text.substr(dot + 1);
  if (whole.empty() || whole.size() > 6 || fraction.size() > 3 ||
      (dot != std::string_view::npos && fraction.empty())) {
    return bad();
  }
  int64_t millis = 0;
  for (char c : whole) {
    if (c < '0' || c > '9') return bad();
    millis = millis * 10 + (c - '0');
  }
  millis *= 1000;
  int64_t scale = 100;
  for (char c : fraction) {
    if (c < '0' || c > '9') return bad();
    millis += (c - '0') * scale;
    scale /= 10;
  }
  if (millis == 0) return bad();
  return millis * 1'000'000;
}

core::Result<InstanceLimits> ResolveInstanceLimits(const InstanceLimitSettings& settings,
                                                   uint64_t host_memory_bytes, int host_cpus) {
  InstanceLimits limits;
  const auto host_memory = static_cast<int64_t>(host_memory_bytes);
  if (settings.memory_bytes < 0) {
    return core::Fail(ConfigError("instance_memory_bytes must be 0 (automatic) or more"));
  }
  if (settings.memory_reserve_bytes < 0) {
    return core::Fail(ConfigError("instance_memory_reserve_bytes must not be negative"));
  }
  if (settings.memory_bytes > 0) {
    if (host_memory > 0 && settings.memory_bytes > host_memory) {
      return core::Fail(ConfigError(
          fmt::format("instance_memory_bytes {} is more than this host's memory ({} bytes)",
                      settings.memory_bytes, host_memory)));
    }
    limits.memory_bytes = settings.memory_bytes;
  } else if (host_memory > 0) {
    limits.memory_bytes = std::max(host_memory - settings.memory_reserve_bytes, host_memory / 2);
  }

  const int64_t host_nanos = int64_t{std::max(host_cpus, 0)} * 1'000'000'000;
  if (!settings.cpus.empty()) {
    GPUWERK_ASSIGN_OR_RETURN(limits.nano_cpus, ParseCpus(settings.cpus));
    if (host_nanos > 0 && limits.nano_cpus > host_nanos) {
      return core::Fail(ConfigError(fmt::format("instance_cpus {} is more than this host's {} CPUs",
                                                settings.cpus, host_cpus)));
    }
  } else if (host_nanos > 0) {
    GPUWERK_ASSIGN_OR_RETURN(const int64_t reserved, settings.cpus_reserved == "0"
                                                         ? core::Result<int64_t>(0)
                                                         : ParseCpus(settings.cpus_reserved));
    limits.nano_cpus = std::max(host_nanos - reserved, host_nanos / 2);
  }

  if (settings.pids_limit < 1) {
    return core::Fail(ConfigError("instance_pids_limit must be 1 or more"));
  }
  limits.pids_limit = settings.pids_limit;

  for (std::string_view c : kInstanceCapabilities) limits.capabilities.emplace_back(c);
  for (const std::string& extra : settings.extra_capabilities) {
    GPUWERK_ASSIGN_OR_RETURN(std::string name, NormaliseCapability(extra));
    if (std::find(limits.capabilities.begin(), limits.capabilities.end(), name) ==
        limits.capabilities.end()) {
      limits.capabilities.push_back(std::move(name));
    }
  }
  limits.not_enforced.push_back(
      "disk: no per-instance disk quota (the engine is not asked for a storage size limit, which "
      "most storage drivers cannot enforce); an instance can fill the filesystem its container "
      "storage is on");
  return limits;
}

}  // namespace gpuwerk::agent

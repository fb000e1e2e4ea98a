#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"

namespace gpuwerk::agent {

/// The Linux capabilities an instance's container keeps; every other one is dropped
/// (`HostConfig.CapDrop ["ALL"]`, then these in `CapAdd`). This is what a root login through the
/// image's sshd needs, and root's ordinary file handling inside the container; docs/isolation.md
/// gives the reason for each. Not here, on purpose: CAP_NET_RAW (raw sockets: ARP/IP spoofing on
/// the bridge), CAP_MKNOD, CAP_SETPCAP, CAP_SETFCAP, CAP_FSETID, CAP_SYS_ADMIN and the rest.
inline constexpr std::array<std::string_view, 9> kInstanceCapabilities = {
    "CAP_CHOWN",  "CAP_DAC_OVERRIDE",     "CAP_FOWNER",     "CAP_KILL",        "CAP_SETGID",
    "CAP_SETUID", "CAP_NET_BIND_SERVICE", "CAP_SYS_CHROOT", "CAP_AUDIT_WRITE",
};

/// A capability name as the engine takes it: "CAP_" and upper case ("net_raw", "NET_RAW" and
/// "CAP_NET_RAW" all give "CAP_NET_RAW"). Errors: kInvalidArgument "invalid_capability" for a
/// name that is not one of Linux's (capabilities(7), up to CAP_CHECKPOINT_RESTORE).
core::Result<std::string> NormaliseCapability(std::string_view name);

/// The bit mask of `names` (normalised names) as /proc/PID/status shows it in CapEff; names not
/// known are ignored.
uint64_t CapabilityMask(const std::vector<std::string>& names);

/// What every instance container of a host is given (the host's configuration, resolved against
/// its hardware by ResolveInstanceLimits).
struct InstanceLimits {
  /// `HostConfig.Memory`, bytes; 0: no limit.
  int64_t memory_bytes = 0;
  /// `HostConfig.NanoCpus`: CPU time in billionths of a CPU (1.5 CPUs = 1500000000); 0: no limit.
  int64_t nano_cpus = 0;
  /// `HostConfig.PidsLimit`: the most processes and threads at once; 0: the engine's default.
  int64_t pids_limit = 0;
  /// The capabilities kept (normalised names); the rest are dropped.
  std::vector<std::string> capabilities;
  /// Limits the engine is not asked to enforce, one sentence each, for the host's inventory.
  std::vector<std::string> not_enforced;
};

/// The host configuration of the limits (`gpuwerk agent` options `instance_*`,
/// docs/isolation.md).
struct InstanceLimitSettings {
  /// The memory limit, bytes; 0: the host's memory less `memory_reserve_bytes` (at least half of
  /// it).
  int64_t memory_bytes = 0;
  /// What an automatic memory limit leaves to the host: the agent, the engine, sshd, the OS and
  /// under `gpuwerk up` the server and relay. Bytes.
  int64_t memory_reserve_bytes = int64_t{4} << 30;
  /// The CPU limit as a decimal number of CPUs ("7.5"); "": the host's CPUs less `cpus_reserved`
  /// (at least half of them).
  std::string cpus;
  /// What an automatic CPU limit leaves to the host, a decimal number of CPUs.
  std::string cpus_reserved = "1";
  /// The process/thread limit; must be positive.
  int64_t pids_limit = 4096;
  /// Capabilities added to kInstanceCapabilities, e.g. {"NET_RAW"} for ping.
  std::vector<std::string> extra_capabilities;
};

/// Resolves `settings` against a host with `host_memory_bytes` of memory and `host_cpus` CPUs.
/// Errors: kInvalidArgument "invalid_config" naming the setting, for a negative memory value, a
/// memory limit above the host's memory, a CPU value that is not a positive decimal number (at
/// most three decimals) or that asks for more CPUs than the host has, a pids limit below 1, and
/// "invalid_capability" for an unknown capability name.
core::Result<InstanceLimits> ResolveInstanceLimits(const InstanceLimitSettings& settings,
                                                   uint64_t host_memory_bytes, int host_cpus);

/// A decimal number of CPUs ("2", "0.5", "7.25") in billionths of a CPU. Errors: kInvalidArgument
/// "invalid_config" for anything else (a sign, an exponent, more than three decimals, zero).
core::Result<int64_t> ParseCpus(std::string_view text);

}  // namespace gpuwerk::agent

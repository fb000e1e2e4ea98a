#pragma once

#include <cstdint>
#include <mutex>
#include <optional>
#include <string>

#include "sched/instance_service.h"

namespace gpuwerk::api {

/// The `ssh_command` the API shows for an instance (R-9, docs/ssh.md "The user name"). Through
/// the relay: `ssh <hostname>@<hostname>.<domain>` (with `-p PORT` unless 22) when an SSH domain
/// is configured, or `ssh -p PORT <hostname>@<host>` for a relay reached by address (`gpuwerk
/// up`: 127.0.0.1 and its --ssh-listen port). With no relay configured, straight to the
/// container's sshd: `ssh -p PORT root@<host's internal address>`, shown only when that address
/// is a plain IP literal or DNS name. Shown once the instance's
/// container is known (it has a published sshd port); null before and after delete.
/// Thread-safe: Set may run while handlers read.
/// Where `ssh` connects for an instance, as separate validated fields (so that a client builds
/// its argv from them and never splits a command line): `host` an IP literal (IPv6 without
/// brackets) or DNS name (core::IsHostAddress), `port` 1–65535, `user` the instance's hostname
/// (through the relay) or "root" (straight to the container).
struct SshTarget {
  std::string host;
  uint16_t port = 22;
  std::string user;
};

class SshCommandFormat {
 public:
  /// Through the relay, by SSH domain ("ssh.example.com") or by address when `domain` is empty.
  /// `port` is the relay's port.
  void SetRelay(std::string domain, std::string host, uint16_t port);
  /// Where to connect for `in`; nullopt when nothing is shown yet, or when the address the
  /// host's agent reported is not a plain host address (a compromised host's
  /// `-oProxyCommand=…` is never shown, nor run by `gpuwerk ssh`).
  std::optional<SshTarget> TargetFor(const sched::Instance& in) const;
  /// The display command built from TargetFor, or "" when there is none.
  std::string For(const sched::Instance& in) const;

 private:
  mutable std::mutex mu_;
  std::string domain_;
  std::string host_;
  uint16_t port_ = 0;  ///< 0: no relay, direct commands
};

}  // namespace gpuwerk::api

#pragma once

#include <cstdint>
#include <mutex>
#include <string>

#include "sched/instance_service.h"

namespace gpuwerk::api {

/// The `ssh_command` the API shows for an instance (R-9, docs/ssh.md "The user name"). Through
/// the relay: `ssh <hostname>@<hostname>.<domain>` (with `-p PORT` unless 22) when an SSH domain
/// is configured, or `ssh -p PORT <hostname>@<host>` for a relay reached by address (`gpuwerk
/// up`: 127.0.0.1 and its --ssh-listen port). With no relay configured, straight to the
/// container's sshd: `ssh -p PORT root@<host's internal address>`. Shown once the instance's
/// container is known (it has a published sshd port); null before and after delete.
/// Thread-safe: Set may run while handlers read.
class SshCommandFormat {
 public:
  /// Through the relay, by SSH domain ("ssh.example.com") or by address when `domain` is empty.
  /// `port` is the relay's port.
  void SetRelay(std::string domain, std::string host, uint16_t port);
  /// The command for `in`, or "" when none is shown yet.
  std::string For(const sched::Instance& in) const;

 private:
  mutable std::mutex mu_;
  std::string domain_;
  std::string host_;
  uint16_t port_ = 0;  ///< 0: no relay, direct commands
};

}  // namespace gpuwerk::api

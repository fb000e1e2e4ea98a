#pragma once

#include <cstdint>
#include <string_view>

#include "mail/mail.h"

namespace gpuwerk::sched {

/// The mail to an instance's owner when its container was changed outside gpuwerk
/// (docs/instances.md "Changes outside gpuwerk"): `reason` is the sentence the status reason
/// shows; `more_within` says that further changes within that many minutes are not mailed.
mail::Mail InstanceDriftMail(std::string_view to, std::string_view name, std::string_view reason,
                             int64_t quiet_minutes);

/// The mail to an instance's owner when the sshd host key the relay requires of it changed
/// because its container was made again (docs/ssh.md "Host key pinning"): `node` is the node
/// index, the fingerprints are "SHA256:…".
mail::Mail InstanceHostKeyMail(std::string_view to, std::string_view name, int64_t node,
                               std::string_view old_fingerprint, std::string_view new_fingerprint);

}  // namespace gpuwerk::sched

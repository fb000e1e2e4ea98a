#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/error.h"

namespace gpuwerk::cli::internal {

/// The argv `gpuwerk ssh NAME [ARGS…]` runs for instance `in` (as GET /api/v1/instances/{id}
/// answers it): `ssh [-o HostKeyAlias=<hostname> -o StrictHostKeyChecking=accept-new] -p PORT --
/// USER@HOST ARGS…`, built from the answer's separate `ssh` fields (host, port, user), never by
/// splitting its display `ssh_command`, with the destination after `--` so that nothing in it
/// can become an option of ssh (OpenSSH reads options after the host too). `name` is for
/// messages. Errors: kFailedPrecondition "not_ready" when the instance shows no SSH target yet;
/// kFailedPrecondition "unexpected_response" when the host is not a plain IP address or DNS
/// name (core::IsHostAddress), the port is outside 1–65535 or the user could be read as
/// something else — nothing is run then.
core::Result<std::vector<std::string>> SshArgv(const nlohmann::json& in, const std::string& name,
                                               const std::vector<std::string>& args);

}  // namespace gpuwerk::cli::internal

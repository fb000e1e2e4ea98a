#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/error.h"

namespace gpuwerk::cli::internal {

/// The argv `gpuwerk ssh NAME [ARGS…]` runs for instance `in` (as GET /api/v1/instances/{id}
/// answers it): `ssh [-o HostKeyAlias=<hostname> -o StrictHostKeyChecking=accept-new] -p PORT --
/// USER@HOST COMMAND…` (the person's own ssh options in ARGS before `--`, the remote command
/// after the destination), built from the answer's separate `ssh` fields (host, port, user), never
/// by splitting its display `ssh_command`, with the destination after `--` so that nothing in it
/// can become an option of ssh (OpenSSH reads options after the host too). `name` is for
/// messages. Errors: kFailedPrecondition "not_ready" when the instance shows no SSH target yet;
/// kFailedPrecondition "unexpected_response" when the host is not a plain IP address or DNS
/// name (core::IsHostAddress), the port is outside 1–65535 or the user could be read as
/// something else — nothing is run then.
/// How many of `args` (what follows `gpuwerk ssh NAME`) are ssh's own options with their
/// values, read as ssh's getopt reads them, up to the first word that is not an option (the
/// remote command) or just past a `--`.
size_t LeadingSshOptions(const std::vector<std::string>& args);

core::Result<std::vector<std::string>> SshArgv(const nlohmann::json& in, const std::string& name,
                                               const std::vector<std::string>& args);

}  // namespace gpuwerk::cli::internal

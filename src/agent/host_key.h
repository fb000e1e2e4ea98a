#pragma once

// The instance's sshd host key as the agent reports it (docs/agent-protocol.md "Host key"): read
// from the container's filesystem through the engine's archive download, so nothing runs inside
// the container and no network peer is trusted.

#include <string>
#include <string_view>

#include "agent/container_engine.h"
#include "core/error.h"

namespace gpuwerk::agent {

/// Where the instance image's sshd keeps its ed25519 public host key (the image's CMD runs
/// `ssh-keygen -A` at each start, which makes it once per container).
inline constexpr std::string_view kSshHostKeyPath = "/etc/ssh/ssh_host_ed25519_key.pub";

/// The contents of the first entry of the uncompressed tar archive `tar` (what
/// ContainerEngine::GetArchive answers for a file), which must be a regular file of at most
/// `max_bytes` bytes. Errors: kInvalidArgument "bad_archive" (not a tar archive, no entry, the
/// entry is a link, directory or device, or larger than `max_bytes`). Pure.
core::Result<std::string> SingleFileFromTar(std::string_view tar, size_t max_bytes);

/// "ssh-ed25519 BASE64" from the text of an OpenSSH public key file (`ssh-ed25519 BASE64
/// [comment]`, one line, surrounding blanks allowed). Errors: kInvalidArgument "bad_host_key"
/// (another type, no key, or a key that is not base64 of at most 128 characters). Pure.
core::Result<std::string> Ed25519KeyLine(std::string_view text);

/// Container `id`'s sshd ed25519 host key as "ssh-ed25519 BASE64", read through the engine's
/// archive download of kSshHostKeyPath (at most 4 KiB). Errors: the engine's (kNotFound
/// "container_not_found" when the file is missing), bad_archive, bad_host_key.
core::Result<std::string> ReadSshHostKey(ContainerEngine& engine, std::string_view id,
                                         ContainerEngine::Timeout timeout);

}  // namespace gpuwerk::agent

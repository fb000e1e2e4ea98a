#pragma once

#include <filesystem>
#include <string>

#include "core/error.h"

namespace gpuwerk::relay {

/// An ed25519 private key kept in one file: the relay's host key, or its upstream credential.
struct SshKeyFile {
  std::filesystem::path path;
  std::string
      private_openssh;      ///< the file's text ("-----BEGIN OPENSSH PRIVATE KEY-----"…); secret
  std::string public_line;  ///< "ssh-ed25519 AAAA… <comment>\n" for authorized_keys / known_hosts
  std::string fingerprint;  ///< "SHA256:…" as `ssh-keygen -l` prints it
  bool created = false;     ///< true when this call generated the file
};

/// Loads the ed25519 key at `path`, or, when no file is there, generates one and writes it there
/// (mode 0600, created atomically with link(2), so two processes starting at once end up with the
/// same key). An existing key is never replaced: a relay's host key must not change (R-10, C08).
/// `comment` goes into public_line.
/// Errors: kFailedPrecondition `key_file_mode` when the file is readable by group or others,
/// kInvalidArgument `key_file_invalid` when it is not an unencrypted OpenSSH ed25519 private key,
/// kUnavailable `key_file_io` for file-system errors (the message names the path).
core::Result<SshKeyFile> LoadOrCreateEd25519Key(const std::filesystem::path& path,
                                                const std::string& comment);

}  // namespace gpuwerk::relay

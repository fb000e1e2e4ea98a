#pragma once
// Reading a public key file for `keys add` and `admin release-key` (not for use outside src/cli).

#include <string>

#include "cli/internal/verb_support.h"
#include "core/error.h"

namespace gpuwerk::cli::internal {

/// The text of the public key file `file` ("" or "-": standard input, with a prompt at a
/// terminal), at most 64 KiB, checked before anything is sent: a private key is refused and never
/// echoed (the message says nothing was sent, not "treat it as exposed", and names `file`.pub when
/// that exists), as are text that is not UTF-8 and an empty file. The text is sent as read: the
/// server parses it (CRLF, RFC 4716, PEM).
/// Errors: "file_unreadable" (a directory, or cannot open), "read_failed", "input_too_large",
/// "private_key_pasted", "invalid_encoding", "invalid_public_key" (empty).
core::Result<std::string> ReadPublicKeyFile(VerbContext& ctx, const std::string& file);

}  // namespace gpuwerk::cli::internal

#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "agent/container_engine.h"
#include "core/error.h"

namespace gpuwerk::agent {

/// Where AuthorizedKeysTar's archive must be unpacked: the container's root directory.
inline constexpr std::string_view kAuthorizedKeysArchiveRoot = "/";

/// The contents of an OpenSSH `authorized_keys` file for `key_lines`: one key per line, each
/// ending in "\n" (case C04), no CR anywhere (case C01). Each element is trimmed of surrounding
/// blanks; an element that holds several lines (LF, CRLF or CR) yields one line each; empty
/// lines are dropped. Keys are expected to be normalised OpenSSH one-line public keys already
/// (keys::ParsePublicKey); this function does not parse them.
std::string AuthorizedKeysFile(const std::vector<std::string>& key_lines);

/// An uncompressed POSIX ustar archive (in memory) that, unpacked at "/" of a container (e.g.
/// ContainerEngine::PutArchive(id, kAuthorizedKeysArchiveRoot, tar)), gives root its SSH keys:
///   - `root/.ssh/` — directory, mode 0700, uid/gid 0 (root/root)
///   - `root/.ssh/authorized_keys` — AuthorizedKeysFile(key_lines), mode 0600, uid/gid 0
/// sshd's StrictModes accepts exactly these owners and modes (case C05). Entries carry
/// `mtime_unix_seconds` (seconds since the Unix epoch) as their modification time; the default
/// 0 makes the archive deterministic. The archive does not touch `/root` itself.
/// Thread-safe. Aborts only if libarchive cannot allocate memory.
std::string AuthorizedKeysTar(const std::vector<std::string>& key_lines,
                              int64_t mtime_unix_seconds = 0);

/// The environment variable that carries the file's contents into AuthorizedKeysExec's command.
inline constexpr std::string_view kAuthorizedKeysEnv = "GPUWERK_AUTHORIZED_KEYS";

/// A command (for ContainerEngine::RunExec) that, run as root (`user` "0") in a running
/// container, replaces `/root/.ssh/authorized_keys` with AuthorizedKeysFile(key_lines)
/// atomically: `/bin/sh -c` with `set -e; umask 077`, creates `/root/.ssh` when missing, makes it
/// root-owned 0700, writes a temporary file beside the target from the environment variable
/// kAuthorizedKeysEnv (the keys are public; they never appear in the command line), makes it
/// root-owned 0600 and renames it over the target (a reader sees the old file or the new one,
/// never half of one). Exit status 0 on success; non-zero with a message on stderr otherwise.
/// Needs `sh`, `mkdir`, `chown`, `chmod`, `mv` and `rm` in the image (any image with sshd has
/// them). With `container_hostname`, the command first checks that /etc/hostname holds it (exit
/// status 97 and nothing written otherwise; see WriteAuthorizedKeys).
ExecSpec AuthorizedKeysExec(const std::vector<std::string>& key_lines,
                            std::string_view container_hostname = {});

/// Writes root's authorized_keys in container `id` so that it holds exactly `key_lines`
/// (AuthorizedKeysFile), root-owned, 0700/0600 (case C05), without restarting the container:
///   - `state` kRunning: AuthorizedKeysExec through ContainerEngine::RunExec. Chosen over an
///     archive upload because some engines (podman 4.3 in freshly debootstrapped roots) answer
///     `PUT /containers/{id}/archive` to a running container with success while the file inside
///     does not change. When the exec finds the container stopped meanwhile
///     ("container_not_running"), falls back to the archive.
///   - any other state (created, exited): the archive (AuthorizedKeysTar) through PutArchive at
///     "/", which works on containers that do not run.
/// `timeout` bounds each engine call (RunExec: the whole command). Errors: the engine's (see
/// ContainerEngine), and kUnavailable "authorized_keys_write_failed" when the command in the
/// container exits non-zero (the message carries its exit status and stderr).
///
/// `container_hostname` (the container's Hostname, as created): when given, the exec first
/// checks that it runs inside that container (its /etc/hostname) and writes nothing otherwise,
/// failing kFailedPrecondition "exec_outside_container" — an engine that runs execs in another
/// mount namespace (seen in CI roots whose /proc does not match the engine's PID namespace)
/// would otherwise write the host's /root/.ssh.
core::Result<void> WriteAuthorizedKeys(ContainerEngine& engine, std::string_view id,
                                       ContainerState state,
                                       const std::vector<std::string>& key_lines,
                                       std::chrono::milliseconds timeout,
                                       std::string_view container_hostname = {});

/// Whether root's authorized_keys in the RUNNING container `id` holds each of `key_lines` (after
/// AuthorizedKeysFile's normalisation) as a whole line, read with an exec of `grep -qxF`: true
/// when all are there, false when one is missing (or the file is). Used where sshd cannot be
/// asked (a `from=` option refuses the asker's address). Errors: the engine's (RunExec), and
/// kUnavailable "authorized_keys_read_failed" when the check itself fails.
/// `container_hostname`: as for WriteAuthorizedKeys ("exec_outside_container").
core::Result<bool> AuthorizedKeysHold(ContainerEngine& engine, std::string_view id,
                                      const std::vector<std::string>& key_lines,
                                      std::chrono::milliseconds timeout,
                                      std::string_view container_hostname = {});

/// An authorized_keys line taken apart (sshd(8), "AUTHORIZED_KEYS FILE FORMAT"): the options
/// before the key (e.g. `from="10.0.0.2",no-pty`; "" when the line starts with the key type) and
/// the key itself ("type base64 [comment]").
struct AuthorizedKeyLine {
  std::string options;
  std::string key;
};

/// Splits `line` (surrounding blanks ignored): a line that starts with a key type ("ssh-…",
/// "ecdsa-…", "sk-…") has no options; otherwise the options run to the first blank outside
/// double quotes (inside them `\"` is a quote). A line with options and no key after them yields
/// an empty `key`.
AuthorizedKeyLine SplitAuthorizedKeyLine(std::string_view line);

/// Checks `patterns` for sshd's `from="pattern-list"` option (sshd(8), AUTHORIZED_KEYS FILE
/// FORMAT; patterns as in ssh_config(5) PATTERNS): a comma-separated list, each element an
/// address, a host name or a CIDR `address/masklen`, with `*` and `?` wildcards and an optional
/// leading `!` (negation). Refused with kInvalidArgument "invalid_relay_from": an empty list or
/// element, and any character other than letters, digits and `.:-_*?!/%` — in particular
/// double quotes, blanks, newlines and other control characters, which would end or break the
/// option. The message names the offending character. Note: a list of only negations matches
/// nothing (sshd needs one positive match).
core::Result<void> ValidateFromPatterns(std::string_view patterns);

/// The relay's authorized_keys line restricted to `patterns` (ValidateFromPatterns):
/// `from="PATTERNS" ssh-ed25519 AAAA… comment`; a line that has options already gets the option
/// first among them (`from="PATTERNS",no-pty ssh-ed25519 …`). No other restriction is added:
/// the relay forwards people's PTYs, ports and agents through this login. `patterns` empty: the
/// line unchanged (trimmed). Errors: kInvalidArgument "invalid_relay_from" (bad patterns, or
/// the line has a `from=` option of its own), kInvalidArgument "invalid_relay_key" (no key in
/// the line).
core::Result<std::string> RestrictRelayKeyLine(std::string_view line, std::string_view patterns);

}  // namespace gpuwerk::agent

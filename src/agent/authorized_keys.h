#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
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

/// Where every container the agent creates sees the agent's authorized_keys directory: a
/// read-only bind mount of a host directory the agent owns (AgentKeysBinds). The tenant, root in
/// the container, can neither change nor remove the file (nor replace the directory with a
/// symlink: it is a mount point), and the agent writes it on the host without running anything
/// in the container (issue 12 finding 9).
inline constexpr std::string_view kAgentKeysMount = "/etc/ssh/gpuwerk";
/// The file sshd reads the person's keys and the relay's line from, inside the container.
inline constexpr std::string_view kAgentKeysFileInContainer = "/etc/ssh/gpuwerk/authorized_keys";
/// Where the sshd drop-in that names that file is mounted read-only (Debian's and Ubuntu's
/// sshd_config start with `Include /etc/ssh/sshd_config.d/*.conf`; the first AuthorizedKeysFile
/// sshd reads wins, and this name sorts first).
inline constexpr std::string_view kSshdKeysDropInInContainer =
    "/etc/ssh/sshd_config.d/00-gpuwerk-keys.conf";
/// The label the agent puts on containers created with the read-only keys mount (value "bind").
/// A container without it (created by an agent before that) gets its keys by archive upload
/// into /root/.ssh instead (WriteAuthorizedKeysByArchive).
inline constexpr std::string_view kKeysLabel = "io.gpuwerk.keys";

/// The sshd drop-in's text: `AuthorizedKeysFile /etc/ssh/gpuwerk/authorized_keys
/// .ssh/authorized_keys` (sshd reads the agent's file first, then the person's own
/// ~/.ssh/authorized_keys, which stays theirs to edit).
std::string SshdKeysDropIn();

/// The host side of the read-only keys mount under `keys_root` (the agent's `keys_dir`):
/// `keys_root/containers/<container_name>/` holds that container's `authorized_keys`, and
/// `keys_root/sshd-keys.conf` the drop-in all containers share.
struct AgentKeysPaths {
  std::filesystem::path dir;      ///< bound read-only at kAgentKeysMount
  std::filesystem::path drop_in;  ///< bound read-only at kSshdKeysDropInInContainer
};

/// The paths for `container_name` (a Docker container name: letters, digits, '_', '.', '-', at
/// most 128 characters, not starting with '.' or '-'). Errors: kInvalidArgument
/// "invalid_container_name" for any other name (it becomes a path component); `keys_root` must
/// be absolute (kInvalidArgument "invalid_keys_dir").
core::Result<AgentKeysPaths> AgentKeysPathsFor(const std::filesystem::path& keys_root,
                                               std::string_view container_name);

/// The two read-only bind mounts of `paths` (ContainerSpec::binds).
std::vector<BindMount> AgentKeysBinds(const AgentKeysPaths& paths);

/// Writes the host side of a container's keys so that sshd in the container reads exactly
/// `key_lines` (AuthorizedKeysFile): `paths.dir` created when missing (mode 0700), its
/// `authorized_keys` replaced atomically (a temporary file beside it, opened with O_EXCL and
/// O_NOFOLLOW, mode 0600, fsync'd, renamed over the old one: a reader sees the old file or the
/// new one), and `paths.drop_in` written the same way (0644) when its text differs. Owned by the
/// agent's user: sshd's StrictModes needs root (run the agent as root; a user-namespace remap that
/// maps the host's root to nobody makes sshd refuse the file). A container sees a rewrite at once
/// (the mount is the directory, not the file). Runs nothing anywhere. Errors: kUnavailable
/// "authorized_keys_write_failed" (the message names the path and errno's text).
core::Result<void> WriteAgentKeys(const AgentKeysPaths& paths,
                                  const std::vector<std::string>& key_lines);

/// Whether the agent's file for `paths` holds each of `key_lines` (after AuthorizedKeysFile's
/// normalisation) as a whole line. A missing file is false. Errors: kUnavailable
/// "authorized_keys_read_failed" (another read error).
core::Result<bool> AgentKeysHold(const AgentKeysPaths& paths,
                                 const std::vector<std::string>& key_lines);

/// Removes the container's directory of `paths` (not the shared drop-in). Idempotent.
void RemoveAgentKeys(const AgentKeysPaths& paths);

/// For a container created without the read-only keys mount (no kKeysLabel): writes root's
/// authorized_keys by the engine's archive upload (AuthorizedKeysTar at "/", in any state;
/// nothing runs in the container). The engine unpacks inside the container's root, so a
/// /root/.ssh that the tenant replaced with a symlink resolves inside the container, and the
/// final entry replaces a symlink instead of following it (Docker's and podman's tar unpacking).
/// Errors: the engine's (PutArchive).
core::Result<void> WriteAuthorizedKeysByArchive(ContainerEngine& engine, std::string_view id,
                                                const std::vector<std::string>& key_lines,
                                                std::chrono::milliseconds timeout);

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

// The relay CA (docs/ssh.md "Upstream: the relay credential"; issue 12 finding 1). The relay logs
// in with a short-lived OpenSSH user certificate (OpenSSH PROTOCOL.certkeys) whose one principal
// names the instance (protocol::RelayInstancePrincipal); each container's file trusts the relay
// CA for that principal alone, so a certificate made for one instance opens no other container,
// wherever a host forwards it.

/// The comment of the relay CA's line in every container's file.
inline constexpr std::string_view kRelayCaComment = "gpuwerk-relay-ca";
/// The comment of the probe line (RelayCaProbeLine).
inline constexpr std::string_view kRelayCaProbeComment = "gpuwerk-relay-ca-probe";

/// Checks the relay CA's public line as `gpuwerk relay` prints it (`gpuwerk agent --relay-ca`):
/// "ssh-ed25519 BASE64 [comment]" (surrounding blanks ignored), no options, the blob an ed25519
/// key's (RFC 8709 §4: the string "ssh-ed25519" and 32 bytes). Returns "ssh-ed25519 BASE64".
/// Errors: kInvalidArgument "invalid_relay_ca" (the message says what was expected).
core::Result<std::string> ParseRelayCaLine(std::string_view line);

/// Checks a probe certificate of the relay CA as `gpuwerk relay` prints it (`gpuwerk agent
/// --relay-ca-probe`): "ssh-ed25519-cert-v01@openssh.com BASE64 [comment]", no options, the blob
/// starting with that type name (PROTOCOL.certkeys). Returns "TYPE BASE64" (what the agent
/// offers sshd; never signed with: nobody holds its private half). Errors: kInvalidArgument
/// "invalid_relay_ca_probe".
core::Result<std::string> ParseRelayProbeCertificate(std::string_view line);

/// The line that lets the relay CA's certificates for `instance_id` in (sshd(8), AUTHORIZED_KEYS
/// FILE FORMAT: `cert-authority` with `principals`; sshd then needs no TrustedUserCAKeys):
///   cert-authority,principals="gpuwerk-instance-<id>"[,from="PATTERNS"] ssh-ed25519 B64
///   gpuwerk-relay-ca
/// `ca_key` is ParseRelayCaLine's result; `from_patterns` (ValidateFromPatterns) empty: no from=.
/// Errors: kInvalidArgument "invalid_instance_id" (the id makes no principal: it could end the
/// option), "invalid_relay_from", "invalid_relay_ca".
core::Result<std::string> RelayCaKeyLine(std::string_view ca_key, std::string_view instance_id,
                                         std::string_view from_patterns);

/// The line that lets the agent's check ask sshd about the relay CA (the probe certificate's
/// principal, protocol::kRelayProbePrincipal), and nothing more: a login with it could only run
/// /bin/false, without a pty, forwarding or agent, and nobody can log in with the probe
/// certificate anyway (its key's private half is gone):
///   cert-authority,principals="gpuwerk-relay-probe",restrict,command="/bin/false" ssh-ed25519 B64
///   gpuwerk-relay-ca-probe
/// No from=: the agent asks from the host's own address. `ca_key`: ParseRelayCaLine's result.
std::string RelayCaProbeLine(std::string_view ca_key);

/// Replaces the host file `path` with `text` (mode `mode`) atomically, as WriteAgentKeys does: a
/// new file beside it (O_EXCL, O_NOFOLLOW), fsync'd, renamed over it. For the agent's other
/// read-only mounts (cluster_files.h). Errors: kUnavailable "authorized_keys_write_failed" naming
/// the path and errno's text.
core::Result<void> ReplaceHostFile(const std::filesystem::path& path, std::string_view text,
                                   mode_t mode);

/// Creates the host directory `dir` (mode 0700, its parents as needed) when missing; an existing
/// one must be a directory, not a symlink, and gets mode 0700. Errors: as ReplaceHostFile.
core::Result<void> EnsurePrivateHostDir(const std::filesystem::path& dir);

}  // namespace gpuwerk::agent

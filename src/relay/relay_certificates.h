#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "core/clock.h"
#include "core/error.h"

namespace gpuwerk::relay {

/// What SignUserCertificate writes into an OpenSSH user certificate (OpenSSH PROTOCOL.certkeys,
/// `ssh-ed25519-cert-v01@openssh.com`).
struct UserCertificateFields {
  /// The key id sshd logs for each login with the certificate (`ssh-keygen -I`). Printable
  /// ASCII, no control characters (checked).
  std::string key_id;
  /// The valid principals (`-n`); at least one, each `[A-Za-z0-9_.-]` (checked). sshd refuses a
  /// certificate whose principals do not meet the authorized_keys line's `principals="…"`.
  std::vector<std::string> principals;
  /// Valid from this time on, Unix seconds (UTC). With `valid_before` 0 as well: no limits
  /// ("always:forever"), for the probe certificate only.
  int64_t valid_after = 0;
  /// Valid before this time, Unix seconds (UTC); 0 with `valid_after` 0: forever.
  int64_t valid_before = 0;
  uint64_t serial = 0;
  /// Extensions (`-O clear` first, then `-O <each>`): what the certificate permits once logged in.
  std::vector<std::string> extensions;
  /// Critical options (`-O force-command=…`, `-O source-address=…`), as ssh-keygen takes them.
  std::vector<std::string> critical_options;
};

/// The extensions of the relay's login certificates: what the relay forwards (RFC 4254 pty,
/// `-L`/`-R`, `-A`) and the instance's own `~/.ssh/rc`, as a plain key allowed; not X11, which
/// the relay refuses anyway.
inline const std::vector<std::string>& RelayCertificateExtensions() {
  static const std::vector<std::string> kExtensions = {
      "permit-agent-forwarding", "permit-port-forwarding", "permit-pty", "permit-user-rc"};
  return kExtensions;
}

/// Signs `public_line` (an OpenSSH public key line, "ssh-ed25519 AAAA… [comment]") with the CA
/// private key in the file `ca_key_path` (unencrypted OpenSSH format, mode 0600) into an OpenSSH
/// user certificate, and returns its line ("ssh-ed25519-cert-v01@openssh.com AAAA… comment",
/// no line end). libssh 0.10 cannot sign certificates: this runs OpenSSH's own `ssh-keygen -s`
/// (found on PATH with PATH=/usr/local/bin:/usr/bin:/bin; openssh-client), without a shell, with
/// an environment of PATH and LC_ALL only, in a private temporary directory (0700) that holds
/// only the public key and the certificate and is removed afterwards; the CA's private key is
/// read by ssh-keygen from its own file. Waits at most `timeout`, then kills it. Thread-safe (one
/// child and one directory per call). docs/ssh.md "Upstream: the relay credential" says why
/// ssh-keygen and not our own signing code.
/// Errors: kInvalidArgument "invalid_certificate_request" (a field that ssh-keygen could read
/// differently: an empty or odd principal, a control character in the key id, valid_before not
/// after valid_after, a public line that is not one key); kUnavailable
/// "certificate_signing_failed" (ssh-keygen cannot be run, fails, does not finish in time, or
/// writes no certificate; the message carries its first error line, escaped and bounded).
core::Result<std::string> SignUserCertificate(
    const std::filesystem::path& ca_key_path, std::string_view public_line,
    const UserCertificateFields& fields,
    std::chrono::milliseconds timeout = std::chrono::seconds(10),
    const std::string& ssh_keygen = "ssh-keygen");

/// A probe certificate: for a fresh ed25519 key whose private half is dropped at once (so nobody
/// can log in with it), principal protocol::kRelayProbePrincipal, valid forever, no extensions,
/// the critical option `force-command=/bin/false`, signed by the CA in `ca_key_path`. Host agents
/// offer it (a public-key query, RFC 4252 §7, never a signature) to check that a container's sshd
/// still takes the relay CA's certificates (docs/ssh.md). Any probe certificate of a CA serves:
/// a new one each relay start is fine. Errors: those of SignUserCertificate; kInternal when no
/// key could be generated.
core::Result<std::string> MakeProbeCertificate(
    const std::filesystem::path& ca_key_path,
    std::chrono::milliseconds timeout = std::chrono::seconds(10),
    const std::string& ssh_keygen = "ssh-keygen");

/// The relay's login certificates, one per instance (docs/ssh.md "Upstream: the relay
/// credential"; issue 12 finding 1): for the relay key, principal
/// `gpuwerk-instance-<instance id>` (protocol::RelayInstancePrincipal), valid from `backdate`
/// before now (clocks of hosts that run a little behind) to `lifetime` after now, signed by the
/// relay CA. Each certificate is kept and handed out again until `renew_before` ahead of its end,
/// so a login costs an ssh-keygen run only every few minutes per instance.
///
/// Thread-safe: connection threads call For concurrently; two asking for one instance at once
/// may both sign (either answer is valid). The cache holds at most `max_cached` certificates;
/// expired ones go first, and when that is not enough it is emptied.
class RelayCertificates {
 public:
  struct Options {
    std::filesystem::path ca_key_path;  ///< the relay CA's private key file (0600)
    std::string relay_public_line;      ///< the relay key's public line: the certified key
    std::chrono::seconds lifetime{300};
    std::chrono::seconds backdate{60};
    std::chrono::seconds renew_before{60};
    /// Dates the certificates; null: the system clock. Must outlive the RelayCertificates.
    const core::Clock* clock = nullptr;
    std::chrono::milliseconds timeout{10'000};  ///< per ssh-keygen run
    std::string ssh_keygen = "ssh-keygen";
    size_t max_cached = 10'000;
  };

  explicit RelayCertificates(Options options);

  /// The certificate line for `instance_id` (a cached one while it has more than `renew_before`
  /// left, else a new one). Errors: kInvalidArgument "invalid_certificate_request" when the id
  /// makes no principal (protocol::RelayInstancePrincipal); those of SignUserCertificate.
  core::Result<std::string> For(const std::string& instance_id);

  /// How many ssh-keygen runs For has made (tests: the cache at work).
  uint64_t signings() const;

 private:
  struct Cached {
    std::string line;
    int64_t valid_before = 0;  ///< Unix seconds
  };
  int64_t NowUnix() const;

  Options options_;
  core::SystemClock system_clock_;
  mutable std::mutex mu_;
  std::map<std::string, Cached> cache_;
  uint64_t signings_ = 0;
  uint64_t next_serial_ = 0;
};

}  // namespace gpuwerk::relay

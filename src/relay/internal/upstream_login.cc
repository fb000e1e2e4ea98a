#include "relay/internal/upstream_login.h"

#include <spdlog/spdlog.h>

#include <sstream>

#include "core/strings.h"
#include "protocol/relay_principal.h"
#include "relay/internal/libssh_calls.h"

namespace gpuwerk::relay::internal {

std::string RefusalCode(UpstreamLoginFailure failure) {
  switch (failure) {
    case UpstreamLoginFailure::kUnreachable:
      return "upstream_unreachable";
    case UpstreamLoginFailure::kHostKeyMismatch:
      return "upstream_host_key_mismatch";
    case UpstreamLoginFailure::kAuthFailed:
      return "upstream_auth_failed";
    case UpstreamLoginFailure::kNoCredential:
      return "relay_credential_unavailable";
  }
  return "upstream_unreachable";
}

std::string RefusalMessage(UpstreamLoginFailure failure, const RelayTarget& t) {
  const std::string name = t.instance_name.empty() ? t.hostname : t.instance_name;
  switch (failure) {
    case UpstreamLoginFailure::kAuthFailed:
      if (t.login != "root") {
        // The relay credential is installed for root only (docs/ssh.md): waiting will not help.
        return "gpuwerk: instance " + name + " (" + t.hostname +
               ") does not let the relay log in as \"" + t.login +
               "\": the relay can log in as root only for now. Your own key was accepted; "
               "use " +
               t.hostname + " (root) as the SSH user name.";
      }
      return "gpuwerk: instance " + name + " (" + t.hostname +
             ") is not accepting connections yet: the relay credential is missing there "
             "(login \"" +
             t.login +
             "\"). Your own key was accepted. If the instance was just created or "
             "restarted, try again in a minute; otherwise its status shows the fault.";
    case UpstreamLoginFailure::kHostKeyMismatch:
      return "gpuwerk: instance " + name + " (" + t.hostname +
             ") answered with an unexpected host key; the relay did not log in, and "
             "logged it for the operator.";
    case UpstreamLoginFailure::kNoCredential:
      return "gpuwerk: the relay cannot make its credential for instance " + name + " (" +
             t.hostname +
             ") right now. Your own key was accepted. Please try again in a minute; if it keeps "
             "failing, tell the operator of this service.";
    case UpstreamLoginFailure::kUnreachable:
      break;
  }
  return "gpuwerk: instance " + name + " (" + t.hostname +
         ") is not accepting connections yet: its sshd does not answer. If it was "
         "just created or restarted, try again in a minute.";
}

std::expected<SshSessionPtr, UpstreamLoginFailure> LogInUpstream(
    const RelayTarget& t, const std::string& relay_key_private, const std::string& certificate,
    std::chrono::milliseconds timeout, std::string* presented_host_key) {
  SshSessionPtr upstream(ssh_new());
  if (upstream == nullptr) return std::unexpected(UpstreamLoginFailure::kUnreachable);
  ssh_session s = upstream.get();
  bool no = false;
  int strict = 0;
  unsigned int port = t.upstream_port;
  ssh_options_set(s, SSH_OPTIONS_PROCESS_CONFIG, &no);
  ssh_options_set(s, SSH_OPTIONS_HOST, t.upstream_host.c_str());
  ssh_options_set(s, SSH_OPTIONS_PORT, &port);
  ssh_options_set(s, SSH_OPTIONS_USER, t.login.c_str());
  ssh_options_set(s, SSH_OPTIONS_KNOWNHOSTS, "/dev/null");
  ssh_options_set(s, SSH_OPTIONS_GLOBAL_KNOWNHOSTS, "/dev/null");
  ssh_options_set(s, SSH_OPTIONS_STRICTHOSTKEYCHECK, &strict);
  int nodelay = 1;  // small packets (window adjusts, keystrokes) must not wait for Nagle
  ssh_options_set(s, SSH_OPTIONS_NODELAY, &nodelay);
  SetTimeout(s, timeout);
  if (ssh_connect(s) != SSH_OK) {
    spdlog::warn("relay: cannot reach instance {} sshd at {}:{}: {}", t.instance_id,
                 core::BoundedPrintable(t.upstream_host), t.upstream_port,
                 core::BoundedPrintable(ssh_get_error(s)));
    return std::unexpected(UpstreamLoginFailure::kUnreachable);
  }
  if (!t.upstream_host_key_fingerprint.empty()) {
    ssh_key raw_server_key = nullptr;
    std::string fp;
    if (ssh_get_server_publickey(s, &raw_server_key) == SSH_OK) {
      SshKeyPtr server_key(raw_server_key);
      fp = Sha256Fingerprint(server_key.get());
    }
    if (fp != t.upstream_host_key_fingerprint) {
      spdlog::error(
          "relay: instance {} sshd at {}:{} presented host key {} (pinned: {}); not "
          "logging in",
          t.instance_id, core::BoundedPrintable(t.upstream_host), t.upstream_port,
          fp.empty() ? "none" : fp, t.upstream_host_key_fingerprint);
      if (presented_host_key != nullptr) *presented_host_key = fp;
      return std::unexpected(UpstreamLoginFailure::kHostKeyMismatch);
    }
  }
  ssh_key raw_relay_key = nullptr;
  if (ssh_pki_import_privkey_base64(relay_key_private.c_str(), nullptr, nullptr, nullptr,
                                    &raw_relay_key) != SSH_OK) {
    return std::unexpected(UpstreamLoginFailure::kAuthFailed);
  }
  SshKeyPtr relay_key(raw_relay_key);
  // The certificate for this instance alone (principal gpuwerk-instance-<id>): the relay key
  // without it is accepted nowhere (docs/ssh.md "Upstream: the relay credential").
  std::istringstream words(certificate);
  std::string cert_type, cert_base64;
  words >> cert_type >> cert_base64;
  ssh_key raw_cert = nullptr;
  if (cert_type != "ssh-ed25519-cert-v01@openssh.com" ||
      ssh_pki_import_cert_base64(cert_base64.c_str(), SSH_KEYTYPE_ED25519_CERT01, &raw_cert) !=
          SSH_OK) {
    spdlog::error("relay: the certificate for instance {} cannot be read", t.instance_id);
    return std::unexpected(UpstreamLoginFailure::kNoCredential);
  }
  SshKeyPtr cert(raw_cert);
  if (ssh_pki_copy_cert_to_privkey(cert.get(), relay_key.get()) != SSH_OK) {
    spdlog::error("relay: the certificate for instance {} does not match the relay key",
                  t.instance_id);
    return std::unexpected(UpstreamLoginFailure::kNoCredential);
  }
  if (ssh_userauth_publickey(s, nullptr, relay_key.get()) != SSH_AUTH_SUCCESS) {
    // The instance's principal is ours, not outside text; the address is the registration's.
    spdlog::warn(
        "relay: instance {} sshd at {}:{} refused the relay's certificate for principal "
        "{}{} (login {}): its authorized_keys lacks the relay CA's line for this instance, or "
        "this sshd is not that instance's",
        t.instance_id, core::BoundedPrintable(t.upstream_host), t.upstream_port,
        protocol::kRelayInstancePrincipalPrefix, core::BoundedPrintable(t.instance_id, 64),
        core::BoundedPrintable(t.login, 64));
    return std::unexpected(UpstreamLoginFailure::kAuthFailed);
  }
  return upstream;
}

}  // namespace gpuwerk::relay::internal

#include "relay/internal/upstream_login.h"

#include <spdlog/spdlog.h>

#include "core/strings.h"
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
    case UpstreamLoginFailure::kUnreachable:
      break;
  }
  return "gpuwerk: instance " + name + " (" + t.hostname +
         ") is not accepting connections yet: its sshd does not answer. If it was "
         "just created or restarted, try again in a minute.";
}

std::expected<SshSessionPtr, UpstreamLoginFailure> LogInUpstream(
    const RelayTarget& t, const std::string& relay_key_private, std::chrono::milliseconds timeout,
    std::string* presented_host_key) {
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
  if (ssh_userauth_publickey(s, nullptr, relay_key.get()) != SSH_AUTH_SUCCESS) {
    spdlog::warn("relay: instance {} sshd refused the relay key for login {} (case C07)",
                 t.instance_id, t.login);
    return std::unexpected(UpstreamLoginFailure::kAuthFailed);
  }
  return upstream;
}

}  // namespace gpuwerk::relay::internal

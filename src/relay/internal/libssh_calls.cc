#include "relay/internal/libssh_calls.h"

#include "relay/internal/ssh_handles.h"

namespace gpuwerk::relay::internal {

void SetTimeout(ssh_session session, std::chrono::milliseconds timeout) {
  long sec = static_cast<long>(timeout.count() / 1000);
  long usec = static_cast<long>((timeout.count() % 1000) * 1000);
  ssh_options_set(session, SSH_OPTIONS_TIMEOUT, &sec);
  ssh_options_set(session, SSH_OPTIONS_TIMEOUT_USEC, &usec);
}

bool IsConnected(ssh_session session) {
  return session != nullptr && ssh_is_connected(session) != 0 &&
         (ssh_get_status(session) & (SSH_CLOSED | SSH_CLOSED_ERROR)) == 0;
}

std::string Sha256Fingerprint(ssh_key key) {
  unsigned char* raw_hash = nullptr;
  size_t len = 0;
  if (ssh_get_publickey_hash(key, SSH_PUBLICKEY_HASH_SHA256, &raw_hash, &len) != 0) return "";
  SshHashPtr hash(raw_hash);
  SshCharPtr fingerprint(ssh_get_fingerprint_hash(SSH_PUBLICKEY_HASH_SHA256, hash.get(), len));
  return fingerprint ? fingerprint.get() : "";
}

std::string PublicKeyBase64(ssh_key key) {
  char* raw = nullptr;
  const int rc = ssh_pki_export_pubkey_base64(key, &raw);
  SshCharPtr b64(raw);
  if (rc != SSH_OK || b64 == nullptr) return "";
  return b64.get();
}

}  // namespace gpuwerk::relay::internal

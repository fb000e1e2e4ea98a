#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace gpuwerk::agent {

/// What the container's sshd said about a person's key.
enum class LoginProbe {
  kAccepted,    ///< sshd would accept a login with the key (it answered SSH_MSG_USERAUTH_PK_OK)
  kRefused,     ///< sshd answered but refuses the key (e.g. bad modes of authorized_keys, C05)
  kNoAnswer,    ///< no SSH server answered in time (not started yet, or gone)
  kUnsupported  ///< the key line could not be read as a public key libssh knows
};

/// Asks the sshd on `host:port` whether it would accept `user` logging in with the public key of
/// `authorized_key_line` (an OpenSSH authorized_keys line "type base64 [comment]", without
/// options), without the private key: the public-key query of RFC 4252 section 7 (a
/// SSH_MSG_USERAUTH_REQUEST with no signature, answered by SSH_MSG_USERAUTH_PK_OK only when the
/// key is authorised, which sshd decides with the same checks as a real login: file owner and
/// modes, StrictModes, the key's presence). This is how the agent proves a person's login works
/// before it reports an instance ready (case C05). The host key is not verified: the probe talks
/// to a container on this host's internal address and sends nothing secret. Uses libssh 0.10;
/// waits at most `timeout` in all (rounded up to whole seconds for libssh's connect).
/// Thread-safe (each call has its own libssh session). When `server_host_key` is given and the
/// sshd answered, it gets the host key the sshd presented as "TYPE BASE64" (e.g. "ssh-ed25519
/// AAAA…"), which the agent compares with the key it read from the container (ReadSshHostKey).
LoginProbe ProbeLogin(const std::string& host, uint16_t port, const std::string& user,
                      const std::string& authorized_key_line, std::chrono::milliseconds timeout,
                      std::string* server_host_key = nullptr);

/// The name of a LoginProbe value, for logs ("accepted", "refused", "no_answer", "unsupported").
const char* LoginProbeName(LoginProbe p);

}  // namespace gpuwerk::agent

#include "agent/login_probe.h"

#include <libssh/libssh.h>

#include <memory>
#include <sstream>

namespace gpuwerk::agent {
namespace {

struct SessionFree {
  void operator()(ssh_session s) const {
    if (ssh_is_connected(s)) ssh_disconnect(s);
    ssh_free(s);
  }
};
struct KeyFree {
  void operator()(ssh_key k) const { ssh_key_free(k); }
};
using Session = std::unique_ptr<std::remove_pointer_t<ssh_session>, SessionFree>;
using Key = std::unique_ptr<std::remove_pointer_t<ssh_key>, KeyFree>;

}  // namespace

const char* LoginProbeName(LoginProbe p) {
  switch (p) {
    case LoginProbe::kAccepted:
      return "accepted";
    case LoginProbe::kRefused:
      return "refused";
    case LoginProbe::kNoAnswer:
      return "no_answer";
    case LoginProbe::kUnsupported:
      return "unsupported";
  }
  return "unknown";
}

LoginProbe ProbeLogin(const std::string& host, uint16_t port, const std::string& user,
                      const std::string& authorized_key_line, std::chrono::milliseconds timeout,
                      std::string* server_host_key) {
  std::istringstream words(authorized_key_line);
  std::string type, base64;
  words >> type >> base64;
  const enum ssh_keytypes_e key_type = ssh_key_type_from_name(type.c_str());
  if (type.empty() || base64.empty() || key_type == SSH_KEYTYPE_UNKNOWN) {
    return LoginProbe::kUnsupported;
  }
  ssh_key raw_key = nullptr;
  if (ssh_pki_import_pubkey_base64(base64.c_str(), key_type, &raw_key) != SSH_OK) {
    return LoginProbe::kUnsupported;
  }
  Key key(raw_key);

  Session session(ssh_new());
  if (!session) return LoginProbe::kNoAnswer;
  ssh_session s = session.get();
  unsigned int port_value = port;
  long seconds = std::max<long>(1, static_cast<long>((timeout.count() + 999) / 1000));
  int no = 0;
  int log_level = SSH_LOG_NOLOG;
  ssh_options_set(s, SSH_OPTIONS_LOG_VERBOSITY, &log_level);
  ssh_options_set(s, SSH_OPTIONS_PROCESS_CONFIG, &no);  // never the agent's ~/.ssh/config
  ssh_options_set(s, SSH_OPTIONS_HOST, host.c_str());
  ssh_options_set(s, SSH_OPTIONS_PORT, &port_value);
  ssh_options_set(s, SSH_OPTIONS_USER, user.c_str());
  ssh_options_set(s, SSH_OPTIONS_TIMEOUT, &seconds);
  ssh_options_set(s, SSH_OPTIONS_KNOWNHOSTS, "/dev/null");
  ssh_options_set(s, SSH_OPTIONS_GLOBAL_KNOWNHOSTS, "/dev/null");
  if (ssh_connect(s) != SSH_OK) return LoginProbe::kNoAnswer;
  if (server_host_key != nullptr) {
    ssh_key raw_server = nullptr;
    if (ssh_get_server_publickey(s, &raw_server) == SSH_OK) {
      Key server(raw_server);
      char* b64 = nullptr;
      if (ssh_pki_export_pubkey_base64(server.get(), &b64) == SSH_OK && b64 != nullptr) {
        const char* name = ssh_key_type_to_char(ssh_key_type(server.get()));
        *server_host_key = std::string(name != nullptr ? name : "") + " " + b64;
        ssh_string_free_char(b64);
      }
    }
  }
  const int rc = ssh_userauth_try_publickey(s, nullptr, key.get());
  if (rc == SSH_AUTH_SUCCESS) return LoginProbe::kAccepted;
  if (rc == SSH_AUTH_ERROR || rc == SSH_AUTH_AGAIN) return LoginProbe::kNoAnswer;
  return LoginProbe::kRefused;  // SSH_AUTH_DENIED or SSH_AUTH_PARTIAL
}

}  // namespace gpuwerk::agent

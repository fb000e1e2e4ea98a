#include "relay/internal/client_login.h"

#include <spdlog/spdlog.h>

#include <string>
#include <string_view>
#include <utility>

#include "core/encoding.h"
#include "core/strings.h"
#include "protocol/relay_routing.h"
#include "relay/internal/libssh_calls.h"
#include "relay/internal/upstream_login.h"

// libssh 0.10 marks the public-key state getter deprecated in favour of the callback API, but the
// message API is the one that lets the relay answer the client after the authorizer and the
// upstream have answered (see docs/ssh.md "Threading"); it is still supported.
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

namespace gpuwerk::relay::internal {
namespace {

using SteadyClock = std::chrono::steady_clock;

/// A banner's bounds (docs/ssh.md "Refusals"): lines, and bytes a line.
constexpr size_t kBannerLines = 64;
constexpr size_t kBannerLineBytes = 512;

/// `text` as the relay sends it as a banner: each line as it is when it is well-formed UTF-8
/// without unsafe characters and at most kBannerLineBytes long, else core::BoundedPrintable;
/// at most kBannerLines lines; ends in a newline.
std::string BannerText(std::string_view text) {
  std::string out;
  size_t lines = 0;
  while (!text.empty()) {
    const size_t end = text.find('\n');
    const std::string_view line = text.substr(0, end);
    text = end == std::string_view::npos ? std::string_view() : text.substr(end + 1);
    if (++lines > kBannerLines) {
      out += "…\n";
      break;
    }
    if (line.size() <= kBannerLineBytes && core::IsValidUtf8(line) && !core::HasUnsafeText(line)) {
      out += line;
    } else {
      out += core::BoundedPrintable(line, kBannerLineBytes);
    }
    out += '\n';
  }
  return out;
}

/// Points `session`'s packet counters at `counter` while alive (libssh counts every packet it
/// reads into it), and away again before `counter` goes.
class PacketCount {
 public:
  explicit PacketCount(ssh_session session) : session_(session) {
    ssh_set_counters(session_, nullptr, &counter_);
  }
  ~PacketCount() { ssh_set_counters(session_, nullptr, nullptr); }
  PacketCount(const PacketCount&) = delete;
  PacketCount& operator=(const PacketCount&) = delete;
  uint64_t packets_in() const { return counter_.in_packets; }

 private:
  ssh_session session_;
  ssh_counter_struct counter_{};
};

class ClientAuthentication {
 public:
  ClientAuthentication(ssh_session client, const ConnectionContext& ctx, ConnectionControl& control)
      : client_(client), ctx_(ctx), control_(control) {}

  std::optional<ClientLogin> Run(ssh_event event, SteadyClock::time_point deadline) {
    // What libssh queued during the key exchange is answered before counting starts; from then
    // on every packet the client sends before its login must become a message the relay answers.
    TakeMessages();
    PacketCount count(client_);
    taken_ = 0;
    while (!login_) {
      if (control_.close_requested || fatal_) return {};
      if (SteadyClock::now() >= deadline) {
        ctx_.limiter->RecordPreAuthTimeout(control_.source_address);  // login_grace
        return {};
      }
      int rc = ssh_event_dopoll(event, 200);
      if (rc == SSH_ERROR && !IsConnected(client_)) return {};
      TakeMessages();
      if (!IsConnected(client_)) return {};
      if (!login_ && !fatal_ && count.packets_in() > taken_) {
        EndUnanswerable();
        return {};
      }
    }
    return std::move(login_);
  }

 private:
  /// Answers the messages libssh has queued, until none is left (or a login or an end).
  void TakeMessages() {
    while (!login_ && !fatal_) {
      SshMessagePtr msg(ssh_message_get(client_));
      if (msg == nullptr) break;
      ++taken_;
      HandleAuthMessage(msg.get());
    }
  }

  /// libssh 0.10 drops some requests without a word to the relay or the client: a public-key
  /// login whose signature does not verify (which is what a NUL byte in the user name makes of
  /// any login: libssh checks the signature over the name up to the NUL), a key it cannot read,
  /// GSSAPI. The client would wait out login_grace for an answer that never comes; the relay
  /// ends the connection at once instead, and counts a failed attempt for the source.
  void EndUnanswerable() {
    spdlog::info(
        "relay: ended the connection from {} at once: it sent a login request the relay cannot "
        "answer (a signature that does not verify, such as one over a user name with a NUL "
        "byte, or a key it cannot read)",
        control_.source_address);
    ctx_.limiter->RecordAuthFailure(control_.source_address);
    ssh_session_set_disconnect_message(
        client_,
        "gpuwerk: your login request could not be verified. Use the instance's hostname as the "
        "SSH user name, as the dashboard shows it, with a key attached to that instance.");
    ssh_disconnect(client_);
    fatal_ = true;
  }

  void HandleAuthMessage(ssh_message msg) {
    const int type = ssh_message_type(msg);
    if (type == SSH_REQUEST_SERVICE) {
      const char* service = ssh_message_service_service(msg);
      if (service != nullptr && std::string_view(service) == "ssh-userauth") {
        ssh_message_service_reply_success(msg);
      } else {
        ssh_message_reply_default(msg);
      }
    } else if (type == SSH_REQUEST_AUTH) {
      const int method = ssh_message_subtype(msg);
      const char* user = ssh_message_auth_user(msg);
      if (method == SSH_AUTH_METHOD_PUBLICKEY) {
        const auto state = ssh_message_auth_publickey_state(msg);
        if (state == SSH_PUBLICKEY_STATE_NONE) {
          // A query ("would you take this key?"): yes for any key; the decision waits for the
          // signature, so nothing about the key's instances is said to someone who only has its
          // public half.
          ssh_message_auth_reply_pk_ok_simple(msg);
        } else if (state == SSH_PUBLICKEY_STATE_VALID) {
          AuthorizeAndConnect(msg, user ? user : "", ssh_message_auth_pubkey(msg));
        } else {
          Deny(msg, /*count=*/true);  // a signature that does not verify
        }
      } else if (method == SSH_AUTH_METHOD_NONE) {
        Deny(msg, /*count=*/false);  // clients start with "none" to learn the methods
      } else {
        // password, keyboard-interactive, hostbased: refused, and counted.
        spdlog::info("relay: refused a non-publickey login attempt from {}",
                     control_.source_address);
        Deny(msg, /*count=*/true);
      }
    } else {
      ssh_message_reply_default(msg);
    }
  }

  void Deny(ssh_message msg, bool count = false) {
    ssh_message_auth_set_methods(msg, SSH_AUTH_METHOD_PUBLICKEY);
    ssh_message_reply_default(msg);
    if (count) CountFailure();
  }

  void CountFailure() {
    ctx_.limiter->RecordAuthFailure(control_.source_address);
    if (++auth_failures_ >= ctx_.options->max_auth_tries) {
      ssh_session_set_disconnect_message(client_, "gpuwerk: too many authentication failures");
      ssh_disconnect(client_);
      fatal_ = true;
    }
  }

  void SendBanner(const std::string& text) {
    const std::string t = BannerText(text);
    SshStringPtr s(ssh_string_from_char(t.c_str()));
    if (s != nullptr) ssh_send_issue_banner(client_, s.get());
  }

  /// Records and logs the refusal (the user name in its bounded printable form, one line with
  /// `detail` for the operator), tells the person `message` as a banner, and fails the attempt.
  void Refuse(ssh_message msg, const std::string& code, const std::string& message,
              const std::string& user, const std::string& fingerprint, const RelayTarget* target,
              const std::string& detail = "", bool count = true,
              const std::string& presented_host_key = "") {
    RelayRefusalRecord r;
    r.code = code;
    r.message = message;
    r.user = core::BoundedPrintable(user);
    r.key_fingerprint = fingerprint;
    r.source_address = control_.source_address;
    r.at = std::chrono::system_clock::now();
    if (target != nullptr) {
      r.person_id = target->person_id;
      r.instance_id = target->instance_id;
      if (code == "upstream_host_key_mismatch") {
        r.expected_host_key = target->upstream_host_key_fingerprint;
        r.presented_host_key = presented_host_key;
      }
    }
    ctx_.log->OnRefused(r);
    spdlog::info("relay: refused user \"{}\" from {} key {}: {}{}{}", r.user,
                 control_.source_address, fingerprint, code, detail.empty() ? "" : ": ",
                 core::BoundedPrintable(detail));
    SendBanner(message);
    Deny(msg, count);
  }

  void AuthorizeAndConnect(ssh_message msg, const std::string& user, ssh_key key) {
    AuthorizeRequest req;
    req.user = user;
    req.source_address = control_.source_address;
    if (key != nullptr) {
      req.key_type =
          ssh_key_type_to_char(ssh_key_type(key)) ? ssh_key_type_to_char(ssh_key_type(key)) : "";
      req.key_blob_base64 = PublicKeyBase64(key);
      req.key_fingerprint = Sha256Fingerprint(key);
    }
    if (req.key_fingerprint.empty()) {
      Deny(msg, true);
      return;
    }
    // A user name longer than any instance's is refused here, before the authorizer is asked
    // cheap refusals first). The authorize request bounds its fields too, and the
    // server's 400 read here as authorizer_unavailable (docs/ssh.md "Refusals").
    if (auto length = protocol::CheckRelayUserLength(user); !length) {
      Refuse(msg, "invalid_relay_user",
             "gpuwerk: " + length.error().message +
                 ".\nThe dashboard and 'gpuwerk instances show' print the command.\n",
             user, req.key_fingerprint, nullptr);
      return;
    }
    const uint64_t changes_before =
        ctx_.access_changes != nullptr ? ctx_.access_changes->load() : 0;
    auto decision = ctx_.authorizer->Authorize(req);
    if (!decision) {
      // What went wrong (the server's address, curl's words) is for the operator's log only.
      Refuse(msg, "authorizer_unavailable",
             "gpuwerk: the relay cannot check your access right now. Please try again in a "
             "minute; if it keeps failing, tell the operator of this service.",
             user, req.key_fingerprint, nullptr, decision.error().message);
      return;
    }
    if (!decision->target) {
      Refuse(msg, "not_authorized", decision->refusal, user, req.key_fingerprint, nullptr);
      return;
    }
    const RelayTarget& t = *decision->target;
    // From here the connection counts for its person, not as one more unauthenticated
    // connection from its source (an office behind one address holds many relay sessions).
    if (!ctx_.limiter->TryAuthenticate(control_.source_address, t.person_id)) {
      const std::string most = std::to_string(ctx_.options->max_sessions_per_person);
      // Not a failed login: nothing counts against the source.
      Refuse(msg, "too_many_sessions",
             "gpuwerk: you have " + most +
                 " relay sessions open, the most one person may have at once. Close one (or "
                 "share one connection with ControlMaster) and try again.",
             user, req.key_fingerprint, &t, "max_sessions_per_person " + most, /*count=*/false);
      return;
    }
    // The relay key's certificate for this instance alone (issue 12 finding 1), from the cache
    // or signed now.
    auto certificate = ctx_.certificates->For(t.instance_id);
    if (!certificate) {
      ctx_.limiter->Unauthenticate(control_.source_address, t.person_id);
      spdlog::error("relay: no certificate for instance {}: {}",
                    core::BoundedPrintable(t.instance_id, 64), certificate.error().message);
      Refuse(msg, RefusalCode(UpstreamLoginFailure::kNoCredential),
             RefusalMessage(UpstreamLoginFailure::kNoCredential, t), user, req.key_fingerprint, &t,
             certificate.error().api_code, /*count=*/false);
      return;
    }
    std::string presented;
    auto upstream = LogInUpstream(t, *ctx_.relay_key_private, *certificate,
                                  ctx_.options->upstream_timeout, &presented);
    if (!upstream) {
      ctx_.limiter->Unauthenticate(control_.source_address, t.person_id);
      Refuse(msg, RefusalCode(upstream.error()), RefusalMessage(upstream.error(), t), user,
             req.key_fingerprint, &t, "", /*count=*/true, presented);
      return;
    }
    ssh_message_auth_reply_success(msg, 0);
    {
      std::lock_guard lock(control_.mu);
      control_.instance_id = t.instance_id;
      control_.person_id = t.person_id;
      control_.login = t.login;
      control_.hostname = t.hostname;
      control_.request = req;
    }
    control_.authenticated = true;
    // An access change pushed while this login was being decided did not see it: ask again.
    if (ctx_.access_changes != nullptr && ctx_.access_changes->load() != changes_before &&
        ctx_.recheck) {
      ctx_.recheck(control_.id);
    }
    login_ = ClientLogin{std::move(req), t, std::move(*upstream)};
  }

  ssh_session client_;
  const ConnectionContext& ctx_;
  ConnectionControl& control_;
  bool fatal_ = false;
  int auth_failures_ = 0;
  uint64_t taken_ = 0;  ///< messages taken since the packet count started
  std::optional<ClientLogin> login_;
};

}  // namespace

std::optional<ClientLogin> LogInClient(ssh_session client, ssh_event event,
                                       std::chrono::steady_clock::time_point deadline,
                                       const ConnectionContext& context,
                                       ConnectionControl& control) {
  return ClientAuthentication(client, context, control).Run(event, deadline);
}

}  // namespace gpuwerk::relay::internal

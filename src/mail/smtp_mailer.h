#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "core/error.h"
#include "mail/mailer.h"

namespace gpuwerk::mail {

/// When SmtpMailer upgrades a plain `smtp://` connection with STARTTLS (RFC 3207). Ignored for
/// `smtps://`, which is TLS from the first byte (RFC 8314).
enum class StartTls {
  kNever,      ///< never send STARTTLS; mail and credentials travel in clear text
  kIfOffered,  ///< use STARTTLS when the server offers it, else continue in clear text
  kRequired,   ///< fail (mail_unavailable) unless the connection is upgraded to TLS
};

/// Parses the `smtp_starttls` option: "never", "if-offered" or "required".
/// Errors: kInvalidArgument "invalid_config" ("smtp_starttls must be never, if-offered or
/// required").
core::Result<StartTls> ParseStartTls(std::string_view text);

/// Configuration of SmtpMailer.
struct SmtpMailerOptions {
  /// Submission server, "smtp://host:port" (plain or STARTTLS; 587 or 25) or
  /// "smtps://host:port" (implicit TLS; 465). Put no credentials in the URL: use the fields.
  std::string url;
  /// The sender: "noreply@example.com" or "gpuwerk <noreply@example.com>" (see ValidateFrom).
  /// Its address is the SMTP envelope sender and its domain the Message-ID domain.
  std::string from;
  /// SMTP AUTH (RFC 4954) user name; authentication is skipped when empty.
  std::string username;
  /// SMTP AUTH password. Never logged and never part of an error message.
  std::string password;
  StartTls starttls = StartTls::kIfOffered;
  /// Limit for one whole Send (connect, TLS, dialogue, upload), in seconds.
  int timeout_seconds = 30;
  /// PEM file of CA certificates to verify the server with instead of the system store.
  std::optional<std::string> ca_file;
};

/// Checks options at start-up: the URL is smtp:// or smtps:// with a host and no credentials in
/// it, the sender passes ValidateFrom, a password comes with a user name, the timeout is
/// positive. Errors: kInvalidArgument "invalid_mail_config" (or "invalid_mail_from").
core::Result<void> ValidateSmtpMailerOptions(const SmtpMailerOptions& options);

/// A Mailer that submits each mail over SMTP (RFC 5321) with libcurl: optional STARTTLS (RFC
/// 3207) or implicit TLS (RFC 8314), optional AUTH (RFC 4954), `MAIL FROM` the configured
/// sender, one `RCPT TO`, and the message from RenderMessage (RFC 5322 / MIME) as DATA. Each Send
/// opens its own connection; TLS certificates and host names are always verified.
///
/// Reply mapping: success is a 250 to the end of DATA. A 5xx reply to `RCPT TO` or to the
/// message (after DATA), other than 500/502/503/504 (protocol errors), is "mail_rejected"
/// (kInvalidArgument): the recipient or the content is refused for good. Everything else —
/// connection refused, DNS, TLS, timeout, STARTTLS missing under kRequired, a 5xx to EHLO, AUTH
/// or `MAIL FROM` (authentication or sender configuration: fixing the configuration makes the
/// mail go out), and every 4xx — is "mail_unavailable" (kUnavailable). Error messages carry
/// the curl reason and the server's last reply line, never the password.
///
/// Thread-safe: concurrent Sends use separate connections.
class SmtpMailer final : public Mailer {
 public:
  using Options = SmtpMailerOptions;
  using StartTls = mail::StartTls;

  /// Does not connect. Call ValidateSmtpMailerOptions first to fail fast on bad configuration.
  explicit SmtpMailer(SmtpMailerOptions options);
  ~SmtpMailer() override;

  /// See Mailer::Send. The Date header is the system clock's time at the call.
  core::Result<void> Send(const Mail& mail) override;

 private:
  SmtpMailerOptions options_;
};

}  // namespace gpuwerk::mail

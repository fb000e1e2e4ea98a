#pragma once

#include "core/error.h"
#include "mail/mail.h"

namespace gpuwerk::mail {

/// Sends one mail now: the seam between the Outbox and a delivery mechanism (SmtpMailer for
/// production, MaildirMailer for `gpuwerk up`, FakeMailer in tests).
///
/// Implementations are thread-safe: Send may be called from several threads at once.
class Mailer {
 public:
  virtual ~Mailer() = default;

  /// Delivers `mail` to the next hop, blocking until it has accepted or refused it (may take
  /// seconds: up to the implementation's timeout). Success means the next hop took
  /// responsibility for the mail (SMTP 250 after DATA, RFC 5321 §4.1.1.4).
  ///
  /// Errors:
  /// - kInvalidArgument "invalid_mail": the mail fails ValidateMail (never retry).
  /// - kInvalidArgument "mail_rejected": the next hop refused this mail for good (an SMTP 5xx
  ///   reply about the recipient or the message); retrying will not help.
  /// - kUnavailable "mail_unavailable": connection, TLS, timeout, authentication, a 4xx reply or
  ///   any other failure that may pass; retry later.
  /// Error messages never contain passwords.
  virtual core::Result<void> Send(const Mail& mail) = 0;
};

}  // namespace gpuwerk::mail

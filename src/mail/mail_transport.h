#pragma once

#include <string_view>

#include "core/error.h"

namespace gpuwerk::mail {

/// How the server delivers its outbox mails (the `mail` option, docs/configuration.md).
enum class MailTransport {
  kMaildir,  ///< MaildirMailer: files in DATA/mail/new, links printed to the log (`gpuwerk up`)
  kSmtp,     ///< SmtpMailer: SMTP submission to `smtp_url`
};

/// The option's word for `transport`: "maildir" or "smtp".
std::string_view MailTransportName(MailTransport transport);

/// Parses the `mail` option: "maildir" or "smtp" (exactly; no other spelling).
/// Errors: kInvalidArgument "invalid_config" ("mail must be 'maildir' or 'smtp', got '…'").
core::Result<MailTransport> ParseMailTransport(std::string_view text);

}  // namespace gpuwerk::mail

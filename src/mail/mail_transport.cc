#include "mail/mail_transport.h"

#include <string>

namespace gpuwerk::mail {

std::string_view MailTransportName(MailTransport transport) {
  switch (transport) {
    case MailTransport::kMaildir:
      return "maildir";
    case MailTransport::kSmtp:
      return "smtp";
  }
  return "maildir";
}

core::Result<MailTransport> ParseMailTransport(std::string_view text) {
  for (MailTransport t : {MailTransport::kMaildir, MailTransport::kSmtp}) {
    if (text == MailTransportName(t)) return t;
  }
  return core::InvalidArgument("invalid_config", "mail must be 'maildir' or 'smtp', got '" +
                                                     std::string(text.substr(0, 40)) + "'");
}

}  // namespace gpuwerk::mail

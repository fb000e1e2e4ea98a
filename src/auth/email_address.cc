#include "auth/email_address.h"

#include <algorithm>
#include <cctype>

#include "core/strings.h"
#include "mail/message.h"

namespace gpuwerk::auth {

core::Result<EmailAddress> ParseEmailAddress(std::string_view text) {
  text = core::Trim(text, core::kWhitespace);
  auto bad = [] {
    return core::InvalidArgument("invalid_email",
                                 "Enter a valid email address, like name@example.com.");
  };
  if (text.empty() || text.size() > 254) return bad();
  for (unsigned char c : text) {
    if (c <= 0x20 || c == 0x7f) return bad();
  }
  size_t at = text.find('@');
  if (at == std::string_view::npos || at == 0 || text.find('@', at + 1) != std::string_view::npos) {
    return bad();
  }
  std::string_view domain = text.substr(at + 1);
  if (domain.size() < 3 || domain.find('.') == std::string_view::npos || domain.front() == '.' ||
      domain.back() == '.') {
    return bad();
  }
  // What we accept must also be deliverable by the mailer (plain ASCII local@host.name).
  if (!mail::IsValidAddress(text)) return bad();
  EmailAddress out;
  out.display = std::string(text);
  out.normalised = out.display;
  std::transform(out.normalised.begin(), out.normalised.end(), out.normalised.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

}  // namespace gpuwerk::auth

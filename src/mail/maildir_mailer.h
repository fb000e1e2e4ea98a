#pragma once

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "mail/mailer.h"

namespace gpuwerk::mail {

/// The http:// and https:// links in `text`, in order of first appearance, without duplicates.
/// A link ends at white space, a control character or one of `<>"'`; trailing punctuation
/// `.,;:!?)]}` is not part of it. Pure; thread-safe.
std::vector<std::string> FindLinks(std::string_view text);

/// The local outbox of `gpuwerk up`: instead of sending, stores each mail as a file in a Maildir
/// (https://cr.yp.to/proc/maildir.html) and writes it to the log, so the operator of a single
/// machine can read mails with any Maildir reader (mutt -f DIR) and follow magic links straight
/// from the terminal.
///
/// Each Send renders the message (RenderMessage; stored with LF line endings, the local
/// convention of Maildir files), writes it to `dir/tmp/<unique>` (mode 0600, fsync'd) and
/// renames it into `dir/new/<unique>`, where <unique> is `<seconds>.M<microseconds>P<pid>Q<n>
/// R<random>.<host>` as the Maildir spec describes. `dir`, `dir/tmp`, `dir/new` and `dir/cur`
/// are created (mode 0700) when missing. Then it logs (spdlog, info) one line
/// `mail to=<to> subject=<subject> file=<path>` and one `mail link: <url>` per link in the text
/// body. The links are secrets (sign-in links): this mailer is meant for a single operator's
/// machine, not for production.
///
/// Thread-safe.
class MaildirMailer final : public Mailer {
 public:
  /// `from` as ValidateFrom accepts. Touches nothing until the first Send.
  MaildirMailer(std::filesystem::path dir, std::string from);

  /// See Mailer::Send. Errors: kInvalidArgument "invalid_mail"; kUnavailable
  /// "mail_unavailable" when the directory or file cannot be created or written (disk full,
  /// permissions). The Date header is the system clock's time at the call.
  core::Result<void> Send(const Mail& mail) override;

  /// The Maildir's root.
  const std::filesystem::path& dir() const { return dir_; }

 private:
  std::filesystem::path dir_;
  std::string from_;
  std::atomic<uint64_t> deliveries_{0};
};

}  // namespace gpuwerk::mail

#pragma once

#include <string>

namespace gpuwerk::mail {

/// One mail to one person, as the domain modules (auth, teams, sched, billing) write it. Plain
/// data; the sender (From) is configuration of the Mailer, not part of the mail.
///
/// - `to`: one addr-spec (RFC 5322 §3.4.1), e.g. "ada@example.com"; no display name.
/// - `subject`: one line of UTF-8 text; never contains CR or LF.
/// - `text_body`: the text/plain alternative, UTF-8, lines separated by "\n" or "\r\n".
/// - `html_body`: the text/html alternative, UTF-8; may be empty (then only text/plain is sent).
/// - `message_id`: the left part of the Message-ID (letters, digits, `_ . -`), or empty for a
///   random one. The outbox sets its mail's id, so every attempt at one outbox mail carries the
///   same Message-ID: delivery is at-least-once (an attempt whose answer was lost is made again),
///   and a recipient that gets a mail twice can tell it is one mail. Not stored.
///
/// ValidateMail (mail/message.h) checks all of this; Outbox::Enqueue and every Mailer call it.
struct Mail {
  std::string to;
  std::string subject;
  std::string text_body;
  std::string html_body;
  std::string message_id;
};

}  // namespace gpuwerk::mail

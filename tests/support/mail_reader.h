#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace gpuwerk::testing {

/// A delivered mail as a test reads it back from a file (.eml / Maildir entry).
struct ReceivedMail {
  std::string to;
  std::string subject;
  std::string message_id;  ///< the Message-ID header's value, e.g. "<out_x@gpuwerk.test>"
  std::string text_body;   ///< the decoded text/plain part
  std::string raw;
  std::filesystem::path file;  ///< where it was read from
  /// Every http(s) URL in the text body, in order.
  std::vector<std::string> Links() const;
  /// The token= query value of the first link that contains `path`, "" when none.
  std::string TokenFromLink(const std::string& path) const;
};

/// Reads every regular file under `dir` (recursively) as an RFC 5322 message, oldest first.
/// Understands what gpuwerk's mail renderer writes: multipart/alternative with base64 parts.
std::vector<ReceivedMail> ReadMails(const std::filesystem::path& dir);

/// The mails in `dir` addressed to `to` (case-insensitive), each once: a file whose Message-ID an
/// earlier file has is a repeat of that mail (the outbox delivers at-least-once, with one
/// Message-ID for every attempt at a mail: src/mail/README.md) and is left out.
std::vector<ReceivedMail> MailsTo(const std::filesystem::path& dir, const std::string& to);

}  // namespace gpuwerk::testing

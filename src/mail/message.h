#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "core/error.h"
#include "mail/mail.h"

namespace gpuwerk::mail {

/// Largest subject accepted, in bytes of UTF-8 (well under RFC 5322's 998-byte line limit).
inline constexpr size_t kMaxSubjectBytes = 900;
/// Largest text or HTML body accepted, in bytes.
inline constexpr size_t kMaxBodyBytes = 1 << 20;

/// Whether `address` is an addr-spec gpuwerk can mail: ASCII `local@domain` (RFC 5322 §3.4.1
/// dot-atom local part, RFC 5321 §4.5.3.1 lengths: local ≤ 64, whole ≤ 254 bytes) with a host
/// name domain of letters, digits, '-' and '.'. Quoted local parts, address literals and
/// internationalised (SMTPUTF8) addresses are refused. Pure; thread-safe.
bool IsValidAddress(std::string_view address);

/// Checks a mail before it is stored or sent. Errors: kInvalidArgument "invalid_mail" when the
/// recipient is not a valid address (IsValidAddress; this is also what makes a CR/LF header
/// injection through `to` impossible), the subject is empty, longer than kMaxSubjectBytes, not
/// UTF-8 or contains a control character (CR and LF included), or a body is not UTF-8, contains
/// NUL or is longer than kMaxBodyBytes, or the text body is empty. The message never repeats
/// the offending input. Pure; thread-safe.
core::Result<void> ValidateMail(const Mail& mail);

/// Checks a configured sender, either a bare address or `Display Name <address>` (RFC 5322
/// §3.4 name-addr; the name may be UTF-8 and is encoded per RFC 2047 on output). Errors:
/// kInvalidArgument "invalid_mail_from". Call at start-up to fail fast. Pure; thread-safe.
core::Result<void> ValidateFrom(std::string_view from);

/// The bare address of a sender value: "gpuwerk <noreply@example.com>" → "noreply@example.com";
/// a bare address is returned as is. This is what goes into SMTP `MAIL FROM` (RFC 5321 §4.1.1.2).
std::string FromAddress(std::string_view from);

/// The domain of a sender value ("noreply@example.com" → "example.com"), used for Message-IDs;
/// "localhost" when there is none.
std::string FromDomain(std::string_view from);

/// Formats Unix seconds as an RFC 5322 §3.3 date-time in UTC, e.g.
/// "Fri, 15 Jan 2027 08:00:00 +0000". Locale-independent.
std::string FormatRfc5322Date(int64_t unix_seconds);

/// Renders `mail` as an Internet message ready for SMTP DATA (RFC 5322 with MIME, RFC 2045–2047):
/// CRLF line endings, header lines folded at spaces to at most 78 characters where the text
/// allows (never over 998), body lines of at most 76; headers Date (`date_unix`, Unix seconds,
/// shown in UTC), From (`from`, as ValidateFrom accepts), To, Subject (RFC 2047 `=?UTF-8?B?…?=`
/// encoded-words when it is not plain ASCII), Message-ID (`<mail.message_id@message_id_domain>`,
/// `<random@message_id_domain>` when mail.message_id is empty),
/// Auto-Submitted: auto-generated (RFC 3834), MIME-Version; a multipart/alternative body (RFC
/// 2046 §5.1.4) with a text/plain then a text/html part, each `charset=UTF-8` with
/// Content-Transfer-Encoding: base64 (lines of 76 characters, line breaks canonicalised to CRLF
/// first). When `html_body` is empty the body is a single text/plain part.
///
/// Does not validate: call ValidateMail (and ValidateFrom) first. Even so it never emits a header
/// injection: control characters in header values are replaced by spaces. Thread-safe; the
/// Message-ID's random part comes from libsodium.
std::string RenderMessage(const Mail& mail, std::string_view from,
                          std::string_view message_id_domain, int64_t date_unix);

/// RenderMessage with a given Message-ID (without the angle brackets, e.g. "abc@example.com");
/// deterministic, for tests and for callers that keep a Message-ID stable across retries.
std::string RenderMessageWithId(const Mail& mail, std::string_view from, int64_t date_unix,
                                std::string_view message_id);

}  // namespace gpuwerk::mail

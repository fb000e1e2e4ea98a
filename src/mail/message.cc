#include "mail/message.h"

#include <fmt/format.h>

#include <array>
#include <chrono>

#include "core/encoding.h"
#include "core/logging.h"
#include "core/random.h"
#include "core/strings.h"

namespace gpuwerk::mail {
namespace {

constexpr size_t kMaxLineChars = 78;           // RFC 5322 §2.1.1 "SHOULD"
constexpr size_t kBase64LineChars = 76;        // RFC 2045 §6.8
constexpr size_t kEncodedWordInputBytes = 39;  // 52 base64 chars + 12 = 64-char encoded-word
constexpr std::string_view kBoundary = "=_gpuwerk_alternative_part";  // never in base64 text

bool IsAtext(char c) {
  if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) return true;
  return std::string_view("!#$%&'*+-/=?^_`{|}~").find(c) != std::string_view::npos;
}

bool IsControl(unsigned char c) { return c < 0x20 || c == 0x7f; }

bool IsAscii(std::string_view s) {
  for (unsigned char c : s) {
    if (c >= 0x80) return false;
  }
  return true;
}

/// Length of the well-formed UTF-8 sequence starting at s[i] (RFC 3629), 0 when ill-formed.
size_t Utf8SequenceLength(std::string_view s, size_t i) {
  const auto b = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char c = b(i);
  if (c < 0x80) return 1;
  size_t n;
  uint32_t min;
  uint32_t cp;
  if ((c & 0xe0) == 0xc0) {
    n = 2, min = 0x80, cp = c & 0x1f;
  } else if ((c & 0xf0) == 0xe0) {
    n = 3, min = 0x800, cp = c & 0x0f;
  } else if ((c & 0xf8) == 0xf0) {
    n = 4, min = 0x10000, cp = c & 0x07;
  } else {
    return 0;
  }
  if (i + n > s.size()) return 0;
  for (size_t k = 1; k < n; ++k) {
    if ((b(i + k) & 0xc0) != 0x80) return 0;
    cp = (cp << 6) | (b(i + k) & 0x3f);
  }
  if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return 0;
  return n;
}

bool IsUtf8(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    const size_t n = Utf8SequenceLength(s, i);
    if (n == 0) return false;
    i += n;
  }
  return true;
}

/// A sender split into display name (unquoted, may be UTF-8) and address.
struct Mailbox {
  std::string name;
  std::string address;
};

Mailbox ParseMailbox(std::string_view value) {
  value = core::Trim(value);
  Mailbox box;
  const size_t open = value.rfind('<');
  if (!value.empty() && value.back() == '>' && open != std::string_view::npos) {
    box.address = std::string(value.substr(open + 1, value.size() - open - 2));
    std::string_view name = core::Trim(value.substr(0, open));
    if (name.size() >= 2 && name.front() == '"' && name.back() == '"') {
      name = name.substr(1, name.size() - 2);
      for (size_t i = 0; i < name.size(); ++i) {
        if (name[i] == '\\' && i + 1 < name.size()) ++i;
        box.name += name[i];
      }
    } else {
      box.name = std::string(name);
    }
  } else {
    box.address = std::string(value);
  }
  return box;
}

/// Replaces every control character (CR and LF included) with a space, so a header value can
/// never end its line early.
std::string Sanitize(std::string_view s) {
  std::string out(s);
  for (char& c : out) {
    if (IsControl(static_cast<unsigned char>(c))) c = ' ';
  }
  return out;
}

/// RFC 2047 encoded-words (charset UTF-8, "B" encoding) for `text`, joined by single spaces
/// (which decoders drop between adjacent encoded-words). Splits only between characters.
std::string EncodeWords(std::string_view text) {
  std::string out;
  size_t i = 0;
  while (i < text.size()) {
    size_t end = i;
    while (end < text.size()) {
      size_t n = Utf8SequenceLength(text, end);
      if (n == 0) n = 1;  // not UTF-8 (never after validation): keep the byte, do not loop
      if (end + n - i > kEncodedWordInputBytes) break;
      end += n;
    }
    if (!out.empty()) out += ' ';
    out += "=?UTF-8?B?";
    out += core::Base64Encode(text.substr(i, end - i));
    out += "?=";
    i = end;
  }
  return out;
}

/// `name: value` folded (RFC 5322 §2.2.3) before spaces so lines stay within kMaxLineChars where
/// a space allows it, ended by CRLF. Never leaves a line of only white space.
std::string Header(std::string_view name, std::string_view value) {
  const std::string line = fmt::format("{}: {}", name, value);
  std::string out;
  size_t line_len = 0;
  size_t i = 0;
  while (i < line.size()) {
    // A segment is a run of spaces followed by a run of non-spaces.
    size_t j = i;
    while (j < line.size() && line[j] == ' ') ++j;
    const bool has_text = j < line.size();
    while (j < line.size() && line[j] != ' ') ++j;
    const size_t seg = j - i;
    if (line_len > 0 && has_text && line[i] == ' ' && line_len + seg > kMaxLineChars) {
      out += "\r\n";
      line_len = 0;
    }
    out.append(line, i, seg);
    line_len += seg;
    i = j;
  }
  out += "\r\n";
  return out;
}

/// An unstructured header value (RFC 5322 §3.2.5): as is when plain printable ASCII, otherwise
/// RFC 2047 encoded-words. "=?" also forces encoding so the text is never misread as one.
std::string UnstructuredValue(std::string_view text) {
  const std::string clean = Sanitize(text);
  if (IsAscii(clean) && clean.find("=?") == std::string::npos) return clean;
  return EncodeWords(clean);
}

/// A display name as a phrase (RFC 5322 §3.2.5): atoms, a quoted-string, or encoded-words.
std::string PhraseValue(std::string_view name) {
  const std::string clean = Sanitize(name);
  if (!IsAscii(clean) || clean.find("=?") != std::string::npos) return EncodeWords(clean);
  bool atoms = true;
  for (char c : clean) atoms = atoms && (IsAtext(c) || c == ' ');
  if (atoms) return clean;
  std::string quoted = "\"";
  for (char c : clean) {
    if (c == '"' || c == '\\') quoted += '\\';
    quoted += c;
  }
  quoted += '"';
  return quoted;
}

std::string FromValue(std::string_view from) {
  const Mailbox box = ParseMailbox(from);
  const std::string address = Sanitize(box.address);
  if (core::Trim(box.name).empty()) return address;
  return fmt::format("{} <{}>", PhraseValue(box.name), address);
}

/// `body` with every line break (CRLF, LF or CR) as CRLF: the canonical form of text (RFC 2045
/// §6.8, RFC 2046 §4.1.1) that the base64 encoding carries.
std::string CanonicalLineBreaks(std::string_view body) {
  std::string out;
  out.reserve(body.size() + body.size() / 32);
  for (size_t i = 0; i < body.size(); ++i) {
    const char c = body[i];
    if (c == '\r') {
      out += "\r\n";
      if (i + 1 < body.size() && body[i + 1] == '\n') ++i;
    } else if (c == '\n') {
      out += "\r\n";
    } else {
      out += c;
    }
  }
  return out;
}

std::string Base64Lines(std::string_view bytes) {
  const std::string encoded = core::Base64Encode(bytes);
  std::string out;
  out.reserve(encoded.size() + encoded.size() / kBase64LineChars * 2 + 2);
  for (size_t i = 0; i < encoded.size(); i += kBase64LineChars) {
    out.append(encoded, i, kBase64LineChars);
    out += "\r\n";
  }
  return out;
}

std::string TextPart(std::string_view subtype, std::string_view body) {
  return fmt::format(
      "Content-Type: text/{}; charset=UTF-8\r\nContent-Transfer-Encoding: base64\r\n\r\n{}",
      subtype, Base64Lines(CanonicalLineBreaks(body)));
}

std::string SanitizeDomain(std::string_view domain) {
  std::string out;
  for (char c : domain) {
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
        c == '.') {
      out += c;
    }
  }
  return out.empty() ? std::string("localhost") : out;
}

core::Result<void> Invalid(std::string message) {
  return core::InvalidArgument("invalid_mail", std::move(message));
}

}  // namespace

bool IsValidAddress(std::string_view address) {
  if (address.size() > 254) return false;
  const size_t at = address.rfind('@');
  if (at == std::string_view::npos || at == 0 || at > 64 || at + 1 == address.size()) {
    return false;
  }
  // Local part: dot-atom (RFC 5322 §3.2.3).
  const std::string_view local = address.substr(0, at);
  if (local.front() == '.' || local.back() == '.') return false;
  for (size_t i = 0; i < local.size(); ++i) {
    const char c = local[i];
    if (c == '.') {
      if (local[i - 1] == '.') return false;
    } else if (!IsAtext(c)) {
      return false;
    }
  }
  // Domain: host name labels (RFC 5321 §4.1.2 Domain, RFC 1035 letters-digits-hyphen).
  const std::string_view domain = address.substr(at + 1);
  size_t label_start = 0;
  for (size_t i = 0; i <= domain.size(); ++i) {
    if (i == domain.size() || domain[i] == '.') {
      const size_t len = i - label_start;
      if (len == 0 || len > 63) return false;
      if (domain[label_start] == '-' || domain[i - 1] == '-') return false;
      label_start = i + 1;
      continue;
    }
    const char c = domain[i];
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-')) {
      return false;
    }
  }
  return true;
}

core::Result<void> ValidateMail(const Mail& mail) {
  if (!IsValidAddress(mail.to)) return Invalid("mail recipient is not a valid email address");
  if (mail.subject.empty()) return Invalid("mail subject is empty");
  if (mail.subject.size() > kMaxSubjectBytes) return Invalid("mail subject is too long");
  if (!IsUtf8(mail.subject)) return Invalid("mail subject is not UTF-8");
  for (unsigned char c : mail.subject) {
    if (IsControl(c)) return Invalid("mail subject contains a line break or control character");
  }
  if (mail.text_body.empty()) return Invalid("mail text body is empty");
  for (const std::string* body : {&mail.text_body, &mail.html_body}) {
    if (body->size() > kMaxBodyBytes) return Invalid("mail body is too long");
    if (!IsUtf8(*body)) return Invalid("mail body is not UTF-8");
    if (body->find('\0') != std::string::npos) return Invalid("mail body contains NUL");
  }
  return {};
}

core::Result<void> ValidateFrom(std::string_view from) {
  const auto bad = [](std::string message) {
    return core::InvalidArgument("invalid_mail_from", std::move(message));
  };
  for (unsigned char c : from) {
    if (IsControl(c)) return bad("mail sender contains a line break or control character");
  }
  if (!IsUtf8(from)) return bad("mail sender is not UTF-8");
  const Mailbox box = ParseMailbox(from);
  if (!IsValidAddress(box.address)) {
    return bad("mail sender must be an address or 'Name <address>'");
  }
  if (box.name.size() > 200) return bad("mail sender's display name is too long");
  return {};
}

std::string FromAddress(std::string_view from) { return ParseMailbox(from).address; }

std::string FromDomain(std::string_view from) {
  const std::string address = FromAddress(from);
  const size_t at = address.rfind('@');
  if (at == std::string::npos || at + 1 == address.size()) return "localhost";
  return address.substr(at + 1);
}

std::string FormatRfc5322Date(int64_t unix_seconds) {
  using namespace std::chrono;
  static constexpr std::array<std::string_view, 7> kDays = {"Sun", "Mon", "Tue", "Wed",
                                                            "Thu", "Fri", "Sat"};
  static constexpr std::array<std::string_view, 12> kMonths = {
      "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
  const sys_seconds t{seconds(unix_seconds)};
  const sys_days day = floor<days>(t);
  const year_month_day ymd{day};
  const hh_mm_ss<seconds> hms{t - day};
  return fmt::format("{}, {:02} {} {:04} {:02}:{:02}:{:02} +0000", kDays[weekday(day).c_encoding()],
                     static_cast<unsigned>(ymd.day()),
                     kMonths[static_cast<unsigned>(ymd.month()) - 1], static_cast<int>(ymd.year()),
                     hms.hours().count(), hms.minutes().count(), hms.seconds().count());
}

std::string RenderMessage(const Mail& mail, std::string_view from,
                          std::string_view message_id_domain, int64_t date_unix) {
  static const bool crypto_ready = (core::InitCrypto(), true);
  (void)crypto_ready;
  core::SodiumRng rng;
  const std::string id =
      mail.message_id.empty()
          ? fmt::format("{}.{}@{}", date_unix, core::NewId(rng, "gpuwerk"),
                        SanitizeDomain(message_id_domain))
          : fmt::format("{}@{}", mail.message_id, SanitizeDomain(message_id_domain));
  return RenderMessageWithId(mail, from, date_unix, id);
}

std::string RenderMessageWithId(const Mail& mail, std::string_view from, int64_t date_unix,
                                std::string_view message_id) {
  std::string out;
  out += Header("Date", FormatRfc5322Date(date_unix));
  out += Header("From", FromValue(from));
  out += Header("To", Sanitize(mail.to));
  out += Header("Subject", UnstructuredValue(mail.subject));
  out += Header("Message-ID", fmt::format("<{}>", Sanitize(message_id)));
  out += Header("Auto-Submitted", "auto-generated");
  out += Header("MIME-Version", "1.0");
  if (mail.html_body.empty()) {
    out += TextPart("plain", mail.text_body);
    return out;
  }
  out += Header("Content-Type", fmt::format("multipart/alternative; boundary=\"{}\"", kBoundary));
  out += "\r\n";
  out += fmt::format("--{}\r\n", kBoundary);
  out += TextPart("plain", mail.text_body);
  out += fmt::format("--{}\r\n", kBoundary);
  out += TextPart("html", mail.html_body);
  out += fmt::format("--{}--\r\n", kBoundary);
  return out;
}

}  // namespace gpuwerk::mail

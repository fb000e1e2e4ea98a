#include "keys/public_key.h"

#include <array>
#include <optional>
#include <vector>

#include "core/encoding.h"
#include "core/strings.h"
#include "keys/internal/key_errors.h"
#include "keys/internal/pem_key.h"
#include "keys/internal/ssh_wire.h"

namespace gpuwerk::keys {
namespace {

using internal::DsaRefused;
using internal::InvalidKey;
using internal::UnknownType;
using internal::UnsupportedType;
using internal::WeakKey;

enum class KeyKind { kEd25519, kEcdsa, kRsa, kSkEd25519, kSkEcdsa };

/// One accepted key type and what its blob must hold.
struct KeyTypeInfo {
  std::string_view name;   ///< the type string, in the line and inside the blob
  std::string_view label;  ///< what `ssh-keygen -l` prints in parentheses
  KeyKind kind;
  std::string_view curve;  ///< ECDSA: the curve identifier inside the blob (RFC 5656 §6.1)
  size_t key_bytes;        ///< Ed25519: public key length; ECDSA: uncompressed point length
  int bits;                ///< fixed size in bits (0 for RSA, computed from the modulus)
};

constexpr std::array<KeyTypeInfo, 7> kKeyTypes = {{
    {"ssh-ed25519", "ED25519", KeyKind::kEd25519, "", 32, 256},
    {"ecdsa-sha2-nistp256", "ECDSA", KeyKind::kEcdsa, "nistp256", 65, 256},
    {"ecdsa-sha2-nistp384", "ECDSA", KeyKind::kEcdsa, "nistp384", 97, 384},
    {"ecdsa-sha2-nistp521", "ECDSA", KeyKind::kEcdsa, "nistp521", 133, 521},
    {"ssh-rsa", "RSA", KeyKind::kRsa, "", 0, 0},
    {"sk-ssh-ed25519@openssh.com", "ED25519-SK", KeyKind::kSkEd25519, "", 32, 256},
    {"sk-ecdsa-sha2-nistp256@openssh.com", "ECDSA-SK", KeyKind::kSkEcdsa, "nistp256", 65, 256},
}};

/// Key type names that start a key in a line, accepted or not (used to spot a second key).
constexpr std::array<std::string_view, 8> kKeyStartNames = {
    "ssh-ed25519",
    "ecdsa-sha2-nistp256",
    "ecdsa-sha2-nistp384",
    "ecdsa-sha2-nistp521",
    "ssh-rsa",
    "sk-ssh-ed25519@openssh.com",
    "ssh-dss",
    "sk-ecdsa-sha2-nistp256@openssh.com",
};

constexpr std::string_view kCertSuffix = "-cert-v01@openssh.com";
constexpr std::string_view kRfc4716Begin = "---- BEGIN SSH2 PUBLIC KEY ----";
constexpr std::string_view kRfc4716End = "---- END SSH2 PUBLIC KEY ----";
constexpr std::string_view kPemBegin = "-----BEGIN ";
constexpr std::string_view kPemEnd = "-----END ";
constexpr std::string_view kPemDashes = "-----";

/// RSA limits: OpenSSH's minimum we raise to 2048; OpenSSL's largest modulus; public
/// exponents above 64 bits are refused by OpenSSL for large moduli, so we refuse them too.
constexpr int kMinRsaBits = 2048;
constexpr int kMaxRsaBits = 16384;
constexpr size_t kMaxRsaExponentBytes = 8;

/// Fragments that only occur in private keys. Matched anywhere in the input, case-sensitively.
/// "b3BlbnNzaC1rZXktdjE" is base64 of "openssh-key-v1", the start of an OpenSSH private key body
/// pasted without its armour lines.
constexpr std::array<std::string_view, 7> kPrivateKeyMarkers = {
    "PRIVATE KEY-----",        // PEM: OPENSSH, RSA, EC, DSA, PKCS#8 and ENCRYPTED
    "PRIVATE KEY ----",        // ssh.com: ---- BEGIN SSH2 ENCRYPTED PRIVATE KEY ----
    "PRIVATE KEY BLOCK-----",  // OpenPGP
    "PuTTY-User-Key-File-",    // PuTTY .ppk, versions 1-3
    "Private-Lines:",          // the secret part of a .ppk
    "Private-MAC:",            // ditto
    "b3BlbnNzaC1rZXktdjE",     // openssh-key-v1 body
};

/// The blanks around and between a key line's fields (line ends are split off before).
constexpr std::string_view kKeyBlanks = " \t\v\f";

bool IsSpace(char c) { return kKeyBlanks.find(c) != std::string_view::npos; }

/// Splits off the first field of `s` (fields are separated by spaces or tabs); returns it and
/// the rest with leading whitespace removed.
std::pair<std::string_view, std::string_view> NextField(std::string_view s) {
  s = core::Trim(s, kKeyBlanks);
  size_t end = 0;
  while (end < s.size() && !IsSpace(s[end])) ++end;
  return {s.substr(0, end), core::Trim(s.substr(end), kKeyBlanks)};
}

bool EqualsIgnoreCase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    const auto lower = [](char c) {
      return (c >= 'A' && c <= 'Z') ? static_cast<char>(c + 32) : c;
    };
    if (lower(a[i]) != lower(b[i])) return false;
  }
  return true;
}

const KeyTypeInfo* FindKeyType(std::string_view name) {
  for (const auto& info : kKeyTypes) {
    if (info.name == name) return &info;
  }
  return nullptr;
}

std::unexpected<core::Error> MultipleKeys() {
  return core::InvalidArgument(
      "multiple_keys",
      "The text holds more than one key; paste one key at a time (one line from a .pub file).");
}

std::unexpected<core::Error> Damaged() {
  return InvalidKey(
      "The key data is damaged or incomplete (it may have been cut off when copying); copy the "
      "whole key again from your .pub file.");
}

std::unexpected<core::Error> BadBase64() {
  return InvalidKey(
      "The key data is not valid base64, or it was cut off when copying; copy the whole key "
      "again from your .pub file.");
}

std::unexpected<core::Error> TypeMismatch() {
  return core::InvalidArgument(
      "key_type_mismatch",
      "The key data does not match the key type at the start of the line; the line was probably "
      "edited. Copy it again from your .pub file.");
}

std::unexpected<core::Error> CertificateRefused() {
  return UnsupportedType(
      "SSH certificates are not accepted; paste the plain public key (the .pub file without "
      "-cert in its name).");
}

/// Base64 as found in key lines: RFC 4648 §4 alphabet, padding optional.
std::optional<std::string> DecodeBase64(std::string_view text) {
  if (text.empty()) return std::nullopt;
  switch (text.size() % 4) {
    case 0:
      return core::Base64Decode(text);
    case 2:
      return core::Base64Decode(std::string(text) + "==");
    case 3:
      return core::Base64Decode(std::string(text) + "=");
    default:
      return std::nullopt;
  }
}

/// Makes a comment safe to write into one authorized_keys line and into JSON: what
/// core::IsUnsafeTextCodePoint refuses (controls, bidi and line separators) becomes a space, bytes
/// that are not valid UTF-8 become '?', ends trimmed.
std::string CleanComment(std::string_view in) {
  std::string out;
  out.reserve(in.size());
  size_t i = 0;
  while (i < in.size()) {
    const auto c = static_cast<unsigned char>(in[i]);
    if (c < 0x20 || c == 0x7f) {
      out.push_back(' ');
      ++i;
      continue;
    }
    if (c < 0x80) {
      out.push_back(static_cast<char>(c));
      ++i;
      continue;
    }
    // Multi-byte UTF-8 (RFC 3629): check the lead byte, the length and the continuation bytes,
    // and refuse overlong forms, surrogates and code points above U+10FFFF.
    size_t len = 0;
    uint32_t cp = 0;
    if (c >= 0xc2 && c <= 0xdf) {
      len = 2;
      cp = c & 0x1f;
    } else if (c >= 0xe0 && c <= 0xef) {
      len = 3;
      cp = c & 0x0f;
    } else if (c >= 0xf0 && c <= 0xf4) {
      len = 4;
      cp = c & 0x07;
    }
    bool ok = len != 0 && i + len <= in.size();
    for (size_t k = 1; ok && k < len; ++k) {
      const auto cc = static_cast<unsigned char>(in[i + k]);
      ok = (cc & 0xc0) == 0x80;
      cp = (cp << 6) | (cc & 0x3f);
    }
    if (ok) {
      ok = !(len == 3 && cp < 0x800) && !(len == 4 && cp < 0x10000) &&
           !(cp >= 0xd800 && cp <= 0xdfff) && cp <= 0x10ffff;
    }
    if (ok && core::IsUnsafeTextCodePoint(cp)) {
      out.push_back(' ');
      i += len;
    } else if (ok) {
      out.append(in.substr(i, len));
      i += len;
    } else {
      out.push_back('?');
      ++i;
    }
  }
  return std::string(core::Trim(out, kKeyBlanks));
}

/// Decodes and checks a key blob (RFC 4253 §6.6, RFC 5656 §3.1, RFC 8709 §4, OpenSSH
/// PROTOCOL.u2f). `declared` is the type named in front of the base64, or empty when the format
/// has none (RFC 4716, PEM).
core::Result<PublicKey> ParseBlob(std::string_view blob, std::string_view declared) {
  internal::WireReader reader(blob);
  const auto type = reader.ReadString();
  if (!type || type->empty()) return Damaged();
  if (!declared.empty() && *type != declared) return TypeMismatch();
  const KeyTypeInfo* info = FindKeyType(*type);
  if (info == nullptr) {
    if (*type == "ssh-dss") return DsaRefused();
    if (type->ends_with(kCertSuffix)) return CertificateRefused();
    return UnknownType();
  }

  PublicKey key;
  key.type = std::string(info->name);
  key.bits = info->bits;
  switch (info->kind) {
    case KeyKind::kEd25519:
    case KeyKind::kSkEd25519: {
      const auto pk = reader.ReadString();
      if (!pk || pk->size() != info->key_bytes) return Damaged();
      break;
    }
    case KeyKind::kEcdsa:
    case KeyKind::kSkEcdsa: {
      const auto curve = reader.ReadString();
      if (!curve) return Damaged();
      if (*curve != info->curve) return TypeMismatch();
      const auto point = reader.ReadString();
      // An uncompressed SEC1 point: 0x04 || X || Y.
      if (!point || point->size() != info->key_bytes || (*point)[0] != '\x04') return Damaged();
      // sshd refuses a point off the curve; refuse it here rather than at the first login.
      if (!internal::IsPointOnCurve(*curve, *point)) return Damaged();
      break;
    }
    case KeyKind::kRsa: {
      const auto e_mpint = reader.ReadString();
      const auto n_mpint = reader.ReadString();
      if (!e_mpint || !n_mpint) return Damaged();
      const auto e = internal::PositiveMpintMagnitude(*e_mpint);
      const auto n = internal::PositiveMpintMagnitude(*n_mpint);
      if (!e || !n) return Damaged();
      const bool e_odd = (static_cast<unsigned char>(e->back()) & 1) != 0;
      const bool n_odd = (static_cast<unsigned char>(n->back()) & 1) != 0;
      if (e->size() > kMaxRsaExponentBytes || internal::BitLength(*e) < 2 || !e_odd || !n_odd) {
        return Damaged();
      }
      key.bits = internal::BitLength(*n);
      break;
    }
  }
  if (info->kind == KeyKind::kSkEd25519 || info->kind == KeyKind::kSkEcdsa) {
    if (!reader.ReadString()) return Damaged();  // the FIDO application, usually "ssh:"
  }
  if (!reader.AtEnd()) return Damaged();
  if (info->kind == KeyKind::kRsa) {
    if (key.bits > kMaxRsaBits) {
      return InvalidKey("RSA keys larger than 16384 bits are not accepted.");
    }
    if (key.bits < kMinRsaBits) return WeakKey();
  }
  key.blob = std::string(blob);
  return key;
}

/// Whether, at or after `from`, `line` holds a key type name followed by whitespace and base64
/// that starts like a key blob ("AAAA": the type length's high bytes are zero). Type names all
/// contain '-', which base64 cannot, so a single key's own data never matches.
bool HasKeyStartAfter(std::string_view line, size_t from) {
  for (std::string_view name : kKeyStartNames) {
    for (size_t pos = line.find(name, from); pos != std::string_view::npos;
         pos = line.find(name, pos + 1)) {
      std::string_view after = line.substr(pos + name.size());
      if (after.starts_with(kCertSuffix)) after.remove_prefix(kCertSuffix.size());
      if (after.empty() || !IsSpace(after.front())) continue;
      if (core::Trim(after, kKeyBlanks).starts_with("AAAA")) return true;
    }
  }
  return false;
}

/// Whether a whole line looks like the start of some key or key block.
bool LooksLikeKey(std::string_view line) {
  if (line.starts_with("---- BEGIN") || line.starts_with(kPemBegin)) return true;
  const auto [first, rest] = NextField(line);
  for (std::string_view name : kKeyStartNames) {
    if (first == name) return true;
  }
  return first.ends_with(kCertSuffix) || HasKeyStartAfter(line, 0);
}

/// Sets the cleaned comment, refusing one that would read as a second key once written into the
/// line (Line() must parse back to the same key).
core::Result<void> SetComment(PublicKey& key, std::string_view raw) {
  std::string comment = CleanComment(raw);
  if (HasKeyStartAfter(comment, 0)) return MultipleKeys();
  key.comment = std::move(comment);
  return {};
}

/// A plausible SSH algorithm name such as "ssh-foo" or "foo-bar@example.com" (RFC 4251 §6).
bool LooksLikeAlgorithmName(std::string_view s) {
  if (s.size() < 3 || s.size() > 64 || s.find('-') == std::string_view::npos) return false;
  for (char c : s) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '@' ||
                    c == '.' || c == '_' || c == '+';
    if (!ok) return false;
  }
  return true;
}

/// Refuses lines after a key block or line: a second key, or stray text.
std::unexpected<core::Error> ExtraLines(const std::vector<std::string_view>& extra) {
  for (std::string_view line : extra) {
    if (LooksLikeKey(line)) return MultipleKeys();
  }
  return InvalidKey("There is extra text around the key; paste only the key itself.");
}

/// "type base64 [comment]" (the OpenSSH public key file format, sshd(8) AUTHORIZED_KEYS without
/// options).
core::Result<PublicKey> ParseOpenSshLine(std::string_view line) {
  const auto [type, rest] = NextField(line);
  const auto [data, comment] = NextField(rest);
  const KeyTypeInfo* info = FindKeyType(type);
  const bool dsa = type == "ssh-dss";
  const bool cert = type.ends_with(kCertSuffix);
  // C04: a second key glued onto this one (a file without a final newline, then appended to).
  if ((info != nullptr || dsa || cert) && HasKeyStartAfter(line, type.size())) {
    return MultipleKeys();
  }
  if (info == nullptr) {
    if (dsa) return DsaRefused();
    if (cert) return CertificateRefused();
    if (HasKeyStartAfter(line, 0)) {
      return InvalidKey(
          "Remove the text in front of the key type (such as authorized_keys options like from= "
          "or command=); the line must start with the key type, e.g. ssh-ed25519.");
    }
    if (LooksLikeAlgorithmName(type) && !data.empty()) return UnknownType();
    if (type.starts_with("AAAA")) {
      return InvalidKey(
          "The key type is missing: a public key line starts with its type, e.g. "
          "\"ssh-ed25519 AAAA...\". Copy the whole line from your .pub file.");
    }
    return InvalidKey(
        "This does not look like an SSH public key. Paste the contents of your .pub file, e.g. "
        "~/.ssh/id_ed25519.pub; it starts with ssh-ed25519, ecdsa-sha2-... or ssh-rsa.");
  }
  if (data.empty()) {
    return InvalidKey(
        "The key data after the key type is missing; copy the whole line from your .pub file.");
  }
  const auto blob = DecodeBase64(data);
  if (!blob) return BadBase64();
  GPUWERK_ASSIGN_OR_RETURN(PublicKey key, ParseBlob(*blob, info->name));
  GPUWERK_TRY(SetComment(key, comment));
  return key;
}

core::Result<PublicKey> ParseOpenSsh(const std::vector<std::string_view>& lines) {
  std::vector<std::string_view> key_lines;
  for (std::string_view line : lines) {
    if (!line.starts_with('#')) key_lines.push_back(line);
  }
  if (key_lines.empty()) {
    return InvalidKey(
        "No key was found, only comment lines; paste the contents of your .pub file, e.g. "
        "~/.ssh/id_ed25519.pub.");
  }
  if (key_lines.size() > 1) {
    int keys = 0;
    for (std::string_view line : key_lines) {
      if (LooksLikeKey(line)) ++keys;
    }
    if (keys > 1) return MultipleKeys();
    return InvalidKey(
        "The key must be on one line, with nothing else on other lines; it may have been wrapped "
        "when copying. Paste the single line from your .pub file.");
  }
  return ParseOpenSshLine(key_lines.front());
}

/// RFC 4716 §3: BEGIN line, headers ("Tag: value", a trailing "\" continues on the next line),
/// base64 body folded over lines, END line. Only the Comment header is kept.
core::Result<PublicKey> ParseRfc4716(const std::vector<std::string_view>& lines) {
  if (lines.front() != kRfc4716Begin) {
    return InvalidKey("The \"---- BEGIN SSH2 PUBLIC KEY ----\" line is malformed.");
  }
  size_t i = 1;
  std::string comment;
  while (i < lines.size() && lines[i].find(':') != std::string_view::npos &&
         !lines[i].starts_with("----")) {
    std::string header(lines[i++]);
    while (header.ends_with('\\')) {
      header.pop_back();
      if (i >= lines.size()) break;
      header.append(lines[i++]);
    }
    const size_t colon = header.find(':');
    std::string_view tag = core::Trim(std::string_view(header).substr(0, colon), kKeyBlanks);
    std::string_view value = core::Trim(std::string_view(header).substr(colon + 1), kKeyBlanks);
    if (EqualsIgnoreCase(tag, "Comment")) {  // header tags are case-insensitive (§3.3)
      if (value.size() >= 2 && value.front() == '"' && value.back() == '"') {
        value = value.substr(1, value.size() - 2);
      }
      comment = std::string(value);
    }
  }
  std::string body;
  for (; i < lines.size() && !lines[i].starts_with("----"); ++i) {
    for (char c : lines[i]) {
      if (!IsSpace(c)) body.push_back(c);
    }
  }
  if (i >= lines.size() || lines[i] != kRfc4716End) {
    return InvalidKey(
        "The SSH2 public key block does not end with \"---- END SSH2 PUBLIC KEY ----\"; copy the "
        "whole block.");
  }
  if (i + 1 < lines.size()) {
    return ExtraLines(std::vector<std::string_view>(lines.begin() + i + 1, lines.end()));
  }
  const auto blob = DecodeBase64(body);
  if (!blob) return BadBase64();
  GPUWERK_ASSIGN_OR_RETURN(PublicKey key, ParseBlob(*blob, ""));
  GPUWERK_TRY(SetComment(key, comment));
  return key;
}

/// RFC 7468 textual encoding: "-----BEGIN label-----", base64 of DER, "-----END label-----".
core::Result<PublicKey> ParsePem(const std::vector<std::string_view>& lines) {
  std::string_view begin = lines.front();
  if (!begin.ends_with(kPemDashes) || begin.size() < kPemBegin.size() + kPemDashes.size()) {
    return InvalidKey("The \"-----BEGIN\" line is malformed.");
  }
  const std::string_view label =
      begin.substr(kPemBegin.size(), begin.size() - kPemBegin.size() - kPemDashes.size());
  if (label == "CERTIFICATE" || label == "X509 CERTIFICATE" || label == "TRUSTED CERTIFICATE") {
    return InvalidKey(
        "This is an X.509 certificate, not an SSH public key; paste the contents of your .pub "
        "file instead.");
  }
  if (label == "DSA PUBLIC KEY") return DsaRefused();
  if (label != "PUBLIC KEY" && label != "RSA PUBLIC KEY") {
    return InvalidKey(
        "This block is not a public key; paste the contents of your .pub file, e.g. "
        "~/.ssh/id_ed25519.pub.");
  }
  std::string body;
  size_t i = 1;
  for (; i < lines.size() && !lines[i].starts_with(kPemEnd); ++i) {
    if (lines[i].starts_with(kPemBegin)) return MultipleKeys();
    for (char c : lines[i]) {
      if (!IsSpace(c)) body.push_back(c);
    }
  }
  if (i >= lines.size() ||
      lines[i].substr(kPemEnd.size()) != std::string(label) + std::string(kPemDashes)) {
    return InvalidKey(
        "The PEM block does not end with its matching \"-----END\" line; copy the whole block.");
  }
  if (i + 1 < lines.size()) {
    return ExtraLines(std::vector<std::string_view>(lines.begin() + i + 1, lines.end()));
  }
  const auto der = core::Base64Decode(body);
  if (!der || der->empty()) return BadBase64();
  GPUWERK_ASSIGN_OR_RETURN(std::string blob, internal::PemDerToSshBlob(label, *der));
  return ParseBlob(blob, "");
}

}  // namespace

std::string PublicKey::Line() const {
  std::string line = type;
  line.push_back(' ');
  line.append(core::Base64Encode(blob));
  std::string clean = CleanComment(comment);
  if (!clean.empty()) {
    line.push_back(' ');
    line.append(clean);
  }
  line.push_back('\n');
  return line;
}

std::string PublicKey::Fingerprint() const {
  std::string b64 = core::Base64Encode(core::Sha256(blob));
  while (!b64.empty() && b64.back() == '=') b64.pop_back();
  return "SHA256:" + b64;
}

std::string PublicKey::TypeLabel() const {
  const KeyTypeInfo* info = FindKeyType(type);
  return info != nullptr ? std::string(info->label) : std::string("UNKNOWN");
}

std::optional<core::Error> FindPrivateKey(std::string_view text) {
  auto contains_marker = [](std::string_view s) {
    for (std::string_view marker : kPrivateKeyMarkers) {
      if (s.find(marker) != std::string_view::npos) return true;
    }
    return false;
  };
  bool found = contains_marker(text);
  if (!found && text.find('\0') != std::string_view::npos) {
    std::string narrowed;
    narrowed.reserve(text.size());
    for (char c : text) {
      if (c != '\0') narrowed.push_back(c);
    }
    found = contains_marker(narrowed);
  }
  if (!found) return std::nullopt;
  return core::Error(
      core::ErrorCode::kInvalidArgument, "private_key_pasted",
      "This is a PRIVATE key: treat it as exposed and replace it (generate a new key pair), and "
      "paste the contents of the matching .pub file instead, e.g. ~/.ssh/id_ed25519.pub.");
}

core::Result<PublicKey> ParsePublicKey(std::string_view text) {
  // C03 first: a private key is refused before any other check could echo or log a part of it.
  if (auto private_key = FindPrivateKey(text)) return core::Fail(std::move(*private_key));
  if (text.size() > kMaxPublicKeyInputBytes) {
    return InvalidKey(
        "The text is too long for a public key (over 16 KiB); paste only the one key line from "
        "your .pub file.");
  }
  // C01: UTF-16 (a byte-order mark, or the NUL bytes of its ASCII range) is refused with a hint.
  if (text.starts_with("\xFF\xFE") || text.starts_with("\xFE\xFF") ||
      text.find('\0') != std::string_view::npos) {
    return core::InvalidArgument(
        "invalid_encoding",
        "The key is saved as UTF-16 (or holds NUL bytes); save the file as UTF-8 or ASCII and "
        "paste it again.");
  }
  if (text.starts_with("\xEF\xBB\xBF")) text.remove_prefix(3);  // the UTF-8 byte-order mark

  // Lines end at LF, CRLF or a lone CR; blank lines are dropped and each line is trimmed.
  std::vector<std::string_view> lines;
  size_t start = 0;
  for (size_t i = 0; i <= text.size(); ++i) {
    if (i == text.size() || text[i] == '\n' || text[i] == '\r') {
      std::string_view line = core::Trim(text.substr(start, i - start), kKeyBlanks);
      if (!line.empty()) lines.push_back(line);
      start = i + 1;
    }
  }
  if (lines.empty()) {
    return InvalidKey(
        "No key was given; paste the contents of your .pub file, e.g. ~/.ssh/id_ed25519.pub.");
  }
  // '#' comment lines in front of a key or block are skipped (a pasted authorized_keys excerpt).
  size_t first = 0;
  while (first < lines.size() && lines[first].starts_with('#')) ++first;
  if (first > 0 && first < lines.size()) lines.erase(lines.begin(), lines.begin() + first);
  if (lines.front().starts_with("---- BEGIN")) return ParseRfc4716(lines);
  if (lines.front().starts_with(kPemBegin)) return ParsePem(lines);
  return ParseOpenSsh(lines);
}

}  // namespace gpuwerk::keys

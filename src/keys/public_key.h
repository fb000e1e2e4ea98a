#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include "core/error.h"

namespace gpuwerk::keys {

/// An SSH public key that gpuwerk accepts, as parsed by ParsePublicKey. A value type; the
/// fields are those of the normalised OpenSSH line "type base64(blob) comment".
struct PublicKey {
  /// The key type name, one of: "ssh-ed25519" (RFC 8709), "ecdsa-sha2-nistp256",
  /// "ecdsa-sha2-nistp384", "ecdsa-sha2-nistp521" (RFC 5656), "ssh-rsa" (RFC 4253 §6.6),
  /// "sk-ssh-ed25519@openssh.com", "sk-ecdsa-sha2-nistp256@openssh.com" (OpenSSH PROTOCOL.u2f).
  std::string type;
  /// The raw key blob in SSH wire format (RFC 4251 §5), as base64-encoded in the line.
  std::string blob;
  /// The free-text comment (often user@host); may be empty. Single line, valid UTF-8, no control
  /// characters, no surrounding whitespace.
  std::string comment;
  /// Key size in bits as `ssh-keygen -l` shows it: 256 for ed25519 (and the -sk types),
  /// 256/384/521 for ECDSA, the modulus length for RSA.
  int bits = 0;

  /// The normalised authorized_keys line: "type base64 comment\n", or "type base64\n" when the
  /// comment is empty. Always ends with exactly one "\n" and contains no "\r" (case C04).
  std::string Line() const;

  /// The SHA-256 fingerprint exactly as `ssh-keygen -l` prints it: "SHA256:" followed by the
  /// unpadded base64 (RFC 4648 §4) of SHA-256 over the blob.
  std::string Fingerprint() const;

  /// The type label `ssh-keygen -l` prints in parentheses: "ED25519", "ECDSA", "RSA",
  /// "ED25519-SK" or "ECDSA-SK" ("UNKNOWN" for a type set by hand that is none of those).
  std::string TypeLabel() const;

  bool operator==(const PublicKey&) const = default;
};

/// The largest input ParsePublicKey reads, in bytes (an RSA 16384-bit key line is about 2.8 KiB).
inline constexpr size_t kMaxPublicKeyInputBytes = 16 * 1024;

/// Parses one SSH public key pasted by a person and normalises it.
///
/// Accepted formats:
/// - an OpenSSH public-key line "type base64 [comment]" (the .pub file / authorized_keys format
///   without options), for the types listed on PublicKey::type;
/// - an RFC 4716 "---- BEGIN SSH2 PUBLIC KEY ----" block (as PuTTYgen and `ssh-keygen -e` write
///   it): headers with "\" continuation lines, folded base64; the Comment header (quotes
///   stripped) becomes the comment;
/// - a PEM "-----BEGIN PUBLIC KEY-----" block (X.509 SubjectPublicKeyInfo, RFC 5280) holding an
///   RSA, EC P-256/P-384/P-521 or Ed25519 key, or "-----BEGIN RSA PUBLIC KEY-----" (PKCS#1
///   RSAPublicKey, RFC 8017), converted as `ssh-keygen -i -m PKCS8|PEM` does (empty comment).
/// Tolerated: CRLF or lone CR line ends, a UTF-8 byte-order mark, surrounding blank lines and
/// whitespace, tabs between fields, '#' comment lines around an OpenSSH line.
///
/// The blob is decoded and checked completely: the type inside it must equal the declared one,
/// key and point lengths, curve names, RSA mpints, and no trailing bytes.
///
/// Errors, all core::ErrorCode::kInvalidArgument, by api_code:
/// - "private_key_pasted": the text holds a private key (OpenSSH, PEM/PKCS#1/PKCS#8, encrypted
///   or not, PuTTY .ppk); checked before anything else;
/// - "invalid_encoding": UTF-16 or other text with NUL bytes;
/// - "multiple_keys": more than one key, on several lines or glued on one line (case C04);
/// - "unsupported_key_type": DSA, certificates, or any other type;
/// - "key_type_mismatch": the blob's type differs from the declared type;
/// - "weak_key": RSA with fewer than 2048 bits;
/// - "invalid_public_key": anything else (empty, over 16 KiB, bad base64, truncated blob, ...).
/// Messages are for people and never contain any part of `text`.
///
/// Thread-safe. Runs in time linear in the input, which is refused above kMaxPublicKeyInputBytes
/// (after the private-key check, which scans all of it).
core::Result<PublicKey> ParsePublicKey(std::string_view text);

/// The "private_key_pasted" error when `text` holds any private key (OpenSSH, PEM PKCS#1/PKCS#8,
/// EC, DSA, encrypted, ssh.com, OpenPGP armour, PuTTY .ppk, an unarmoured openssh-key-v1 body),
/// also in UTF-16; nullopt otherwise. ParsePublicKey runs it first; clients run it before a key
/// leaves the machine (C03). The error never contains any of `text`.
std::optional<core::Error> FindPrivateKey(std::string_view text);

}  // namespace gpuwerk::keys

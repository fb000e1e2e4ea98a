#include "keys/key_pair.h"

#include <openssl/evp.h>

#include <array>
#include <cstdint>
#include <memory>

#include "core/encoding.h"
#include "keys/internal/ssh_wire.h"

namespace gpuwerk::keys {
namespace {

void AppendUint32(std::string& out, uint32_t v) {
  for (int shift = 24; shift >= 0; shift -= 8)
    out.push_back(static_cast<char>((v >> shift) & 0xff));
}

}  // namespace

core::Result<KeyPair> MakeEd25519KeyPair(core::Rng& rng, std::string_view comment) {
  if (comment.empty() || comment.size() > 64) {
    return core::InvalidArgument("invalid_key_comment", "a key comment is 1 to 64 characters");
  }
  for (const char c : comment) {
    if (c <= ' ' || c > '~') {
      return core::InvalidArgument("invalid_key_comment",
                                   "a key comment is printable ASCII without spaces");
    }
  }
  std::array<unsigned char, 32> seed{};
  rng.Fill(seed.data(), seed.size());
  std::unique_ptr<EVP_PKEY, decltype(&EVP_PKEY_free)> key(
      EVP_PKEY_new_raw_private_key(EVP_PKEY_ED25519, nullptr, seed.data(), seed.size()),
      &EVP_PKEY_free);
  std::array<unsigned char, 32> pub{};
  size_t pub_len = pub.size();
  if (!key || EVP_PKEY_get_raw_public_key(key.get(), pub.data(), &pub_len) != 1 ||
      pub_len != pub.size()) {
    return core::Fail(core::ErrorCode::kInternal, "key_generation_failed",
                      "OpenSSL could not make an Ed25519 key");
  }
  const std::string_view pub_bytes(reinterpret_cast<const char*>(pub.data()), pub.size());
  const std::string_view seed_bytes(reinterpret_cast<const char*>(seed.data()), seed.size());
  std::string blob;  // RFC 8709 §4: string "ssh-ed25519", string key
  internal::AppendString(blob, "ssh-ed25519");
  internal::AppendString(blob, pub_bytes);

  // OpenSSH PROTOCOL.key: the private section, padded to the cipher's block size (8 for "none").
  uint32_t check = 0;
  rng.Fill(&check, sizeof check);
  std::string priv;
  AppendUint32(priv, check);
  AppendUint32(priv, check);
  internal::AppendString(priv, "ssh-ed25519");
  internal::AppendString(priv, pub_bytes);
  internal::AppendString(priv, std::string(seed_bytes) + std::string(pub_bytes));
  internal::AppendString(priv, comment);
  for (char pad = 1; priv.size() % 8 != 0; ++pad) priv.push_back(pad);
  seed.fill(0);

  std::string body = std::string("openssh-key-v1") + '\0';
  internal::AppendString(body, "none");  // cipher
  internal::AppendString(body, "none");  // KDF
  internal::AppendString(body, "");      // KDF options
  AppendUint32(body, 1);                 // one key
  internal::AppendString(body, blob);
  internal::AppendString(body, priv);

  const std::string b64 = core::Base64Encode(body);
  KeyPair out;
  out.private_openssh = "-----BEGIN OPENSSH PRIVATE KEY-----\n";
  for (size_t i = 0; i < b64.size(); i += 70) out.private_openssh += b64.substr(i, 70) + "\n";
  out.private_openssh += "-----END OPENSSH PRIVATE KEY-----\n";
  out.public_line = "ssh-ed25519 " + core::Base64Encode(blob) + " " + std::string(comment);
  return out;
}

}  // namespace gpuwerk::keys

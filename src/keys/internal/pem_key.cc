#include "keys/internal/pem_key.h"

#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/ec.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/x509.h>

#include <array>
#include <memory>

#include "keys/internal/key_errors.h"
#include "keys/internal/ssh_wire.h"

namespace gpuwerk::keys::internal {
namespace {

struct PkeyFree {
  void operator()(EVP_PKEY* p) const { EVP_PKEY_free(p); }
};
struct BnFree {
  void operator()(BIGNUM* p) const { BN_free(p); }
};
using PkeyPtr = std::unique_ptr<EVP_PKEY, PkeyFree>;
using BnPtr = std::unique_ptr<BIGNUM, BnFree>;

/// Leaves the thread's OpenSSL error queue empty whatever path returns.
struct ErrorQueueGuard {
  ErrorQueueGuard() { ERR_clear_error(); }
  ~ErrorQueueGuard() { ERR_clear_error(); }
  ErrorQueueGuard(const ErrorQueueGuard&) = delete;
  ErrorQueueGuard& operator=(const ErrorQueueGuard&) = delete;
};

std::unexpected<core::Error> Unreadable() {
  return InvalidKey(
      "The PEM public key could not be decoded; paste the OpenSSH line from your .pub file "
      "instead (ssh-keygen -y -f <private key> prints it).");
}

std::optional<std::string> BnParam(const EVP_PKEY* pkey, const char* name) {
  BIGNUM* raw = nullptr;
  if (EVP_PKEY_get_bn_param(pkey, name, &raw) != 1 || raw == nullptr) return std::nullopt;
  BnPtr bn(raw);
  if (BN_is_negative(bn.get())) return std::nullopt;
  std::string bytes(static_cast<size_t>(BN_num_bytes(bn.get())), '\0');
  BN_bn2bin(bn.get(), reinterpret_cast<unsigned char*>(bytes.data()));
  return bytes;
}

core::Result<std::string> RsaBlob(const EVP_PKEY* pkey) {
  auto n = BnParam(pkey, OSSL_PKEY_PARAM_RSA_N);
  auto e = BnParam(pkey, OSSL_PKEY_PARAM_RSA_E);
  if (!n || !e) return Unreadable();
  std::string blob;
  AppendString(blob, "ssh-rsa");
  AppendMpint(blob, *e);  // RFC 4253 §6.6: e before n
  AppendMpint(blob, *n);
  return blob;
}

core::Result<std::string> EcBlob(EVP_PKEY* pkey) {
  std::array<char, 64> group{};
  size_t group_len = 0;
  if (EVP_PKEY_get_utf8_string_param(pkey, OSSL_PKEY_PARAM_GROUP_NAME, group.data(), group.size(),
                                     &group_len) != 1) {
    return UnknownType();  // explicit curve parameters, or no named group
  }
  const std::string_view name(group.data(), group_len);
  std::string_view curve;
  if (name == "prime256v1" || name == "P-256" || name == "secp256r1") {
    curve = "nistp256";
  } else if (name == "secp384r1" || name == "P-384") {
    curve = "nistp384";
  } else if (name == "secp521r1" || name == "P-521") {
    curve = "nistp521";
  } else {
    return UnknownType();
  }
  // SSH carries the point uncompressed (RFC 5656 §3.1, SEC1 2.3.3); ask for that form in case
  // the SubjectPublicKeyInfo used a compressed point.
  EVP_PKEY_set_utf8_string_param(pkey, OSSL_PKEY_PARAM_EC_POINT_CONVERSION_FORMAT,
                                 OSSL_PKEY_EC_POINT_CONVERSION_FORMAT_UNCOMPRESSED);
  std::array<unsigned char, 160> point{};
  size_t point_len = 0;
  if (EVP_PKEY_get_octet_string_param(pkey, OSSL_PKEY_PARAM_ENCODED_PUBLIC_KEY, point.data(),
                                      point.size(), &point_len) != 1) {
    return Unreadable();
  }
  std::string blob;
  AppendString(blob, std::string("ecdsa-sha2-") + std::string(curve));
  AppendString(blob, curve);
  AppendString(blob, std::string_view(reinterpret_cast<const char*>(point.data()), point_len));
  return blob;
}

core::Result<std::string> Ed25519Blob(const EVP_PKEY* pkey) {
  std::array<unsigned char, 32> raw{};
  size_t len = raw.size();
  if (EVP_PKEY_get_raw_public_key(pkey, raw.data(), &len) != 1 || len != raw.size()) {
    return Unreadable();
  }
  std::string blob;
  AppendString(blob, "ssh-ed25519");
  AppendString(blob, std::string_view(reinterpret_cast<const char*>(raw.data()), len));
  return blob;
}

}  // namespace

core::Result<std::string> PemDerToSshBlob(std::string_view label, std::string_view der) {
  ErrorQueueGuard guard;
  if (der.empty() || der.size() > 0x7fffffff) return Unreadable();
  const auto* begin = reinterpret_cast<const unsigned char*>(der.data());
  const unsigned char* p = begin;
  const long len = static_cast<long>(der.size());
  PkeyPtr pkey;
  if (label == "PUBLIC KEY") {
    pkey.reset(d2i_PUBKEY(nullptr, &p, len));
  } else if (label == "RSA PUBLIC KEY") {
    pkey.reset(d2i_PublicKey(EVP_PKEY_RSA, nullptr, &p, len));
  } else {
    return Unreadable();
  }
  if (!pkey || p != begin + der.size()) return Unreadable();

  switch (EVP_PKEY_get_base_id(pkey.get())) {
    case EVP_PKEY_RSA:
      return RsaBlob(pkey.get());
    case EVP_PKEY_EC:
      return EcBlob(pkey.get());
    case EVP_PKEY_ED25519:
      return Ed25519Blob(pkey.get());
    case EVP_PKEY_DSA:
      return DsaRefused();
    default:
      return UnknownType();
  }
}

bool IsPointOnCurve(std::string_view curve, std::string_view sec1_point) {
  int nid = NID_undef;
  if (curve == "nistp256") nid = NID_X9_62_prime256v1;
  if (curve == "nistp384") nid = NID_secp384r1;
  if (curve == "nistp521") nid = NID_secp521r1;
  if (nid == NID_undef) return false;
  std::unique_ptr<EC_GROUP, decltype(&EC_GROUP_free)> group(EC_GROUP_new_by_curve_name(nid),
                                                            &EC_GROUP_free);
  if (!group) return false;
  std::unique_ptr<EC_POINT, decltype(&EC_POINT_free)> point(EC_POINT_new(group.get()),
                                                            &EC_POINT_free);
  // oct2point refuses encodings of points that are not on the curve.
  const bool ok = point &&
                  EC_POINT_oct2point(group.get(), point.get(),
                                     reinterpret_cast<const unsigned char*>(sec1_point.data()),
                                     sec1_point.size(), nullptr) == 1 &&
                  EC_POINT_is_on_curve(group.get(), point.get(), nullptr) == 1 &&
                  EC_POINT_is_at_infinity(group.get(), point.get()) == 0;
  ERR_clear_error();
  return ok;
}

}  // namespace gpuwerk::keys::internal

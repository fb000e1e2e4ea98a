#include "core/random.h"

#include <sodium.h>

#include <vector>

#include "core/check.h"
#include "core/encoding.h"

namespace gpuwerk::core {

void SodiumRng::Fill(void* out, size_t n) { randombytes_buf(out, n); }

std::string RandomToken(Rng& rng, size_t bytes) {
  std::vector<unsigned char> buf(bytes);
  rng.Fill(buf.data(), buf.size());
  return Base64UrlEncode(std::string_view(reinterpret_cast<const char*>(buf.data()), buf.size()));
}

std::string NewId(Rng& rng, std::string_view prefix) {
  static constexpr char kAlphabet[] = "abcdefghijklmnopqrstuvwxyz234567";
  unsigned char buf[16];
  rng.Fill(buf, sizeof buf);
  std::string id(prefix);
  id += '_';
  for (unsigned char c : buf) id += kAlphabet[c & 31];
  return id;
}

}  // namespace gpuwerk::core

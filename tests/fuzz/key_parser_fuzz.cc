// libFuzzer target for keys::ParsePublicKey (R-4, cases C01-C04).
//
// Properties checked on every input:
// - no crash, leak, or undefined behaviour (ASan + UBSan);
// - a failure carries kInvalidArgument and one of the documented api codes;
// - a success yields a line that ends with exactly one "\n" and has no "\r", and that parses
//   back to the same key (type, blob, comment, bits, fingerprint).

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "keys/public_key.h"

namespace {

bool IsDocumentedCode(const std::string& code) {
  for (std::string_view known :
       {"invalid_public_key", "private_key_pasted", "invalid_encoding", "multiple_keys",
        "unsupported_key_type", "key_type_mismatch", "weak_key"}) {
    if (code == known) return true;
  }
  return false;
}

}  // namespace

// A broken property traps, and libFuzzer saves the input that got there.
#define FUZZ_CHECK(cond)           \
  do {                             \
    if (!(cond)) __builtin_trap(); \
  } while (0)

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using gpuwerk::keys::ParsePublicKey;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const auto key = ParsePublicKey(text);
  if (!key) {
    FUZZ_CHECK(key.error().code == gpuwerk::core::ErrorCode::kInvalidArgument);
    FUZZ_CHECK(IsDocumentedCode(key.error().api_code));
    FUZZ_CHECK(!key.error().message.empty());
    return 0;
  }
  const std::string line = key->Line();
  FUZZ_CHECK(!line.empty() && line.back() == '\n' && line.find('\n') == line.size() - 1);
  FUZZ_CHECK(line.find('\r') == std::string::npos);
  FUZZ_CHECK(key->bits > 0 && key->TypeLabel() != "UNKNOWN");

  const auto again = ParsePublicKey(line);
  FUZZ_CHECK(again.has_value());
  FUZZ_CHECK(again->Fingerprint() == key->Fingerprint());
  FUZZ_CHECK(*again == *key);
  FUZZ_CHECK(again->Line() == line);
  return 0;
}

// libFuzzer target for relay::ParseProxyHeader (the PROXY protocol header a trusted TCP balancer
// sends before the client's SSH bytes; docs/ssh.md "Behind a TCP balancer").
//
// Properties checked on every input:
// - no crash, leak, or undefined behaviour (ASan + UBSan);
// - a complete header fits in the input, within the version's limit, and reads the same from
//   its own bytes alone (it is self-delimiting); one that is not LOCAL names a source address;
// - "need more" always asks for at least one byte and never for more than the version's limit;
// - a reader that takes only what the parser allows (max_read, up to the first '\n' with
//   stop_after_newline) ends exactly at the header's end: it never takes the client's bytes
//   behind it, and it reaches the same verdict as the parser given the whole input.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "relay/proxy_header.h"

#define FUZZ_CHECK(cond)           \
  do {                             \
    if (!(cond)) __builtin_trap(); \
  } while (0)

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using gpuwerk::relay::kProxyV1MaxBytes;
  using gpuwerk::relay::kProxyV2MaxBytes;
  using gpuwerk::relay::ParseProxyHeader;
  using Status = gpuwerk::relay::ProxyHeaderParse::Status;
  const std::string_view input(reinterpret_cast<const char*>(data), size);

  const auto whole = ParseProxyHeader(input);
  if (whole.status == Status::kComplete) {
    const auto& h = whole.header;
    FUZZ_CHECK(h.length <= size);
    FUZZ_CHECK(h.version == 1 ? h.length <= kProxyV1MaxBytes : h.length <= kProxyV2MaxBytes);
    FUZZ_CHECK(h.local || !h.source_address.empty());
    const auto again = ParseProxyHeader(input.substr(0, h.length));
    FUZZ_CHECK(again.status == Status::kComplete && again.header.length == h.length &&
               again.header.source_address == h.source_address &&
               again.header.source_port == h.source_port && again.header.local == h.local);
  } else if (whole.status == Status::kNeedMore) {
    FUZZ_CHECK(whole.max_read > 0);
    FUZZ_CHECK(size + whole.max_read <= kProxyV2MaxBytes);
  } else {
    FUZZ_CHECK(!whole.error.empty());
  }

  // The relay's reader, fed from `input` as if it were the socket.
  std::string read;
  while (true) {
    const auto p = ParseProxyHeader(read);
    if (p.status == Status::kComplete) {
      FUZZ_CHECK(whole.status == Status::kComplete && p.header.length == read.size() &&
                 read.size() == whole.header.length);
      break;
    }
    if (p.status == Status::kInvalid) {
      FUZZ_CHECK(whole.status == Status::kInvalid);
      break;
    }
    const std::string_view left = input.substr(read.size());
    if (left.empty()) {
      FUZZ_CHECK(whole.status == Status::kNeedMore);
      break;
    }
    size_t take = std::min(p.max_read, left.size());
    if (p.stop_after_newline) {
      const size_t nl = left.substr(0, take).find('\n');
      if (nl != std::string_view::npos) take = nl + 1;
    }
    FUZZ_CHECK(take > 0);
    read.append(left.substr(0, take));
  }
  return 0;
}

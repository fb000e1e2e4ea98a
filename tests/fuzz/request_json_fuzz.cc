// libFuzzer target for reading an API request body the way handlers do: parse JSON without
// exceptions (nlohmann::json::parse with allow_exceptions=false), then read the string fields a
// sign-up or SSH-key request carries, type-checking each before use. Independent of other
// gpuwerk components on purpose: it guards the JSON layer and the read pattern itself.

#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

namespace {

/// A string field of an object, or nullopt when it is missing or not a string.
std::optional<std::string_view> StringField(const nlohmann::json& object, const char* name) {
  const auto it = object.find(name);
  if (it == object.end() || !it->is_string()) return std::nullopt;
  return std::string_view(it->get_ref<const std::string&>());
}

volatile size_t g_sink = 0;  // keeps the reads from being optimised away

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const nlohmann::json body =
      nlohmann::json::parse(data, data + size, /*cb=*/nullptr, /*allow_exceptions=*/false);
  if (body.is_discarded() || !body.is_object()) return 0;

  size_t total = 0;
  for (const char* field : {"email", "password", "name", "public_key"}) {
    if (const auto value = StringField(body, field)) {
      // What a handler does next: trim, look for '@', compare.
      const size_t start = value->find_first_not_of(" \t\r\n");
      const size_t at = value->find('@');
      total += value->size() + (start == std::string_view::npos ? 0 : start) +
               (at == std::string_view::npos ? 0 : at);
    }
  }
  // An integer field read with a range check, as paging does.
  if (const auto it = body.find("page"); it != body.end() && it->is_number_integer()) {
    const auto page = it->get<int64_t>();
    if (page >= 1 && page <= 1'000'000) total += static_cast<size_t>(page);
  }
  // A log line of the body (never echoed to clients) must not throw.
  total += body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).size();
  g_sink = total;
  return 0;
}

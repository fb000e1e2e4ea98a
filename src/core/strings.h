#pragma once

#include <string_view>

namespace gpuwerk::core {

/// Space and horizontal tab: the blanks of header fields (HTTP's OWS, RFC 9110 §5.6.3; RFC 5322
/// WSP) and of SSH key lines. Trim's default.
inline constexpr std::string_view kBlanks = " \t";
/// Every ASCII whitespace character (what std::isspace accepts in the "C" locale).
inline constexpr std::string_view kWhitespace = " \t\n\v\f\r";

/// `s` without the leading and trailing characters that are in `chars`. The result views `s`.
constexpr std::string_view Trim(std::string_view s, std::string_view chars = kBlanks) {
  const size_t first = s.find_first_not_of(chars);
  if (first == std::string_view::npos) return s.substr(s.size());
  return s.substr(first, s.find_last_not_of(chars) - first + 1);
}

/// `s` without the trailing characters that are in `chars`. The result views `s`.
constexpr std::string_view TrimEnd(std::string_view s, std::string_view chars = kBlanks) {
  const size_t last = s.find_last_not_of(chars);
  return last == std::string_view::npos ? s.substr(0, 0) : s.substr(0, last + 1);
}

}  // namespace gpuwerk::core

#include "core/money_text.h"

#include <algorithm>
#include <cctype>
#include <iterator>

namespace gpuwerk::core {
namespace {

struct CurrencyDigits {
  std::string_view code;
  int exponent;
};

// ISO 4217 (list one, the minor unit column), active codes. Sorted by code for the lookup.
constexpr CurrencyDigits kCurrencies[] = {
    {"AED", 2}, {"AFN", 2}, {"ALL", 2}, {"AMD", 2}, {"ANG", 2}, {"AOA", 2}, {"ARS", 2}, {"AUD", 2},
    {"AWG", 2}, {"AZN", 2}, {"BAM", 2}, {"BBD", 2}, {"BDT", 2}, {"BGN", 2}, {"BHD", 3}, {"BIF", 0},
    {"BMD", 2}, {"BND", 2}, {"BOB", 2}, {"BRL", 2}, {"BSD", 2}, {"BTN", 2}, {"BWP", 2}, {"BYN", 2},
    {"BZD", 2}, {"CAD", 2}, {"CDF", 2}, {"CHF", 2}, {"CLF", 4}, {"CLP", 0}, {"CNY", 2}, {"COP", 2},
    {"CRC", 2}, {"CUP", 2}, {"CVE", 2}, {"CZK", 2}, {"DJF", 0}, {"DKK", 2}, {"DOP", 2}, {"DZD", 2},
    {"EGP", 2}, {"ERN", 2}, {"ETB", 2}, {"EUR", 2}, {"FJD", 2}, {"FKP", 2}, {"GBP", 2}, {"GEL", 2},
    {"GHS", 2}, {"GIP", 2}, {"GMD", 2}, {"GNF", 0}, {"GTQ", 2}, {"GYD", 2}, {"HKD", 2}, {"HNL", 2},
    {"HTG", 2}, {"HUF", 2}, {"IDR", 2}, {"ILS", 2}, {"INR", 2}, {"IQD", 3}, {"IRR", 2}, {"ISK", 0},
    {"JMD", 2}, {"JOD", 3}, {"JPY", 0}, {"KES", 2}, {"KGS", 2}, {"KHR", 2}, {"KMF", 0}, {"KPW", 2},
    {"KRW", 0}, {"KWD", 3}, {"KYD", 2}, {"KZT", 2}, {"LAK", 2}, {"LBP", 2}, {"LKR", 2}, {"LRD", 2},
    {"LSL", 2}, {"LYD", 3}, {"MAD", 2}, {"MDL", 2}, {"MGA", 2}, {"MKD", 2}, {"MMK", 2}, {"MNT", 2},
    {"MOP", 2}, {"MRU", 2}, {"MUR", 2}, {"MVR", 2}, {"MWK", 2}, {"MXN", 2}, {"MYR", 2}, {"MZN", 2},
    {"NAD", 2}, {"NGN", 2}, {"NIO", 2}, {"NOK", 2}, {"NPR", 2}, {"NZD", 2}, {"OMR", 3}, {"PAB", 2},
    {"PEN", 2}, {"PGK", 2}, {"PHP", 2}, {"PKR", 2}, {"PLN", 2}, {"PYG", 0}, {"QAR", 2}, {"RON", 2},
    {"RSD", 2}, {"RUB", 2}, {"RWF", 0}, {"SAR", 2}, {"SBD", 2}, {"SCR", 2}, {"SDG", 2}, {"SEK", 2},
    {"SGD", 2}, {"SHP", 2}, {"SLE", 2}, {"SOS", 2}, {"SRD", 2}, {"SSP", 2}, {"STN", 2}, {"SVC", 2},
    {"SYP", 2}, {"SZL", 2}, {"THB", 2}, {"TJS", 2}, {"TMT", 2}, {"TND", 3}, {"TOP", 2}, {"TRY", 2},
    {"TTD", 2}, {"TWD", 2}, {"TZS", 2}, {"UAH", 2}, {"UGX", 0}, {"USD", 2}, {"UYI", 0}, {"UYU", 2},
    {"UYW", 4}, {"UZS", 2}, {"VES", 2}, {"VND", 0}, {"VUV", 0}, {"WST", 2}, {"XAF", 0}, {"XCD", 2},
    {"XOF", 0}, {"XPF", 0}, {"YER", 2}, {"ZAR", 2}, {"ZMW", 2}, {"ZWL", 2},
};

std::string Upper(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return out;
}

}  // namespace

std::optional<int> CurrencyExponent(std::string_view currency) {
  if (currency.size() != 3) return std::nullopt;
  const std::string code = Upper(currency);
  auto it =
      std::lower_bound(std::begin(kCurrencies), std::end(kCurrencies), code,
                       [](const CurrencyDigits& c, const std::string& k) { return c.code < k; });
  if (it == std::end(kCurrencies) || it->code != code) return std::nullopt;
  return it->exponent;
}

std::string FormatAmount(int64_t amount_minor, std::string_view currency) {
  const std::string code = Upper(currency);
  const auto exponent = CurrencyExponent(currency);
  const bool negative = amount_minor < 0;
  // The magnitude as unsigned, so INT64_MIN formats too.
  uint64_t magnitude =
      negative ? 0 - static_cast<uint64_t>(amount_minor) : static_cast<uint64_t>(amount_minor);
  std::string digits = std::to_string(magnitude);
  // Appended piece by piece: `const char* + std::string` here drew GCC 12's false -Wrestrict in
  // release builds (the inlined insert's memcpy).
  std::string out;
  out.reserve(digits.size() + code.size() + 20);
  if (negative) out.push_back('-');
  if (!exponent) {
    out.append(digits).append(" (minor units) ").append(code);
    return out;
  }
  const size_t e = static_cast<size_t>(*exponent);
  std::string padded;  // at least one digit before the point: "5" cents → "005" → "0.05"
  if (e > 0 && digits.size() <= e) padded.assign(e + 1 - digits.size(), '0');
  padded.append(digits);
  const size_t whole = padded.size() - e;
  out.append(padded, 0, whole);
  if (e > 0) {
    out.push_back('.');
    out.append(padded, whole, std::string::npos);
  }
  out.push_back(' ');
  out.append(code);
  return out;
}

}  // namespace gpuwerk::core

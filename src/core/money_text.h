#pragma once

// Money as text (R-13, docs/billing.md): the one way the server, its mails and the CLI show an
// amount. Pure; thread-safe.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace gpuwerk::core {

/// The ISO 4217 minor-unit exponent of `currency` (case-insensitive alphabetic code): 0 for JPY
/// and KRW, 2 for USD and EUR, 3 for KWD, BHD, JOD, OMR, TND, LYD, IQD, 4 for CLF, … (the table in
/// money_text.cc). nullopt for a code that is not in the table. Amounts are always integer minor
/// units of their currency; the exponent only says where the decimal point goes.
std::optional<int> CurrencyExponent(std::string_view currency);

/// `amount_minor` in major units with the currency's exponent and its upper-case code, e.g.
/// (1234, "usd") → "12.34 USD", (1234, "JPY") → "1234 JPY", (1234, "kwd") → "1.234 KWD"; a
/// negative amount gets a leading "-". An unknown currency shows its minor units: "1234 (minor
/// units) XYZ".
std::string FormatAmount(int64_t amount_minor, std::string_view currency);

}  // namespace gpuwerk::core

#include "relay/relay_user.h"

#include <cctype>

namespace gpuwerk::relay {
namespace {

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

bool IsLogin(std::string_view s) {
  if (s.empty() || s.size() > 32) return false;
  if (!(std::islower(static_cast<unsigned char>(s[0])) || s[0] == '_')) return false;
  for (char c : s) {
    if (!(std::islower(static_cast<unsigned char>(c)) ||
          std::isdigit(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '-'))
      return false;
  }
  return true;
}

bool IsHostLabel(std::string_view s) {
  if (s.empty() || s.size() > 63 || s.front() == '-' || s.back() == '-') return false;
  for (char c : s) {
    if (!(std::islower(static_cast<unsigned char>(c)) ||
          std::isdigit(static_cast<unsigned char>(c)) || c == '-'))
      return false;
  }
  return true;
}

}  // namespace

bool LooksLikeInstanceHostname(std::string_view w) {
  if (!IsHostLabel(w) || w.size() < 7 || w[w.size() - 6] != '-') return false;
  for (char c : w.substr(w.size() - 5)) {
    if (!((c >= 'a' && c <= 'z') || (c >= '2' && c <= '7'))) return false;
  }
  return true;
}

core::Result<RelayUser> ParseRelayUser(std::string_view user) {
  const std::string help =
      "use the instance's hostname as the SSH user (e.g. alpha-k3x7q), or <login>+<hostname> "
      "to choose the Linux login";
  if (user.size() > 128) {
    return core::InvalidArgument("invalid_relay_user", "the SSH user name is too long: " + help);
  }
  const std::string u = Lower(user);
  const auto plus = u.find('+');
  if (plus == std::string::npos) {
    if (!IsLogin(u) && !IsHostLabel(u)) {
      return core::InvalidArgument(
          "invalid_relay_user",
          "the SSH user name is not a login or an instance hostname: " + help);
    }
    if (LooksLikeInstanceHostname(u)) return RelayUser{std::string(kDefaultLogin), u, ""};
    if (!IsLogin(u)) {
      return core::InvalidArgument(
          "invalid_relay_user",
          "the SSH user name is not a login or an instance hostname: " + help);
    }
    return RelayUser{"", "", u};
  }
  std::string login = u.substr(0, plus);
  std::string host = u.substr(plus + 1);
  if (!IsLogin(login)) {
    return core::InvalidArgument("invalid_relay_user",
                                 "the login before '+' is not a valid Linux login: " + help);
  }
  if (!IsHostLabel(host)) {
    return core::InvalidArgument("invalid_relay_user",
                                 "the part after '+' is not an instance hostname: " + help);
  }
  return RelayUser{login, host};
}

}  // namespace gpuwerk::relay

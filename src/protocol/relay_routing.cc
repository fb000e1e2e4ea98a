#include "protocol/relay_routing.h"

#include <algorithm>
#include <cctype>

namespace gpuwerk::protocol {
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

RelayTarget TargetFor(const RelayCandidate& in, std::string login) {
  RelayTarget t;
  t.instance_id = in.instance_id;
  t.instance_name = in.name;
  t.hostname = in.hostname;
  t.upstream_host = in.upstream_host;
  t.upstream_port = in.upstream_port;
  t.upstream_host_key_fingerprint = in.upstream_host_key_fingerprint;
  t.login = std::move(login);
  t.person_id = in.person_id;
  return t;
}

/// The refusal text: what went wrong, then the instances this key reaches (only those).
std::string RefusalText(const std::string& what, const std::string& fingerprint,
                        const std::vector<RelayCandidate>& reachable) {
  std::string out = "gpuwerk: " + what + "\n";
  if (reachable.empty()) {
    out += "This key (" + fingerprint +
           ") is not attached to any live instance. Attach it when you create an instance, or "
           "log in with the key you chose then.\n";
    return out;
  }
  out += "This key reaches these instances; use one as the SSH user name:\n";
  for (const RelayCandidate& in : reachable) {
    out += "  " + in.hostname + "   (instance " + in.name + "; or <login>+" + in.hostname + ")\n";
  }
  return out;
}

/// What an SSH user name must be, for the person (the end of each invalid_relay_user message).
constexpr std::string_view kRelayUserHelp =
    "use the instance's hostname as the SSH user (e.g. alpha-k3x7q), or <login>+<hostname> to "
    "choose the Linux login";

}  // namespace

bool LooksLikeInstanceHostname(std::string_view w) {
  if (!IsHostLabel(w) || w.size() < 7 || w[w.size() - 6] != '-') return false;
  for (char c : w.substr(w.size() - 5)) {
    if (!((c >= 'a' && c <= 'z') || (c >= '2' && c <= '7'))) return false;
  }
  return true;
}

core::Result<void> CheckRelayUserLength(std::string_view user) {
  if (user.size() <= kMaxRelayUserBytes) return {};
  return core::InvalidArgument("invalid_relay_user",
                               "the SSH user name is too long (" + std::to_string(user.size()) +
                                   " bytes; at most " + std::to_string(kMaxRelayUserBytes) +
                                   "): " + std::string(kRelayUserHelp));
}

core::Result<RelayUser> ParseRelayUser(std::string_view user) {
  const std::string help(kRelayUserHelp);
  GPUWERK_TRY(CheckRelayUserLength(user));
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

RelayAuthorizeDecision DecideRelayLogin(const RelayAuthorizeRequest& request,
                                        std::vector<RelayCandidate> reachable) {
  std::sort(
      reachable.begin(), reachable.end(),
      [](const RelayCandidate& a, const RelayCandidate& b) { return a.hostname < b.hostname; });
  auto user = ParseRelayUser(request.user);
  if (!user) {
    return RelayAuthorizeDecision::Refuse(
        RefusalText(user.error().message, request.fingerprint, reachable));
  }
  if (user->hostname.empty()) {
    // A bare login (`ssh root@relay`) never picks an instance by key: the key alone does not
    // say which instance its holder meant, nor (before one key had one account) whose it was.
    return RelayAuthorizeDecision::Refuse(RefusalText(
        "\"" + user->bare_login +
            "\" does not name an instance. The relay routes by the instance's hostname only: use "
            "it as the SSH user name, as in ssh <hostname>@<relay>, or ssh "
            "<login>+<hostname>@<relay> for another Linux login. The dashboard and 'gpuwerk "
            "instances show' print the command.",
        request.fingerprint, reachable));
  }
  for (const RelayCandidate& in : reachable) {
    if (in.hostname == user->hostname) {
      return RelayAuthorizeDecision::Allow(TargetFor(in, user->login));
    }
  }
  return RelayAuthorizeDecision::Refuse(
      RefusalText("no instance \"" + user->hostname + "\" that this key can reach.",
                  request.fingerprint, reachable));
}

}  // namespace gpuwerk::protocol

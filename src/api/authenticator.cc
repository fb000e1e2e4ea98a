#include "api/authenticator.h"

#include <fmt/format.h>

#include <optional>
#include <string_view>
#include <utility>

namespace gpuwerk::api {
namespace {

/// "scheme://host[:port]" of a URL.
std::string OriginOf(std::string_view url) {
  size_t scheme_end = url.find("://");
  if (scheme_end == std::string_view::npos) return "";
  size_t path = url.find('/', scheme_end + 3);
  return std::string(url.substr(0, path));
}

bool IsUnsafe(std::string_view method) {
  return method != "GET" && method != "HEAD" && method != "OPTIONS";
}

/// An origin as RFC 6454 §4 defines it: scheme, host and port (the scheme's default when the text
/// names none).
struct OriginParts {
  std::string scheme;  ///< "http" or "https"
  std::string host;    ///< lower case; an IPv6 literal keeps its brackets
  int port = 0;

  bool operator==(const OriginParts&) const = default;
};

/// "host[:port]" (a Host field, or an origin's authority; ParseHostAndPort) with `scheme`'s
/// default port when it names none. nullopt for anything ParseHostAndPort refuses.
std::optional<OriginParts> ParseAuthority(std::string_view scheme, std::string_view authority) {
  std::optional<HostAndPort> parsed = ParseHostAndPort(authority);
  if (!parsed) return std::nullopt;
  return OriginParts{.scheme = std::string(scheme),
                     .host = std::move(parsed->host),
                     .port = parsed->port.value_or(scheme == "https" ? 443 : 80)};
}

/// An Origin field's value ("https://example.com:8443"), as browsers serialise it: a lower-case
/// http or https scheme and an authority, nothing after it. nullopt otherwise (also "null").
std::optional<OriginParts> ParseOrigin(std::string_view origin) {
  for (std::string_view scheme : {"http", "https"}) {
    const std::string prefix = std::string(scheme) + "://";
    if (origin.starts_with(prefix)) return ParseAuthority(scheme, origin.substr(prefix.size()));
  }
  return std::nullopt;
}

}  // namespace

Authenticator::Authenticator(auth::AccountService& accounts, std::string public_url)
    : accounts_(accounts),
      public_origin_(OriginOf(public_url)),
      secure_(public_url.starts_with("https://")) {}

core::Result<void> Authenticator::CheckOrigin(const Request& req) const {
  if (!IsUnsafe(req.method)) return {};
  std::string origin(req.Header("Origin"));
  if (origin.empty()) {
    std::string_view referer = req.Header("Referer");
    if (referer.empty()) return {};  // not a browser (CLI, curl): nothing to check
    origin = OriginOf(referer);
  }
  // Scheme, host and port must all be the server's (RFC 6454 §5): the public URL's, or the public
  // URL's scheme with the Host the request came to (the server reached by another name, e.g.
  // 127.0.0.1 for localhost). An https origin never passes on an http-only server.
  const std::optional<OriginParts> sent = ParseOrigin(origin);
  const std::optional<OriginParts> own = ParseOrigin(public_origin_);
  if (sent && own) {
    if (*sent == *own) return {};
    const std::optional<OriginParts> reached = ParseAuthority(own->scheme, req.Header("Host"));
    if (reached && *sent == *reached) return {};
  }
  return core::Fail(core::ErrorCode::kPermissionDenied, "origin_mismatch",
                    "This request came from another site and was refused.");
}

core::Result<Authenticator::Credential> Authenticator::CredentialOf(const Request& req) const {
  std::string_view authz = req.Header("Authorization");
  if (!authz.empty()) {
    constexpr std::string_view kBearer =
        "Bearer ";  // the scheme is case-insensitive (RFC 9110 §11.1)
    if (authz.size() > kBearer.size() &&
        EqualsIgnoreCase(authz.substr(0, kBearer.size()), kBearer)) {
      return Credential{auth::CredentialKind::kApiToken, std::string(authz.substr(kBearer.size()))};
    }
    return core::Fail(core::ErrorCode::kUnauthenticated, "unauthenticated",
                      "Use 'Authorization: Bearer <API token>'.");
  }
  std::string cookie = req.Cookie(session_cookie_name());
  if (cookie.empty()) {
    return core::Fail(core::ErrorCode::kUnauthenticated, "unauthenticated",
                      "Sign in first, or pass an API token as 'Authorization: Bearer …'.");
  }
  GPUWERK_TRY(CheckOrigin(req));
  return Credential{auth::CredentialKind::kSignInSession, std::move(cookie)};
}

core::Result<auth::Principal> Authenticator::Authenticate(const Request& req) const {
  GPUWERK_ASSIGN_OR_RETURN(Credential credential, CredentialOf(req));
  if (credential.kind == auth::CredentialKind::kApiToken) {
    return accounts_.AuthenticateApiToken(credential.secret);
  }
  return accounts_.AuthenticateSession(credential.secret);
}

core::Result<auth::Principal> Authenticator::Authenticate(const Request& req,
                                                          store::Transaction& tx) const {
  GPUWERK_ASSIGN_OR_RETURN(Credential credential, CredentialOf(req));
  if (credential.kind == auth::CredentialKind::kApiToken) {
    return accounts_.AuthenticateApiToken(tx, credential.secret);
  }
  return accounts_.AuthenticateSession(tx, credential.secret);
}

void Authenticator::RecordUse(const auth::Principal& who) const {
  accounts_.RecordApiTokenUse(who);
}

std::string Authenticator::SessionCookie(const auth::SignIn& sign_in, int64_t now_unix) const {
  return fmt::format("{}={}; Path=/; Max-Age={}; HttpOnly; SameSite=Lax{}", session_cookie_name(),
                     sign_in.session_token, std::max<int64_t>(0, sign_in.expires_at - now_unix),
                     secure_ ? "; Secure" : "");
}

std::string Authenticator::ClearedSessionCookie() const {
  return fmt::format("{}=; Path=/; Max-Age=0; HttpOnly; SameSite=Lax{}", session_cookie_name(),
                     secure_ ? "; Secure" : "");
}

}  // namespace gpuwerk::api

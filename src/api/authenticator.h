#pragma once

#include <string>
#include <string_view>

#include "api/http_types.h"
#include "auth/account_service.h"
#include "auth/principal.h"
#include "core/error.h"
#include "store/database.h"

namespace gpuwerk::api {

/// The name of the sign-in session cookie on a plain-http server.
inline constexpr std::string_view kSessionCookie = "gpuwerk_session";
/// Its name when the public URL is https: the `__Host-` prefix (RFC 6265bis §4.1.3.2) makes a
/// browser take it only with Secure, Path=/ and no Domain from this very host, so a sibling
/// subdomain cannot plant a session of its choosing (login CSRF). Only this name is read then.
inline constexpr std::string_view kSecureSessionCookie = "__Host-gpuwerk_session";

/// Resolves who a request is from: a session cookie (session_cookie_name()) (browser) or
/// `Authorization: Bearer gwt_…` (CLI, scripts). For cookie-authenticated state-changing
/// requests it also checks that Origin (or, lacking it, Referer) is this server's own origin,
/// so another site cannot make a signed-in browser act (CSRF). Thread-safe.
class Authenticator {
 public:
  /// `public_url` is the server's external base URL, e.g. "https://gpu.example.com".
  Authenticator(auth::AccountService& accounts, std::string public_url);

  /// Errors: kUnauthenticated "unauthenticated"; kPermissionDenied "origin_mismatch"; the
  /// store's.
  core::Result<auth::Principal> Authenticate(const Request& req) const;
  /// As Authenticate, inside the caller's transaction (a read one suffices; the route table's
  /// one-read routes authenticate and answer in one). The caller calls RecordUse after the
  /// transaction. Errors: as Authenticate.
  core::Result<auth::Principal> Authenticate(const Request& req, store::Transaction& tx) const;
  /// Records an API token's use (AccountService::RecordApiTokenUse); nothing for a sign-in
  /// session.
  void RecordUse(const auth::Principal& who) const;
  /// Checks Origin/Referer on unsafe methods when present (login CSRF as well).
  /// Errors: kPermissionDenied "origin_mismatch".
  core::Result<void> CheckOrigin(const Request& req) const;
  /// The Set-Cookie value for a new sign-in session: session_cookie_name(), HttpOnly,
  /// SameSite=Lax, Path=/, Max-Age, and Secure when the public URL is https.
  std::string SessionCookie(const auth::SignIn& sign_in, int64_t now_unix) const;
  /// The Set-Cookie value that deletes the session cookie.
  std::string ClearedSessionCookie() const;
  /// kSecureSessionCookie when the public URL is https, else kSessionCookie.
  std::string_view session_cookie_name() const {
    return secure_ ? kSecureSessionCookie : kSessionCookie;
  }
  /// The caller's address for rate limits and the audit log.
  static auth::Caller CallerOf(const Request& req) { return {.address = req.remote_address}; }

 private:
  /// Which credential a request carries, checked (Origin) but not yet resolved.
  struct Credential {
    auth::CredentialKind kind;
    std::string secret;
  };
  core::Result<Credential> CredentialOf(const Request& req) const;

  auth::AccountService& accounts_;
  std::string public_origin_;
  bool secure_;
};

}  // namespace gpuwerk::api

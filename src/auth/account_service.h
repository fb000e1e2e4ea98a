#pragma once

#include <chrono>
#include <functional>
#include <initializer_list>
#include <optional>
#include <string>
#include <vector>

#include "auth/api_token_table.h"
#include "auth/email_address.h"
#include "auth/link_token_table.h"
#include "auth/password_hasher.h"
#include "auth/principal.h"
#include "auth/rate_limiter.h"
#include "core/access_change_feed.h"
#include "core/clock.h"
#include "core/error.h"
#include "core/random.h"
#include "mail/outbox.h"
#include "store/database.h"

namespace gpuwerk::auth {

/// Who may sign up (docs/accounts.md "Who may sign up"), chosen by the operator.
enum class SignUpPolicy {
  kOpen,     ///< anyone
  kDomains,  ///< addresses at one of AccountOptions::sign_up_domains
  kInvite,   ///< nobody: operators invite (AccountService::Invite)
};

/// Parses "open", "domains" or "invite". Errors: kInvalidArgument "invalid_config".
core::Result<SignUpPolicy> ParseSignUpPolicy(std::string_view name);

/// Settings for AccountService.
struct AccountOptions {
  std::string public_url = "http://127.0.0.1:8080";  ///< base of links in mails, no trailing /
  std::chrono::seconds sign_in_session_lifetime{30 * 24 * 3600};
  std::chrono::seconds magic_link_lifetime{15 * 60};     ///< R-1: 15 min
  std::chrono::seconds reset_link_lifetime{60 * 60};     ///< R-1: 60 min
  std::chrono::seconds proof_link_lifetime{24 * 3600};   ///< address proof (sign-up): 24 h
  std::chrono::seconds invite_link_lifetime{7 * 86400};  ///< an operator's invitation: 7 days
  SignUpPolicy sign_up_policy = SignUpPolicy::kOpen;
  /// kDomains: the email domains (lowercase, e.g. "example.com") whose addresses may sign up;
  /// an address matches its domain exactly (no subdomains unless listed).
  std::vector<std::string> sign_up_domains;
  /// failed sign-ins per account (normalised email) from one source address, and per
  /// source address (SourceSubject: an IPv6 /64 counts as one). There is no account-wide limit,
  /// so wrong passwords from one source never lock the owner out from another.
  RateRule sign_in_failures_per_account{"sign_in_account", 5, std::chrono::minutes(15)};
  RateRule sign_in_failures_per_address{"sign_in_address", 20, std::chrono::minutes(15)};
  /// Link mails (magic link, reset) per recipient: beyond it requests are answered as usual but
  /// send nothing, so nobody can flood a mailbox.
  RateRule link_mails_per_recipient{"link_recipient", 5, std::chrono::hours(1)};
  /// Link requests and sign-ups per source address: beyond them, 429 rate_limited.
  RateRule link_requests_per_address{"link_address", 20, std::chrono::hours(1)};
  RateRule sign_ups_per_address{"sign_up_address", 30, std::chrono::hours(1)};
  /// Removes every SSH key of a person and returns how many went; called when an unproven
  /// account is claimed (docs/accounts.md "Address proof"). The keys' owner (keys::SshKeyTable)
  /// is injected by app, since auth does not depend on keys. Empty: no keys to remove.
  std::function<core::Result<int64_t>(store::Transaction&, const std::string& person_id)>
      remove_ssh_keys;
};

/// One keyset page of people (AccountService::ListPeople), newest first.
struct PersonPage {
  std::vector<Person> items;
  int64_t page = 1;   ///< this page's number from the newest (1-based), as of this read
  int64_t pages = 1;  ///< at least 1
  int64_t total = 0;  ///< people in all
  std::string next;   ///< the cursor of older rows (`before`); "" when none
  std::string prev;   ///< the cursor of newer rows (`after`); "" when none
};

/// People per page of ListPeople (the API's 15 rows).
inline constexpr int64_t kPeoplePageSize = 15;

/// A new sign-in session: the secret goes into the cookie once and is stored only hashed.
struct SignIn {
  Person person;
  std::string session_token;  ///< 256-bit random, base64url
  int64_t expires_at = 0;     ///< Unix seconds
};

/// Where a request came from, for rate limits and the audit log.
struct Caller {
  std::string address;  ///< IP address
};

/// Accounts, sign-in sessions, link tokens (magic link, password reset) and API tokens
/// . Every change is one store transaction that also writes its audit event and,
/// where a mail goes out, its outbox mail. Secrets (sign-in session tokens, link tokens, API
/// tokens) are 256-bit random values stored only as SHA-256 hashes. Thread-safe.
class AccountService {
 public:
  AccountService(store::Database& db, core::Clock& clock, core::Rng& rng,
                 const PasswordHasher& hasher, mail::Outbox& outbox, AccountOptions options,
                 std::function<void()> mail_enqueued = {});

  /// Signs up `email` without telling whether it has an account (docs/accounts.md "Sign-up"):
  /// a new address gets an unproven account with this password and a mailed link that proves
  /// it (ProveAddress); an unproven account's address gets a fresh link (whoever proves the
  /// mailbox claims it); a proven account's owner gets a notice and nothing changes. The
  /// answer is the same for all three. Errors: invalid_email, weak_password, rate_limited; under
  /// the sign-up policy, for every address alike: kPermissionDenied "signup_invite_only" or
  /// "signup_domain_not_allowed".
  core::Result<void> SignUp(std::string_view email, std::string_view password, const Caller&);
  /// An operator invites `email` (docs/accounts.md "Invitations"): a new address gets an
  /// unproven account without a password, an unproven account a fresh invitation; either way a
  /// mailed link (7 days) that proves the address and sets the password (ProveAddress). Works
  /// under every sign-up policy. Returns the link's expiry (Unix seconds). Errors:
  /// invalid_email, kAlreadyExists "account_exists" (a proven account has the address).
  core::Result<int64_t> Invite(const Principal& by, std::string_view email, const Caller&);
  /// Consumes an address-proof or invitation link once: proves the address, sets `new_password`,
  /// ends every sign-in session and API token the account had and voids its other links (the prover
  /// claims the account), and signs in. Errors: invalid_link, weak_password.
  core::Result<SignIn> ProveAddress(std::string_view token, std::string_view new_password,
                                    const Caller&);
  /// Errors: kUnauthenticated "invalid_credentials" (same for unknown email and wrong password),
  /// kResourceExhausted "rate_limited".
  core::Result<SignIn> SignInWithPassword(std::string_view email, std::string_view password,
                                          const Caller&);
  /// Ends one sign-in session (by its secret). Unknown tokens are ignored.
  core::Result<void> SignOut(std::string_view session_token, const Caller&);

  /// Mails a single-use sign-in link when the address has an account, and a "no account" note
  /// otherwise; the answer never tells which (no enumeration). Errors: invalid_email only.
  core::Result<void> RequestMagicLink(std::string_view email, const Caller&);
  /// Consumes a magic-link token once and signs in. On an unproven account it proves the
  /// address and claims the account (Claim: its password is removed; the person sets one with a
  /// reset). Errors: kUnauthenticated "invalid_link" (unknown, used or expired: one message for
  /// all three).
  core::Result<SignIn> ConsumeMagicLink(std::string_view token, const Caller&);
  /// Mails a password-reset link (same no-enumeration behaviour as RequestMagicLink).
  core::Result<void> RequestPasswordReset(std::string_view email, const Caller&);
  /// Consumes a reset token once, sets the new password, and ends every sign-in session and API
  /// token of the person and voids their other unused links (docs/accounts.md "Links"); on an
  /// unproven account it also proves the address and removes its SSH keys (Claim).
  /// Errors: invalid_link, weak_password.
  core::Result<Person> ResetPassword(std::string_view token, std::string_view new_password,
                                     const Caller&);
  /// Sets a new password for the signed-in person after checking the current one, ends every
  /// other sign-in session and API token (the credential `who` used is kept), voids unused
  /// links, and mails a notice. A wrong current password counts as a failed sign-in.
  /// The route admits only a proven person (an unproven account's holder could void the
  /// mailbox owner's links; docs/accounts.md "Address proof").
  /// Errors: kUnauthenticated "invalid_credentials", weak_password, rate_limited.
  core::Result<void> ChangePassword(const Principal& who, std::string_view current_password,
                                    std::string_view new_password, const Caller&);

  /// Resolves a sign-in session secret. Errors: kUnauthenticated "unauthenticated".
  core::Result<Principal> AuthenticateSession(std::string_view session_token);
  /// Resolves an API token secret ("gwt_…") and records its use (RecordApiTokenUse); an
  /// expired token is refused. Errors: kUnauthenticated "unauthenticated".
  core::Result<Principal> AuthenticateApiToken(std::string_view token);

  /// As AuthenticateSession, inside the caller's transaction (a read one suffices), so that a
  /// request can authenticate and read its answer in one transaction. Errors: as above, and the
  /// store's.
  core::Result<Principal> AuthenticateSession(store::Transaction& tx,
                                              std::string_view session_token);
  /// As AuthenticateApiToken, inside the caller's transaction (a read one suffices), without
  /// recording the use (a read cannot write): call RecordApiTokenUse after the transaction.
  core::Result<Principal> AuthenticateApiToken(store::Transaction& tx, std::string_view token);
  /// Records that `who`'s API token was used now, in a write transaction of its own, when its
  /// last recorded use (`who.token_last_used_at`) is a minute old or more: last_used_at is kept
  /// to the minute, so most requests stay read-only. Nothing for sign-in sessions. A failure is
  /// logged, not returned (the request it came with goes on).
  void RecordApiTokenUse(const Principal& who);

  /// Creates a named personal API token, optionally expiring at `expires_at` (Unix seconds),
  /// and mails its owner a notice; the returned secret is shown once.
  /// Errors: invalid_name, invalid_expiry (not in the future), kAlreadyExists "name_taken".
  core::Result<std::pair<ApiToken, std::string>> CreateApiToken(const Principal&,
                                                                std::string_view name,
                                                                std::optional<int64_t> expires_at,
                                                                const Caller&);
  core::Result<std::vector<ApiToken>> ListApiTokens(const Principal&);
  /// Errors: not_found (also for another person's token).
  core::Result<void> DeleteApiToken(const Principal&, std::string_view id, const Caller&);

  /// Every person (an operator's view), newest first, kPeoplePageSize a page, keyset paged:
  /// older than cursor `before`, else the page nearest newer than cursor `after` (the newest
  /// page when fewer remain), else the newest (core/keyset.h). Errors: invalid_cursor; the
  /// store's.
  core::Result<PersonPage> ListPeople(std::string_view before, std::string_view after);
  /// An operator (`by`) makes the person with address `email` an operator or not, audited
  /// `person.set_operator` / `person.clear_operator` (detail: email, before) when it changed
  /// anything; setting the value it has changes nothing. The change applies from the person's
  /// next request (every request reads the flag). Errors: invalid_email; not_found (no account
  /// has the address); kFailedPrecondition "last_operator" (clearing the only operator's flag:
  /// nobody could operate the platform then; nothing changes).
  core::Result<Person> SetOperator(const Principal& by, std::string_view email, bool is_operator,
                                   const Caller&);
  /// Who may sign up, as the server's configuration says (read only).
  SignUpPolicy sign_up_policy() const { return options_.sign_up_policy; }
  /// The email domains that may sign up under SignUpPolicy::kDomains (lowercase).
  const std::vector<std::string>& sign_up_domains() const { return options_.sign_up_domains; }

  /// The person with this id. Errors: not_found.
  core::Result<Person> GetPerson(std::string_view person_id);
  /// Creates the operator account if no person has that email yet (used by `gpuwerk up`);
  /// returns true when it created one.
  core::Result<bool> EnsureOperator(std::string_view email, std::string_view password);
  /// Whether `password` is the current password of the account with this email (no limits, no
  /// audit: for `gpuwerk up` to tell whether the password it printed last time still works).
  core::Result<bool> PasswordMatches(std::string_view email, std::string_view password);

  /// DeleteApiToken publishes the token's person to `feed` once committed
  /// (core::AccessChangeFeed: a relay's watch stream opened with that token ends at once).
  /// Optional; `feed` must outlive the service. Call before use.
  void SetAccessChangeFeed(core::AccessChangeFeed* feed) { access_changes_ = feed; }

 private:
  core::Result<SignIn> StartSignIn(store::Transaction& tx, const Person& person,
                                   const Caller& caller, std::string_view how);
  core::Result<void> MailLink(std::string_view email, const Caller& caller, LinkPurpose purpose);
  /// Whether the sign-up policy lets `address` sign up (it never looks at the store).
  core::Result<void> CheckSignUpPolicy(const EmailAddress& address) const;
  /// Issues a link of `purpose` to `person` (voiding their older unused ones of that purpose)
  /// and puts its mail in the outbox.
  core::Result<void> IssueLink(store::Transaction& tx, const Person& person, LinkPurpose purpose);
  /// What Claim ended.
  struct Claimed {
    bool newly_proven = false;  ///< the address was unproven until now
    int64_t api_tokens = 0;     ///< API tokens revoked
    int64_t ssh_keys = 0;       ///< SSH keys removed (only when newly proven)
  };
  /// The mailbox's owner takes the account: sets its password to `password_hash` ("" removes
  /// it), marks the address proven, ends every sign-in session and API token, voids unused
  /// links, and clears its failed sign-ins; when the address was unproven until now, also
  /// removes the account's SSH keys.
  core::Result<Claimed> Claim(store::Transaction& tx, const Person& person,
                              const std::string& password_hash, const Caller& caller);
  /// Whether `token` is an unused, unexpired link of one of `purposes` (a read; the link stays
  /// unused). Errors: kInvalidArgument "invalid_link" when not; the store's.
  core::Result<void> CheckLinkUsable(std::string_view token,
                                     std::initializer_list<LinkPurpose> purposes);
  core::Result<Person> ConsumeLink(store::Transaction& tx, std::string_view token,
                                   LinkPurpose purpose);
  /// rate_limited when the account's or the caller's failed sign-ins are used up.
  core::Result<void> CheckSignInLimits(store::Transaction& tx, const std::string& email_norm,
                                       const Caller& caller);
  /// Counts a failed sign-in (or password check) and audits it; `person_id` "" when unknown.
  core::Result<void> RecordSignInFailure(store::Transaction& tx, const std::string& email_norm,
                                         const std::string& person_id, const Caller& caller);
  /// Ends the person's sign-in sessions and API tokens except the credential `keep` used (none
  /// when keep.credential_id is empty) and voids their unused links. Returns the tokens ended.
  core::Result<int64_t> EndCredentials(store::Transaction& tx, const std::string& person_id,
                                       const Principal& keep);

  store::Database& db_;
  core::Clock& clock_;
  core::Rng& rng_;
  const PasswordHasher& hasher_;
  mail::Outbox& outbox_;
  AccountOptions options_;
  RateLimiter limiter_;
  std::function<void()> mail_enqueued_;
  core::AccessChangeFeed* access_changes_ = nullptr;
};

/// The SHA-256 hex digest under which a secret token is stored.
std::string TokenHash(std::string_view secret);

}  // namespace gpuwerk::auth

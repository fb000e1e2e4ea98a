#include "auth/account_service.h"

#include <spdlog/spdlog.h>

#include "audit/audit_log.h"
#include "auth/account_mails.h"
#include "auth/api_token_table.h"
#include "auth/email_address.h"
#include "auth/link_token_table.h"
#include "auth/person_table.h"
#include "auth/sign_in_session_table.h"
#include "core/encoding.h"
#include "core/strings.h"
#include "core/time_format.h"

namespace gpuwerk::auth {
namespace {

using core::ErrorCode;
using store::Transaction;

constexpr char kApiTokenPrefix[] = "gwt_";

core::Error Unauthenticated() {
  return core::Error(ErrorCode::kUnauthenticated, "unauthenticated",
                     "Sign in first, or pass a valid API token as 'Authorization: Bearer …'.");
}

core::Error InvalidCredentials() {
  return core::Error(ErrorCode::kUnauthenticated, "invalid_credentials",
                     "The email or password is not right.");
}

core::Error InvalidLink() {
  return core::Error(ErrorCode::kUnauthenticated, "invalid_link",
                     "This link is not valid: it was already used, it expired, or it was "
                     "mistyped. Ask for a new one.");
}

core::Result<std::string> ValidateTokenName(std::string_view name) {
  name = core::Trim(name, " ");
  if (name.empty() || name.size() > 64) {
    return core::InvalidArgument("invalid_name", "A token name must be 1 to 64 characters.");
  }
  for (unsigned char c : name) {
    if (!(std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == ' ')) {
      return core::InvalidArgument(
          "invalid_name", "A token name may hold letters, digits, spaces, '.', '-' and '_'.");
    }
  }
  return std::string(name);
}

}  // namespace

std::string TokenHash(std::string_view secret) { return core::HexEncode(core::Sha256(secret)); }

core::Result<SignUpPolicy> ParseSignUpPolicy(std::string_view name) {
  if (name == "open") return SignUpPolicy::kOpen;
  if (name == "domains") return SignUpPolicy::kDomains;
  if (name == "invite") return SignUpPolicy::kInvite;
  return core::Fail(ErrorCode::kInvalidArgument, "invalid_config",
                    "sign_up_policy must be open, domains or invite");
}

core::Result<void> AccountService::CheckSignUpPolicy(const EmailAddress& address) const {
  switch (options_.sign_up_policy) {
    case SignUpPolicy::kOpen:
      return {};
    case SignUpPolicy::kInvite:
      return core::Fail(ErrorCode::kPermissionDenied, "signup_invite_only",
                        "Accounts here are by invitation only: ask the operator to invite your "
                        "address.");
    case SignUpPolicy::kDomains: {
      const std::string domain = address.normalised.substr(address.normalised.rfind('@') + 1);
      for (const auto& allowed : options_.sign_up_domains) {
        if (domain == allowed) return {};
      }
      return core::Fail(ErrorCode::kPermissionDenied, "signup_domain_not_allowed",
                        "Sign-up here is open to addresses of certain email domains only, and "
                        "this one's is not among them: ask the operator for an invitation.");
    }
  }
  return core::Internal("unknown sign-up policy");
}

AccountService::AccountService(store::Database& db, core::Clock& clock, core::Rng& rng,
                               const PasswordHasher& hasher, mail::Outbox& outbox,
                               AccountOptions options, std::function<void()> mail_enqueued)
    : db_(db),
      clock_(clock),
      rng_(rng),
      hasher_(hasher),
      outbox_(outbox),
      options_(std::move(options)),
      limiter_(clock),
      mail_enqueued_(std::move(mail_enqueued)) {}

core::Result<SignIn> AccountService::StartSignIn(Transaction& tx, const Person& person,
                                                 const Caller& caller, std::string_view how) {
  SignIn out{.person = person, .session_token = core::RandomToken(rng_)};
  const int64_t now = clock_.NowUnix();
  out.expires_at = now + options_.sign_in_session_lifetime.count();
  GPUWERK_TRY(SignInSessionTable::Insert(tx, {.token_hash = TokenHash(out.session_token),
                                              .person_id = person.id,
                                              .created_at = now,
                                              .expires_at = out.expires_at,
                                              .source_address = caller.address}));
  GPUWERK_TRY(audit::RecordAudit(tx, clock_, rng_,
                                 {.actor_id = person.id,
                                  .action = "person.sign_in",
                                  .target = person.id,
                                  .source_address = caller.address,
                                  .detail = {{"method", std::string(how)}}}));
  return out;
}

core::Result<void> AccountService::SignUp(std::string_view email, std::string_view password,
                                          const Caller& caller) {
  GPUWERK_ASSIGN_OR_RETURN(EmailAddress address, ParseEmailAddress(email));
  // The operator's policy looks at the address only, never at whether it has an account.
  GPUWERK_TRY(CheckSignUpPolicy(address));
  GPUWERK_TRY(PasswordHasher::CheckPolicy(password));
  // The cheap refusal first: the attempt is counted (and over the limit refused) before any
  // hashing, so a flood of sign-ups costs one small write each, not 64 MiB of argon2id.
  GPUWERK_TRY(db_.Write([&](Transaction& tx) -> core::Result<void> {
    GPUWERK_ASSIGN_OR_RETURN(auto retry, limiter_.RetryAfter(tx, options_.sign_ups_per_address,
                                                             SourceSubject(caller.address)));
    if (retry) {
      return core::Fail(RateLimiter::Limited("Too many sign-ups from this address. Try again in " +
                                                 std::to_string(*retry) + " seconds.",
                                             *retry));
    }
    return limiter_.Record(tx, options_.sign_ups_per_address, SourceSubject(caller.address));
  }));
  // Hashed whether or not the address has an account, so the answer's timing tells nothing.
  GPUWERK_ASSIGN_OR_RETURN(std::string hash, hasher_.Hash(password));
  bool mailed = false;
  GPUWERK_TRY(db_.Write([&](Transaction& tx) -> core::Result<void> {
    Person person{.id = core::NewId(rng_, "per"),
                  .email = address.display,
                  .is_operator = false,
                  .has_password = true,
                  .created_at = clock_.NowUnix()};
    GPUWERK_ASSIGN_OR_RETURN(
        bool created,
        PersonTable::InsertUnlessEmailTaken(
            tx, {.person = person, .email_norm = address.normalised, .password_hash = hash}));
    std::optional<PersonRow> existing;
    if (!created) {
      GPUWERK_ASSIGN_OR_RETURN(existing, PersonTable::FindByEmail(tx, address.normalised));
      if (!existing) return core::Internal("a taken address has no account");
    }
    // The mail is what differs, never the answer: a new account gets the link that proves its
    // address; an unproven one a fresh link (the mailbox's owner claims it); a proven one a
    // notice. Over the recipient's mail limit nothing is sent, as for the other link mails.
    GPUWERK_ASSIGN_OR_RETURN(
        auto full, limiter_.RetryAfter(tx, options_.link_mails_per_recipient, address.normalised));
    if (!full) {
      GPUWERK_TRY(limiter_.Record(tx, options_.link_mails_per_recipient, address.normalised));
      mailed = true;
      if (existing && existing->person.email_proven_at) {
        GPUWERK_TRY(outbox_.Enqueue(
            tx, SignUpAttemptMail(existing->person.email, options_.public_url + "/")));
      } else {
        GPUWERK_TRY(
            IssueLink(tx, existing ? existing->person : person, LinkPurpose::kAddressProof));
      }
    } else {
      spdlog::warn("auth: a sign-up mail over its recipient's hourly limit was not sent");
    }
    const std::string& target = existing ? existing->person.id : person.id;
    return audit::RecordAudit(tx, clock_, rng_,
                              {.actor_id = existing ? "" : person.id,
                               .action = existing ? "person.sign_up_taken" : "person.sign_up",
                               .target = target,
                               .source_address = caller.address});
  }));
  if (mailed && mail_enqueued_) mail_enqueued_();
  return {};
}

core::Result<void> AccountService::IssueLink(Transaction& tx, const Person& person,
                                             LinkPurpose purpose) {
  const std::string token = core::RandomToken(rng_);
  const int64_t now = clock_.NowUnix();
  std::chrono::seconds lifetime = options_.magic_link_lifetime;
  std::string_view path = "/auth/magic-link?token=";
  if (purpose == LinkPurpose::kPasswordReset) {
    lifetime = options_.reset_link_lifetime;
    path = "/auth/reset-password?token=";
  } else if (purpose == LinkPurpose::kAddressProof) {
    lifetime = options_.proof_link_lifetime;
    path = "/auth/prove-address?token=";
  } else if (purpose == LinkPurpose::kInvite) {
    lifetime = options_.invite_link_lifetime;
    path = "/auth/prove-address?token=";
  }
  // Issuing a link voids the older unused links of the same purpose.
  GPUWERK_TRY(LinkTokenTable::VoidUnused(tx, person.id, purpose));
  GPUWERK_TRY(LinkTokenTable::Insert(tx, {.token_hash = TokenHash(token),
                                          .person_id = person.id,
                                          .purpose = purpose,
                                          .created_at = now,
                                          .expires_at = now + lifetime.count()}));
  const std::string link = options_.public_url + std::string(path) + token;
  const int minutes = static_cast<int>(lifetime.count() / 60);
  mail::Mail mail =
      purpose == LinkPurpose::kMagicLink       ? MagicLinkMail(person.email, link, minutes)
      : purpose == LinkPurpose::kPasswordReset ? PasswordResetMail(person.email, link, minutes)
      : purpose == LinkPurpose::kInvite        ? InviteMail(person.email, link, minutes / (24 * 60))
                                               : AddressProofMail(person.email, link, minutes / 60);
  GPUWERK_TRY(outbox_.Enqueue(tx, mail));
  return {};
}

namespace {

/// The subject of the per-account limit: the account from one source (R-3, issue 11: wrong
/// passwords from one source never lock the account for the others).
std::string AccountFromSource(const std::string& email_norm, const Caller& caller) {
  return email_norm + " from " + SourceSubject(caller.address);
}

}  // namespace

core::Result<void> AccountService::CheckSignInLimits(Transaction& tx, const std::string& email_norm,
                                                     const Caller& caller) {
  for (const auto& [rule, subject] :
       {std::pair{&options_.sign_in_failures_per_account, AccountFromSource(email_norm, caller)},
        std::pair{&options_.sign_in_failures_per_address, SourceSubject(caller.address)}}) {
    GPUWERK_ASSIGN_OR_RETURN(auto retry, limiter_.RetryAfter(tx, *rule, subject));
    if (retry) {
      // No "use a magic link" here: the CLI has none. The dashboard's sign-in page offers one
      // beside this message.
      return core::Fail(RateLimiter::Limited(
          "Too many failed sign-ins. Try again in " + std::to_string(*retry) + " seconds.",
          *retry));
    }
  }
  return {};
}

core::Result<void> AccountService::RecordSignInFailure(Transaction& tx,
                                                       const std::string& email_norm,
                                                       const std::string& person_id,
                                                       const Caller& caller) {
  GPUWERK_TRY(limiter_.Record(tx, options_.sign_in_failures_per_account,
                              AccountFromSource(email_norm, caller)));
  GPUWERK_TRY(
      limiter_.Record(tx, options_.sign_in_failures_per_address, SourceSubject(caller.address)));
  return audit::RecordAudit(tx, clock_, rng_,
                            {.actor_id = person_id,
                             .action = "person.sign_in_failed",
                             .target = person_id.empty() ? "unknown" : person_id,
                             .source_address = caller.address});
}

core::Result<SignIn> AccountService::SignInWithPassword(std::string_view email,
                                                        std::string_view password,
                                                        const Caller& caller) {
  auto address = ParseEmailAddress(email);
  if (!address) return core::Fail(InvalidCredentials());
  const std::string& norm = address->normalised;
  // 1. Limits and the stored hash, in a short read transaction.
  struct Found {
    std::optional<Person> person;
    std::string hash;
  };
  GPUWERK_ASSIGN_OR_RETURN(Found found, db_.Read([&](Transaction& tx) -> core::Result<Found> {
    GPUWERK_TRY(CheckSignInLimits(tx, norm, caller));
    GPUWERK_ASSIGN_OR_RETURN(auto row, PersonTable::FindByEmail(tx, norm));
    Found f;
    if (row) {
      f.person = row->person;
      f.hash = row->password_hash;
    }
    return f;
  }));
  // 2. The expensive check outside any transaction. Unknown accounts still pay for one hash so
  //    timing does not reveal which addresses have accounts.
  const bool known = found.person && !found.hash.empty();
  GPUWERK_ASSIGN_OR_RETURN(bool matches,
                           hasher_.Verify(known ? found.hash : hasher_.DummyHash(), password));
  const bool ok = known && matches;
  // 3. Record the outcome: a failure is committed too, so it counts towards the limits.
  GPUWERK_ASSIGN_OR_RETURN(
      std::optional<SignIn> signed_in,
      db_.Write([&](Transaction& tx) -> core::Result<std::optional<SignIn>> {
        if (!ok) {
          GPUWERK_TRY(RecordSignInFailure(tx, norm, found.person ? found.person->id : "", caller));
          return std::optional<SignIn>();
        }
        GPUWERK_TRY(limiter_.Clear(tx, options_.sign_in_failures_per_account.scope,
                                   AccountFromSource(norm, caller)));
        GPUWERK_ASSIGN_OR_RETURN(SignIn s, StartSignIn(tx, *found.person, caller, "password"));
        return std::optional<SignIn>(std::move(s));
      }));
  if (!signed_in) return core::Fail(InvalidCredentials());
  return std::move(*signed_in);
}

core::Result<void> AccountService::SignOut(std::string_view session_token, const Caller& caller) {
  return db_.Write([&](Transaction& tx) -> core::Result<void> {
    const std::string hash = TokenHash(session_token);
    GPUWERK_ASSIGN_OR_RETURN(auto row, SignInSessionTable::Find(tx, hash));
    if (!row) return {};
    GPUWERK_TRY(SignInSessionTable::Delete(tx, hash));
    return audit::RecordAudit(tx, clock_, rng_,
                              {.actor_id = row->person_id,
                               .action = "person.sign_out",
                               .target = row->person_id,
                               .source_address = caller.address});
  });
}

core::Result<void> AccountService::MailLink(std::string_view email, const Caller& caller,
                                            LinkPurpose purpose) {
  GPUWERK_ASSIGN_OR_RETURN(EmailAddress address, ParseEmailAddress(email));
  bool mailed = false;
  GPUWERK_TRY(db_.Write([&](Transaction& tx) -> core::Result<void> {
    GPUWERK_ASSIGN_OR_RETURN(auto retry, limiter_.RetryAfter(tx, options_.link_requests_per_address,
                                                             SourceSubject(caller.address)));
    if (retry) {
      return core::Fail(
          RateLimiter::Limited("Too many link requests from this address. Try again in " +
                                   std::to_string(*retry) + " seconds.",
                               *retry));
    }
    GPUWERK_TRY(
        limiter_.Record(tx, options_.link_requests_per_address, SourceSubject(caller.address)));
    GPUWERK_ASSIGN_OR_RETURN(
        auto full, limiter_.RetryAfter(tx, options_.link_mails_per_recipient, address.normalised));
    if (full) {
      spdlog::warn("auth: a link mail over its recipient's hourly limit was not sent");
      return {};  // answered as usual: the caller learns nothing, the mailbox gets no flood
    }
    GPUWERK_TRY(limiter_.Record(tx, options_.link_mails_per_recipient, address.normalised));
    mailed = true;
    GPUWERK_ASSIGN_OR_RETURN(auto row, PersonTable::FindByEmail(tx, address.normalised));
    if (!row) {
      GPUWERK_TRY(
          outbox_.Enqueue(tx, NoAccountMail(address.display, options_.public_url + "/",
                                            options_.sign_up_policy == SignUpPolicy::kInvite)));
      return {};
    }
    const Person& person = row->person;
    const bool magic = purpose == LinkPurpose::kMagicLink;
    GPUWERK_TRY(IssueLink(tx, person, purpose));
    return audit::RecordAudit(
        tx, clock_, rng_,
        {.actor_id = "",
         .action = magic ? "person.magic_link_sent" : "person.reset_link_sent",
         .target = person.id,
         .source_address = caller.address});
  }));
  if (mailed && mail_enqueued_) mail_enqueued_();
  return {};
}

core::Result<void> AccountService::RequestMagicLink(std::string_view email, const Caller& caller) {
  return MailLink(email, caller, LinkPurpose::kMagicLink);
}

core::Result<void> AccountService::RequestPasswordReset(std::string_view email,
                                                        const Caller& caller) {
  return MailLink(email, caller, LinkPurpose::kPasswordReset);
}

core::Result<void> AccountService::CheckLinkUsable(std::string_view token,
                                                   std::initializer_list<LinkPurpose> purposes) {
  if (token.empty() || token.size() > 128) return core::Fail(InvalidLink());
  GPUWERK_ASSIGN_OR_RETURN(bool usable, db_.Read([&](Transaction& tx) -> core::Result<bool> {
    for (LinkPurpose purpose : purposes) {
      GPUWERK_ASSIGN_OR_RETURN(
          bool u, LinkTokenTable::IsUsable(tx, TokenHash(token), purpose, clock_.NowUnix()));
      if (u) return true;
    }
    return false;
  }));
  if (!usable) return core::Fail(InvalidLink());
  return {};
}

core::Result<Person> AccountService::ConsumeLink(Transaction& tx, std::string_view token,
                                                 LinkPurpose purpose) {
  if (token.empty() || token.size() > 128) return core::Fail(InvalidLink());
  GPUWERK_ASSIGN_OR_RETURN(
      auto person_id, LinkTokenTable::Consume(tx, TokenHash(token), purpose, clock_.NowUnix()));
  if (!person_id) return core::Fail(InvalidLink());
  GPUWERK_ASSIGN_OR_RETURN(auto row, PersonTable::Find(tx, *person_id));
  if (!row) return core::Fail(InvalidLink());
  return row->person;
}

core::Result<SignIn> AccountService::ConsumeMagicLink(std::string_view token,
                                                      const Caller& caller) {
  return db_.Write([&](Transaction& tx) -> core::Result<SignIn> {
    GPUWERK_ASSIGN_OR_RETURN(Person person, ConsumeLink(tx, token, LinkPurpose::kMagicLink));
    if (!person.email_proven_at) {
      // The link proves the mailbox: its holder claims the unproven account, whose password
      // (set by whoever signed up) goes.
      GPUWERK_TRY(Claim(tx, person, "", caller));
      person.has_password = false;
      person.email_proven_at = clock_.NowUnix();
    }
    return StartSignIn(tx, person, caller, "magic_link");
  });
}

core::Result<Person> AccountService::ResetPassword(std::string_view token,
                                                   std::string_view new_password,
                                                   const Caller& caller) {
  GPUWERK_TRY(PasswordHasher::CheckPolicy(new_password));
  // A link that cannot work is refused before any hashing.
  GPUWERK_TRY(CheckLinkUsable(token, {LinkPurpose::kPasswordReset}));
  GPUWERK_ASSIGN_OR_RETURN(std::string hash, hasher_.Hash(new_password));
  return db_.Write([&](Transaction& tx) -> core::Result<Person> {
    GPUWERK_ASSIGN_OR_RETURN(Person person, ConsumeLink(tx, token, LinkPurpose::kPasswordReset));
    // A reset proves the mailbox too: on an unproven account it is a claim.
    GPUWERK_ASSIGN_OR_RETURN(Claimed claimed, Claim(tx, person, hash, caller));
    GPUWERK_TRY(audit::RecordAudit(tx, clock_, rng_,
                                   {.actor_id = person.id,
                                    .action = "person.password_reset",
                                    .target = person.id,
                                    .source_address = caller.address,
                                    .detail = {{"api_tokens_revoked", claimed.api_tokens}}}));
    person.has_password = true;
    if (!person.email_proven_at) person.email_proven_at = clock_.NowUnix();
    return person;
  });
}

core::Result<SignIn> AccountService::ProveAddress(std::string_view token,
                                                  std::string_view new_password,
                                                  const Caller& caller) {
  GPUWERK_TRY(PasswordHasher::CheckPolicy(new_password));
  // A link that cannot work is refused before any hashing.
  GPUWERK_TRY(CheckLinkUsable(token, {LinkPurpose::kAddressProof, LinkPurpose::kInvite}));
  GPUWERK_ASSIGN_OR_RETURN(std::string hash, hasher_.Hash(new_password));
  return db_.Write([&](Transaction& tx) -> core::Result<SignIn> {
    // A sign-up's link or an invitation: either proves the address.
    auto proof = ConsumeLink(tx, token, LinkPurpose::kAddressProof);
    if (!proof && proof.error().api_code == "invalid_link") {
      proof = ConsumeLink(tx, token, LinkPurpose::kInvite);
    }
    if (!proof) return std::unexpected(proof.error());
    Person person = std::move(*proof);
    // Audited as person.address_proven by Claim.
    GPUWERK_TRY(Claim(tx, person, hash, caller));
    person.has_password = true;
    if (!person.email_proven_at) person.email_proven_at = clock_.NowUnix();
    return StartSignIn(tx, person, caller, "address_proof");
  });
}

core::Result<int64_t> AccountService::Invite(const Principal& by, std::string_view email,
                                             const Caller& caller) {
  GPUWERK_ASSIGN_OR_RETURN(EmailAddress address, ParseEmailAddress(email));
  const int64_t now = clock_.NowUnix();
  GPUWERK_TRY(db_.Write([&](Transaction& tx) -> core::Result<void> {
    Person person{.id = core::NewId(rng_, "per"),
                  .email = address.display,
                  .is_operator = false,
                  .has_password = false,
                  .created_at = now};
    GPUWERK_ASSIGN_OR_RETURN(bool created,
                             PersonTable::InsertUnlessEmailTaken(
                                 tx, {.person = person, .email_norm = address.normalised}));
    if (!created) {
      GPUWERK_ASSIGN_OR_RETURN(auto existing, PersonTable::FindByEmail(tx, address.normalised));
      if (!existing) return core::Internal("a taken address has no account");
      if (existing->person.email_proven_at) {
        return core::Fail(ErrorCode::kAlreadyExists, "account_exists",
                          "This address already has an account; its owner can sign in.");
      }
      person = existing->person;
    }
    GPUWERK_TRY(IssueLink(tx, person, LinkPurpose::kInvite));
    return audit::RecordAudit(tx, clock_, rng_,
                              {.actor_id = by.person_id,
                               .action = "person.invite",
                               .target = person.id,
                               .source_address = caller.address,
                               .detail = {{"email", address.display}}});
  }));
  if (mail_enqueued_) mail_enqueued_();
  return now + options_.invite_link_lifetime.count();
}

core::Result<AccountService::Claimed> AccountService::Claim(Transaction& tx, const Person& person,
                                                            const std::string& password_hash,
                                                            const Caller& caller) {
  Claimed out;
  GPUWERK_TRY(PersonTable::SetPasswordHash(tx, person.id, password_hash));
  GPUWERK_ASSIGN_OR_RETURN(out.newly_proven,
                           PersonTable::MarkEmailProven(tx, person.id, clock_.NowUnix()));
  GPUWERK_ASSIGN_OR_RETURN(out.api_tokens, EndCredentials(tx, person.id, Principal{}));
  if (out.newly_proven && options_.remove_ssh_keys) {
    GPUWERK_ASSIGN_OR_RETURN(out.ssh_keys, options_.remove_ssh_keys(tx, person.id));
  }
  GPUWERK_TRY(
      limiter_.Clear(tx, options_.sign_in_failures_per_account.scope,
                     AccountFromSource(ParseEmailAddress(person.email)->normalised, caller)));
  if (out.newly_proven) {
    GPUWERK_TRY(audit::RecordAudit(
        tx, clock_, rng_,
        {.actor_id = person.id,
         .action = "person.address_proven",
         .target = person.id,
         .source_address = caller.address,
         .detail = {{"api_tokens_revoked", out.api_tokens}, {"ssh_keys_removed", out.ssh_keys}}}));
  }
  return out;
}

core::Result<int64_t> AccountService::EndCredentials(Transaction& tx, const std::string& person_id,
                                                     const Principal& keep) {
  const bool by_session = keep.via == CredentialKind::kSignInSession;
  GPUWERK_TRY(SignInSessionTable::DeleteAllOf(tx, person_id, by_session ? keep.credential_id : ""));
  GPUWERK_TRY(LinkTokenTable::VoidUnused(tx, person_id));
  return ApiTokenTable::DeleteAllOf(tx, person_id, by_session ? "" : keep.credential_id);
}

core::Result<void> AccountService::ChangePassword(const Principal& who,
                                                  std::string_view current_password,
                                                  std::string_view new_password,
                                                  const Caller& caller) {
  GPUWERK_TRY(PasswordHasher::CheckPolicy(new_password));
  // Limits and the stored hash first, so a locked-out caller costs no hashing.
  GPUWERK_ASSIGN_OR_RETURN(PersonRow row, db_.Read([&](Transaction& tx) -> core::Result<PersonRow> {
    GPUWERK_ASSIGN_OR_RETURN(auto found, PersonTable::Find(tx, who.person_id));
    if (!found) return core::Fail(Unauthenticated());
    GPUWERK_TRY(CheckSignInLimits(tx, found->email_norm, caller));
    return std::move(*found);
  }));
  bool ok = false;
  if (!row.password_hash.empty()) {
    GPUWERK_ASSIGN_OR_RETURN(ok, hasher_.Verify(row.password_hash, current_password));
  }
  std::string hash;
  if (ok) {
    GPUWERK_ASSIGN_OR_RETURN(hash, hasher_.Hash(new_password));
  }
  GPUWERK_ASSIGN_OR_RETURN(bool changed, db_.Write([&](Transaction& tx) -> core::Result<bool> {
    if (!ok) {
      GPUWERK_TRY(RecordSignInFailure(tx, row.email_norm, who.person_id, caller));
      return false;
    }
    GPUWERK_TRY(PersonTable::SetPasswordHash(tx, who.person_id, hash));
    GPUWERK_ASSIGN_OR_RETURN(int64_t tokens, EndCredentials(tx, who.person_id, who));
    GPUWERK_TRY(outbox_.Enqueue(
        tx, PasswordChangedMail(row.person.email, caller.address, options_.public_url + "/")));
    GPUWERK_TRY(audit::RecordAudit(tx, clock_, rng_,
                                   {.actor_id = who.person_id,
                                    .action = "person.password_change",
                                    .target = who.person_id,
                                    .source_address = caller.address,
                                    .detail = {{"api_tokens_revoked", tokens}}}));
    return true;
  }));
  if (!changed) return core::Fail(InvalidCredentials());
  if (mail_enqueued_) mail_enqueued_();
  return {};
}

core::Result<Principal> AccountService::AuthenticateSession(std::string_view session_token) {
  return db_.Read([&](Transaction& tx) { return AuthenticateSession(tx, session_token); });
}

core::Result<Principal> AccountService::AuthenticateSession(Transaction& tx,
                                                            std::string_view session_token) {
  if (session_token.empty() || session_token.size() > 128) return core::Fail(Unauthenticated());
  std::string hash = TokenHash(session_token);
  GPUWERK_ASSIGN_OR_RETURN(auto session,
                           SignInSessionTable::FindUnexpired(tx, hash, clock_.NowUnix()));
  if (!session) return core::Fail(Unauthenticated());
  GPUWERK_ASSIGN_OR_RETURN(auto row, PersonTable::Find(tx, session->person_id));
  if (!row) return core::Fail(Unauthenticated());
  return Principal{.person_id = std::move(row->person.id),
                   .email = std::move(row->person.email),
                   .is_operator = row->person.is_operator,
                   .email_proven = row->person.email_proven_at.has_value(),
                   .via = CredentialKind::kSignInSession,
                   .credential_id = std::move(hash)};
}

core::Result<Principal> AccountService::AuthenticateApiToken(std::string_view token) {
  GPUWERK_ASSIGN_OR_RETURN(
      Principal who, db_.Read([&](Transaction& tx) { return AuthenticateApiToken(tx, token); }));
  RecordApiTokenUse(who);
  return who;
}

core::Result<Principal> AccountService::AuthenticateApiToken(Transaction& tx,
                                                             std::string_view token) {
  if (!token.starts_with(kApiTokenPrefix) || token.size() > 128) {
    return core::Fail(Unauthenticated());
  }
  // The token and its person in one statement (every API-token request comes here).
  GPUWERK_ASSIGN_OR_RETURN(auto found, ApiTokenTable::FindHolder(tx, TokenHash(token)));
  if (!found) return core::Fail(Unauthenticated());
  if (found->expires_at && *found->expires_at <= clock_.NowUnix()) {
    return core::Fail(Unauthenticated());
  }
  return Principal{.person_id = std::move(found->person_id),
                   .email = std::move(found->email),
                   .is_operator = found->is_operator,
                   .email_proven = found->email_proven,
                   .via = CredentialKind::kApiToken,
                   .credential_id = std::move(found->token_id),
                   .token_last_used_at = found->last_used_at.value_or(0)};
}

void AccountService::RecordApiTokenUse(const Principal& who) {
  if (who.via != CredentialKind::kApiToken) return;
  const int64_t now = clock_.NowUnix();
  if (now - who.token_last_used_at < 60) return;
  auto touched =
      db_.Write([&](Transaction& tx) { return ApiTokenTable::Touch(tx, who.credential_id, now); });
  if (!touched) spdlog::warn("auth: could not record API token use: {}", touched.error().message);
}

core::Result<std::pair<ApiToken, std::string>> AccountService::CreateApiToken(
    const Principal& who, std::string_view name, std::optional<int64_t> expires_at,
    const Caller& caller) {
  GPUWERK_ASSIGN_OR_RETURN(std::string clean, ValidateTokenName(name));
  const int64_t now = clock_.NowUnix();
  if (expires_at && *expires_at <= now) {
    return core::Fail(core::Error(ErrorCode::kInvalidArgument, "invalid_expiry",
                                  "expires_at must be a time in the future.")
                          .WithDetail("field", "expires_at"));
  }
  const std::string secret = kApiTokenPrefix + core::RandomToken(rng_);
  ApiToken token{.id = core::NewId(rng_, "tok"),
                 .name = clean,
                 .prefix = secret.substr(0, 10),
                 .created_at = now,
                 .expires_at = expires_at};
  GPUWERK_TRY(db_.Write([&](Transaction& tx) -> core::Result<void> {
    auto inserted = ApiTokenTable::Insert(
        tx, {.token = token, .person_id = who.person_id, .token_hash = TokenHash(secret)});
    if (!inserted) {
      if (inserted.error().code == ErrorCode::kAlreadyExists) {
        return core::Fail(ErrorCode::kAlreadyExists, "name_taken",
                          "You already have an API token with this name.");
      }
      return std::unexpected(inserted.error());
    }
    GPUWERK_TRY(
        outbox_.Enqueue(tx, ApiTokenCreatedMail(who.email, token.name, token.prefix,
                                                expires_at ? core::FormatRfc3339(*expires_at) : "",
                                                caller.address, options_.public_url + "/")));
    return audit::RecordAudit(tx, clock_, rng_,
                              {.actor_id = who.person_id,
                               .action = "api_token.create",
                               .target = token.id,
                               .source_address = caller.address,
                               .detail = {{"name", token.name}}});
  }));
  if (mail_enqueued_) mail_enqueued_();
  return std::make_pair(token, secret);
}

core::Result<std::vector<ApiToken>> AccountService::ListApiTokens(const Principal& who) {
  return db_.Read([&](Transaction& tx) { return ApiTokenTable::ListOf(tx, who.person_id); });
}

core::Result<void> AccountService::DeleteApiToken(const Principal& who, std::string_view id,
                                                  const Caller& caller) {
  auto deleted_token = db_.Write([&](Transaction& tx) -> core::Result<void> {
    GPUWERK_ASSIGN_OR_RETURN(bool deleted,
                             ApiTokenTable::Delete(tx, who.person_id, std::string(id)));
    if (!deleted) return core::NotFound("API token");
    return audit::RecordAudit(tx, clock_, rng_,
                              {.actor_id = who.person_id,
                               .action = "api_token.delete",
                               .target = std::string(id),
                               .source_address = caller.address});
  });
  // A relay holding this token learns at once that it was revoked (its watch stream ends).
  if (deleted_token && access_changes_ != nullptr) {
    access_changes_->Publish({.person_ids = {who.person_id}, .reason = "API token deleted"});
  }
  return deleted_token;
}

core::Result<PersonPage> AccountService::ListPeople(std::string_view before,
                                                    std::string_view after) {
  GPUWERK_ASSIGN_OR_RETURN(core::KeysetQuery query, core::ParseKeysetQuery(before, after));
  return db_.Read([&](Transaction& tx) -> core::Result<PersonPage> {
    PersonPage out;
    GPUWERK_ASSIGN_OR_RETURN(out.total, PersonTable::CountAll(tx));
    out.pages = out.total <= 0 ? 1 : (out.total + kPeoplePageSize - 1) / kPeoplePageSize;
    GPUWERK_ASSIGN_OR_RETURN(auto rows, PersonTable::PageAll(tx, query, kPeoplePageSize));
    if (query.after && static_cast<int64_t>(rows.size()) < kPeoplePageSize) {
      // Fewer newer rows than a page: the newest page, so that pages keep their size.
      GPUWERK_ASSIGN_OR_RETURN(rows, PersonTable::PageAll(tx, {}, kPeoplePageSize));
    }
    if (rows.empty()) return out;
    const core::KeysetKey first{.at = rows.front().person.created_at, .id = rows.front().person.id};
    const core::KeysetKey last{.at = rows.back().person.created_at, .id = rows.back().person.id};
    GPUWERK_ASSIGN_OR_RETURN(int64_t newer, PersonTable::CountAll(tx, first));
    out.page = newer / kPeoplePageSize + 1;
    if (newer > 0) out.prev = core::FormatKeyset(first);
    if (newer + static_cast<int64_t>(rows.size()) < out.total) out.next = core::FormatKeyset(last);
    for (auto& r : rows) out.items.push_back(std::move(r.person));
    return out;
  });
}

core::Result<Person> AccountService::SetOperator(const Principal& by, std::string_view email,
                                                 bool is_operator, const Caller& caller) {
  GPUWERK_ASSIGN_OR_RETURN(EmailAddress address, ParseEmailAddress(email));
  return db_.Write([&](Transaction& tx) -> core::Result<Person> {
    GPUWERK_ASSIGN_OR_RETURN(auto row, PersonTable::FindByEmail(tx, address.normalised));
    if (!row) return core::NotFound("person");
    Person person = row->person;
    if (person.is_operator == is_operator) return person;
    GPUWERK_ASSIGN_OR_RETURN(bool changed, PersonTable::SetOperator(tx, person.id, is_operator));
    if (!changed) {
      return core::Fail(ErrorCode::kFailedPrecondition, "last_operator",
                        "This is the only operator: make someone else an operator first, or "
                        "nobody could operate the platform.");
    }
    person.is_operator = is_operator;
    GPUWERK_TRY(
        audit::RecordAudit(tx, clock_, rng_,
                           {.actor_id = by.person_id,
                            .action = is_operator ? "person.set_operator" : "person.clear_operator",
                            .target = person.id,
                            .source_address = caller.address,
                            .detail = {{"email", person.email}, {"was_operator", !is_operator}}}));
    return person;
  });
}

core::Result<Person> AccountService::GetPerson(std::string_view person_id) {
  return db_.Read([&](Transaction& tx) -> core::Result<Person> {
    GPUWERK_ASSIGN_OR_RETURN(auto row, PersonTable::Find(tx, std::string(person_id)));
    if (!row) return core::NotFound("person");
    return row->person;
  });
}

core::Result<bool> AccountService::EnsureOperator(std::string_view email,
                                                  std::string_view password) {
  GPUWERK_ASSIGN_OR_RETURN(EmailAddress address, ParseEmailAddress(email));
  GPUWERK_TRY(PasswordHasher::CheckPolicy(password));
  GPUWERK_ASSIGN_OR_RETURN(std::string hash, hasher_.Hash(password));
  return db_.Write([&](Transaction& tx) -> core::Result<bool> {
    GPUWERK_ASSIGN_OR_RETURN(bool created, PersonTable::InsertUnlessEmailTaken(
                                               tx, {.person = {.id = core::NewId(rng_, "per"),
                                                               .email = address.display,
                                                               .is_operator = true,
                                                               .has_password = true,
                                                               .created_at = clock_.NowUnix(),
                                                               // The operator's address counts
                                                               // as proven: the operator chose it.
                                                               .email_proven_at = clock_.NowUnix()},
                                                    .email_norm = address.normalised,
                                                    .password_hash = hash}));
    if (created) {
      GPUWERK_TRY(audit::RecordAudit(tx, clock_, rng_,
                                     {.actor_id = "",
                                      .action = "person.create_operator",
                                      .target = address.normalised,
                                      .source_address = "system"}));
    }
    return created;
  });
}

core::Result<bool> AccountService::PasswordMatches(std::string_view email,
                                                   std::string_view password) {
  GPUWERK_ASSIGN_OR_RETURN(EmailAddress address, ParseEmailAddress(email));
  GPUWERK_ASSIGN_OR_RETURN(
      std::string hash, db_.Read([&](Transaction& tx) -> core::Result<std::string> {
        GPUWERK_ASSIGN_OR_RETURN(auto row, PersonTable::FindByEmail(tx, address.normalised));
        return row ? row->password_hash : std::string();
      }));
  if (hash.empty()) return false;
  return hasher_.Verify(hash, password);
}

}  // namespace gpuwerk::auth

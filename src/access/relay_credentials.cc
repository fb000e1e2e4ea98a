#include "access/relay_credentials.h"

#include "audit/audit_log.h"
#include "auth/account_service.h"

namespace gpuwerk::access {
namespace {

/// How often a credential's use is written (last_used_at), in seconds: a relay asks several
/// times a second at busy moments, and a minute is what the listing shows.
constexpr int64_t kTouchEverySeconds = 60;

/// The characters of the secret kept as its prefix: "gwr_" and 8 of the random part.
constexpr size_t kPrefixLength = 12;

core::Result<RelayCredential> Unauthenticated() {
  return core::Fail(core::ErrorCode::kUnauthenticated, "unauthenticated",
                    "A valid relay credential is required (gpuwerk admin relays add NAME).");
}

nlohmann::json Detail(const RelayCredential& c) { return {{"name", c.name}, {"prefix", c.prefix}}; }

}  // namespace

bool LooksLikeRelayCredential(std::string_view bearer) {
  return bearer.starts_with(kRelayCredentialPrefix);
}

core::Result<void> CheckRelayName(std::string_view name) {
  auto invalid = [] {
    return core::InvalidArgument(
        "invalid_name",
        "A relay name is 1 to 128 characters of a-z, 0-9, '.', '_' and '-', starting with a "
        "letter or digit (e.g. edge-1 or relay-1.example.com).");
  };
  if (name.empty() || name.size() > kMaxRelayNameLength) return invalid();
  for (size_t i = 0; i < name.size(); ++i) {
    const char c = name[i];
    const bool alnum = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
    if (!alnum && (i == 0 || (c != '.' && c != '_' && c != '-'))) return invalid();
  }
  if (name == kLocalRelayName) {
    return core::InvalidArgument(
        "reserved_name",
        "The relay name 'local' belongs to gpuwerk up's own relay; choose another.");
  }
  return {};
}

RelayCredentials::Secret RelayCredentials::NewSecret() {
  Secret s;
  s.secret = std::string(kRelayCredentialPrefix) + core::RandomToken(rng_);
  s.hash = auth::TokenHash(s.secret);
  s.prefix = s.secret.substr(0, kPrefixLength);
  return s;
}

core::Result<NewRelayCredential> RelayCredentials::Add(const std::string& actor_id,
                                                       std::string_view name,
                                                       const std::string& source_address) {
  GPUWERK_TRY(CheckRelayName(name));
  const Secret secret = NewSecret();
  NewRelayCredential out{.credential = {.id = core::NewId(rng_, "rly"),
                                        .name = std::string(name),
                                        .prefix = secret.prefix,
                                        .created_by = actor_id,
                                        .created_at = clock_.NowUnix()},
                         .secret = secret.secret};
  auto taken = [&] {
    return core::Fail(core::Error(core::ErrorCode::kAlreadyExists, "name_taken",
                                  "A relay by that name is registered already; revoke it first "
                                  "(gpuwerk admin relays revoke NAME) or choose another name.")
                          .WithDetail("name", out.credential.name));
  };
  auto added = db_.Write([&](store::Transaction& tx) -> core::Result<void> {
    GPUWERK_ASSIGN_OR_RETURN(auto clash, RelayCredentialTable::FindByName(tx, out.credential.name));
    if (clash) return taken();
    GPUWERK_TRY(RelayCredentialTable::Insert(
        tx, {.credential = out.credential, .token_hash = secret.hash}));
    return audit::RecordAudit(tx, clock_, rng_,
                              {.actor_id = actor_id,
                               .action = "relay_credential.add",
                               .target = out.credential.id,
                               .source_address = source_address,
                               .detail = Detail(out.credential)});
  });
  if (!added) {
    // Two operators adding one name at once: the loser's insert meets the unique name.
    if (store::IsUniqueViolation(added.error())) return taken();
    return std::unexpected(added.error());
  }
  return out;
}

core::Result<NewRelayCredential> RelayCredentials::IssueLocal(const std::string& source_address) {
  const Secret secret = NewSecret();
  return db_.Write([&](store::Transaction& tx) -> core::Result<NewRelayCredential> {
    const int64_t now = clock_.NowUnix();
    NewRelayCredential out{.credential = {}, .secret = secret.secret};
    GPUWERK_ASSIGN_OR_RETURN(auto existing,
                             RelayCredentialTable::FindByName(tx, std::string(kLocalRelayName)));
    std::string action;
    if (existing) {
      out.credential = std::move(existing->credential);
      out.credential.prefix = secret.prefix;
      out.credential.created_at = now;
      out.credential.last_used_at.reset();
      GPUWERK_TRY(
          RelayCredentialTable::Replace(tx, out.credential.id, secret.hash, secret.prefix, now));
      action = "relay_credential.rotate";
    } else {
      out.credential = {.id = core::NewId(rng_, "rly"),
                        .name = std::string(kLocalRelayName),
                        .prefix = secret.prefix,
                        .created_by = "",
                        .created_at = now};
      GPUWERK_TRY(RelayCredentialTable::Insert(
          tx, {.credential = out.credential, .token_hash = secret.hash}));
      action = "relay_credential.add";
    }
    GPUWERK_TRY(audit::RecordAudit(tx, clock_, rng_,
                                   {.actor_id = "",
                                    .action = action,
                                    .target = out.credential.id,
                                    .source_address = source_address,
                                    .detail = Detail(out.credential)}));
    return out;
  });
}

core::Result<RelayCredentialPage> RelayCredentials::List(int page) {
  GPUWERK_TRY(sched::CheckPage(page));
  return db_.Read([&](store::Transaction& tx) -> core::Result<RelayCredentialPage> {
    GPUWERK_ASSIGN_OR_RETURN(
        auto listed, RelayCredentialTable::Page(tx, sched::kPageSize, sched::PageOffset(page)));
    return RelayCredentialPage{.items = std::move(listed.first),
                               .page = page,
                               .pages = sched::PageCount(listed.second),
                               .total = listed.second};
  });
}

core::Result<RelayCredential> RelayCredentials::Revoke(const std::string& actor_id,
                                                       std::string_view name,
                                                       const std::string& source_address) {
  return db_.Write([&](store::Transaction& tx) -> core::Result<RelayCredential> {
    GPUWERK_ASSIGN_OR_RETURN(auto found, RelayCredentialTable::FindByName(tx, std::string(name)));
    if (!found) return core::NotFound("Relay");
    GPUWERK_TRY(RelayCredentialTable::Delete(tx, found->credential.id));
    GPUWERK_TRY(audit::RecordAudit(tx, clock_, rng_,
                                   {.actor_id = actor_id,
                                    .action = "relay_credential.revoke",
                                    .target = found->credential.id,
                                    .source_address = source_address,
                                    .detail = Detail(found->credential)}));
    return std::move(found->credential);
  });
}

core::Result<RelayCredential> RelayCredentials::Authenticate(std::string_view secret) {
  // Bounded before it is hashed: a secret is "gwr_" and 43 characters.
  if (!LooksLikeRelayCredential(secret) || secret.size() > 256) return Unauthenticated();
  const std::string hash = auth::TokenHash(secret);
  GPUWERK_ASSIGN_OR_RETURN(auto found, db_.Read([&](store::Transaction& tx) {
    return RelayCredentialTable::FindByHash(tx, hash);
  }));
  if (!found) return Unauthenticated();
  RelayCredential credential = std::move(found->credential);
  const int64_t now = clock_.NowUnix();
  if (!credential.last_used_at || now - *credential.last_used_at >= kTouchEverySeconds) {
    // Only a note for the listing: a failure to write it never refuses the relay.
    auto touched = db_.Write([&](store::Transaction& tx) {
      return RelayCredentialTable::Touch(tx, credential.id, now);
    });
    if (touched) credential.last_used_at = now;
  }
  return credential;
}

}  // namespace gpuwerk::access

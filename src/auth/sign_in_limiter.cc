#include "auth/sign_in_limiter.h"

namespace gpuwerk::auth {

core::Result<void> SignInLimiter::Check(store::Transaction& tx, const std::string& email_norm,
                                        const std::string& address) {
  const int64_t now = clock_.NowUnix();
  const int64_t since = now - limits_.window.count();
  struct Subject {
    const char* scope;
    const std::string& value;
    int limit;
  };
  for (const Subject& s : {Subject{"account", email_norm, limits_.per_account},
                           Subject{"address", address, limits_.per_address}}) {
    GPUWERK_ASSIGN_OR_RETURN(auto row, tx.QueryOne("SELECT COUNT(*), MIN(at) FROM sign_in_failures "
                                                   "WHERE scope = ? AND subject = ? AND at > ?",
                                                   {std::string(s.scope), s.value, since}));
    if (row && row->Int(0) >= s.limit) {
      int64_t retry = std::max<int64_t>(1, row->Int(1) + limits_.window.count() - now + 1);
      return core::Fail(core::Error(core::ErrorCode::kResourceExhausted, "rate_limited",
                                    "Too many failed sign-ins. Try again in " +
                                        std::to_string(retry) + " seconds, or use a magic link.")
                            .WithDetail("retry_after_seconds", retry));
    }
  }
  return {};
}

core::Result<void> SignInLimiter::RecordFailure(store::Transaction& tx,
                                                const std::string& email_norm,
                                                const std::string& address) {
  const int64_t now = clock_.NowUnix();
  GPUWERK_TRY(
      tx.Exec("DELETE FROM sign_in_failures WHERE at <= ?", {now - limits_.window.count()}));
  GPUWERK_TRY(tx.Exec("INSERT INTO sign_in_failures (scope, subject, at) VALUES (?, ?, ?)",
                      {std::string("account"), email_norm, now}));
  GPUWERK_TRY(tx.Exec("INSERT INTO sign_in_failures (scope, subject, at) VALUES (?, ?, ?)",
                      {std::string("address"), address, now}));
  return {};
}

core::Result<void> SignInLimiter::Reset(store::Transaction& tx, const std::string& email_norm) {
  GPUWERK_TRY(tx.Exec("DELETE FROM sign_in_failures WHERE scope = ? AND subject = ?",
                      {std::string("account"), email_norm}));
  return {};
}

}  // namespace gpuwerk::auth

#pragma once

#include <optional>
#include <string>
#include <vector>

#include "auth/principal.h"
#include "core/error.h"
#include "core/keyset.h"
#include "store/database.h"

namespace gpuwerk::auth {

/// One row of `persons` (migrations 1 and 9) as stored: the account and its password hash.
struct PersonRow {
  Person person;
  std::string email_norm;     ///< the lowercased, trimmed email accounts are matched on (R-1)
  std::string password_hash;  ///< argon2id string; "" when the account has no password
};

/// The `persons` table: the one place that holds its SQL. Rows map to PersonRow in one place and
/// are read by column name. Every function works inside the caller's transaction; errors are the
/// store's. Stateless.
class PersonTable {
 public:
  PersonTable() = delete;

  /// Person `id`; nullopt when absent.
  static core::Result<std::optional<PersonRow>> Find(store::Transaction& tx, const std::string& id);
  /// The person whose normalised email is `email_norm`; nullopt when none.
  static core::Result<std::optional<PersonRow>> FindByEmail(store::Transaction& tx,
                                                            const std::string& email_norm);
  /// The email (as the person typed it) of person `id`; nullopt when absent. For other modules
  /// that mail or show a person (queue mails, relay session lists).
  static core::Result<std::optional<std::string>> Email(store::Transaction& tx,
                                                        const std::string& id);
  /// Every person, newest first (created_at, id descending), keyset paged by `query`
  /// (core/keyset.h): older than `before`, else the `limit` nearest newer than `after` (still
  /// answered newest first), else the newest `limit`.
  static core::Result<std::vector<PersonRow>> PageAll(store::Transaction& tx,
                                                      const core::KeysetQuery& query,
                                                      int64_t limit);
  /// How many people there are; with `newer_than`, only those newer than that key.
  static core::Result<int64_t> CountAll(store::Transaction& tx,
                                        const std::optional<core::KeysetKey>& newer_than = {});
  /// How many people are operators.
  static core::Result<int64_t> CountOperators(store::Transaction& tx);
  /// Makes person `id` an operator (`is_operator` true) or not. Clearing the flag of the last
  /// operator changes nothing and answers false (the check and the change are one statement);
  /// true otherwise, also when the flag already had that value.
  static core::Result<bool> SetOperator(store::Transaction& tx, const std::string& id,
                                        bool is_operator);
  /// Stores a new person (`row.person.has_password` is taken from `row.password_hash`). Errors:
  /// the store's unique violation (kAlreadyExists) when the id or
  /// email_norm is taken.
  static core::Result<void> Insert(store::Transaction& tx, const PersonRow& row);
  /// Stores a new person unless one with its email_norm exists. True when it stored it.
  static core::Result<bool> InsertUnlessEmailTaken(store::Transaction& tx, const PersonRow& row);
  /// Sets the password hash of person `id`; "" removes the password (no password sign-in).
  static core::Result<void> SetPasswordHash(store::Transaction& tx, const std::string& id,
                                            const std::string& password_hash);
  /// Marks person `id`'s address proven at `at` (Unix seconds) unless it already is. True when
  /// this call proved it (the account was unproven until now).
  static core::Result<bool> MarkEmailProven(store::Transaction& tx, const std::string& id,
                                            int64_t at);
};

}  // namespace gpuwerk::auth

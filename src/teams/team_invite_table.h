#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "store/database.h"

namespace gpuwerk::teams {

/// One row of `team_invites` (migration 12): an owner's invitation of an email address to a
/// team. `state` is "pending" until it is accepted ("accepted") or revoked ("revoked"); a
/// pending invite past `expires_at` is as good as gone. The mailed link's secret is stored only
/// as its SHA-256 (`token_hash`); a resend replaces it.
struct InviteRow {
  std::string id;  ///< "tinv_…"
  std::string team_id;
  std::string email;       ///< as the owner typed it (the mail goes there)
  std::string email_norm;  ///< trimmed, lowercased: what an accepting account must match
  std::string token_hash;  ///< hex SHA-256 of the link's secret
  std::string invited_by;  ///< person id
  int64_t created_at = 0;  ///< Unix seconds
  int64_t sent_at = 0;     ///< the latest mail, Unix seconds
  int64_t expires_at = 0;  ///< Unix seconds
  std::string state = "pending";
  std::optional<int64_t> ended_at;  ///< when accepted or revoked
  std::string accepted_by;          ///< person id; "" unless accepted
};

/// The `team_invites` table: the one place that holds its SQL. Every function works inside the
/// caller's transaction; errors are the store's. Stateless.
class TeamInviteTable {
 public:
  TeamInviteTable() = delete;

  /// Stores a new pending invite. Errors: the store's constraint violation when the team has a
  /// pending invite for the address already (index team_invites_one_pending).
  static core::Result<void> Insert(store::Transaction& tx, const InviteRow& row);
  /// Invite `id`; nullopt when absent.
  static core::Result<std::optional<InviteRow>> Find(store::Transaction& tx, const std::string& id);
  /// The invite whose link secret hashes to `token_hash`; nullopt when none.
  static core::Result<std::optional<InviteRow>> FindByTokenHash(store::Transaction& tx,
                                                                const std::string& token_hash);
  /// The team's pending invite (expired or not) for the lowercased address; nullopt when none.
  static core::Result<std::optional<InviteRow>> FindPending(store::Transaction& tx,
                                                            const std::string& team_id,
                                                            const std::string& email_norm);
  /// The team's pending invites that have not expired at `now`, oldest first.
  static core::Result<std::vector<InviteRow>> ListPending(store::Transaction& tx,
                                                          const std::string& team_id, int64_t now);
  /// Gives pending invite `id` a new link (its hash), sent at `sent_at`, expiring at
  /// `expires_at`; the old link stops working. False when it is no longer pending.
  static core::Result<bool> Resend(store::Transaction& tx, const std::string& id,
                                   const std::string& token_hash, int64_t sent_at,
                                   int64_t expires_at);
  /// Ends pending invite `id` at `at` as `state` ("accepted", with `accepted_by`, or
  /// "revoked"). False when it was not pending: of concurrent enders exactly one wins.
  static core::Result<bool> End(store::Transaction& tx, const std::string& id,
                                std::string_view state, int64_t at, const std::string& accepted_by);
};

}  // namespace gpuwerk::teams

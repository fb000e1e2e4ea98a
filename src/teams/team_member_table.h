#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "store/database.h"

namespace gpuwerk::teams {

/// A member's role (docs/teams.md "Roles"): owners manage the team (invite, remove, change roles,
/// the payment method, everyone's usage); members launch billed to the team and see their own
/// usage only. There is no third role.
enum class Role { kOwner, kMember };

/// "owner" or "member".
std::string_view RoleName(Role role);
/// The role named `name` ("owner", "member"); nullopt for anything else.
std::optional<Role> ParseRole(std::string_view name);

/// One row of `team_members` (migration 12): one membership of a person in a team, from joining
/// until it ended (left or removed). Ended rows are kept (usage, audit).
struct MembershipRow {
  std::string id;  ///< "tmm_…"
  std::string team_id;
  std::string person_id;
  Role role = Role::kMember;
  int64_t joined_at = 0;            ///< Unix seconds
  std::optional<int64_t> ended_at;  ///< Unix seconds; nullopt while active
  std::string ended_how;            ///< "left" or "removed"; "" while active
  std::string ended_by;             ///< person id of who removed them; "" otherwise
};

/// The `team_members` table: the one place that holds its SQL. Every function works inside the
/// caller's transaction; errors are the store's. Stateless.
class TeamMemberTable {
 public:
  TeamMemberTable() = delete;

  /// Stores a new active membership. Errors: the store's constraint violation when the person
  /// already has an active membership (index team_members_one_active).
  static core::Result<void> Insert(store::Transaction& tx, const MembershipRow& row);
  /// The person's active membership; nullopt when they are in no team.
  static core::Result<std::optional<MembershipRow>> ActiveOf(store::Transaction& tx,
                                                             const std::string& person_id);
  /// The active memberships of `team_id`, oldest first.
  static core::Result<std::vector<MembershipRow>> ListActive(store::Transaction& tx,
                                                             const std::string& team_id);
  /// Every membership of `team_id`, ended ones included, oldest first.
  static core::Result<std::vector<MembershipRow>> ListAll(store::Transaction& tx,
                                                          const std::string& team_id);
  /// How many active owners `team_id` has.
  static core::Result<int64_t> CountOwners(store::Transaction& tx, const std::string& team_id);
  /// Ends active membership `id` at `at` (`how`: "left" or "removed"; `by`: who removed). False
  /// when it was not active.
  static core::Result<bool> End(store::Transaction& tx, const std::string& id, int64_t at,
                                std::string_view how, const std::string& by);
  /// Sets the role of active membership `id`. False when it was not active.
  static core::Result<bool> SetRole(store::Transaction& tx, const std::string& id, Role role);
};

}  // namespace gpuwerk::teams

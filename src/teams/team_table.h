#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "core/error.h"
#include "store/database.h"

namespace gpuwerk::teams {

/// One row of `teams` (migration 12): a team, which is also a billing account.
struct TeamRow {
  std::string id;          ///< "team_…"
  std::string name;        ///< as its creator typed it (ValidateTeamName)
  std::string created_by;  ///< person id of the creator
  int64_t created_at = 0;  ///< Unix seconds
};

/// The `teams` table: the one place that holds its SQL. Every function works inside the
/// caller's transaction; errors are the store's. Stateless.
class TeamTable {
 public:
  TeamTable() = delete;

  /// Stores a new team; `name_norm` is the name lowercased (unique). Errors: the store's
  /// (a constraint violation when the id or name_norm is taken).
  static core::Result<void> Insert(store::Transaction& tx, const TeamRow& row,
                                   const std::string& name_norm);
  /// Team `id`; nullopt when absent.
  static core::Result<std::optional<TeamRow>> Find(store::Transaction& tx, const std::string& id);
  /// The team whose lowercased name is `name_norm`; nullopt when none.
  static core::Result<std::optional<TeamRow>> FindByName(store::Transaction& tx,
                                                         const std::string& name_norm);
};

}  // namespace gpuwerk::teams

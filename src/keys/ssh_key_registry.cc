#include "keys/ssh_key_registry.h"

#include "keys/key_name.h"
#include "keys/public_key.h"
#include "store/audit_log.h"

namespace gpuwerk::keys {
namespace {

constexpr int kPageSize = 15;

SshKey KeyFromRow(const store::Row& r) {
  return SshKey{.id = r.Text(0),
                .name = r.Text(1),
                .type = r.Text(2),
                .bits = static_cast<int>(r.Int(3)),
                .public_key = r.Text(4),
                .fingerprint = r.Text(5),
                .created_at = r.Int(6)};
}

}  // namespace

core::Result<SshKey> SshKeyRegistry::Add(const std::string& person_id, std::string_view name,
                                         std::string_view public_key_text,
                                         const std::string& source_address) {
  GPUWERK_ASSIGN_OR_RETURN(std::string clean_name, ValidateKeyName(name));
  GPUWERK_ASSIGN_OR_RETURN(PublicKey parsed, ParsePublicKey(public_key_text));
  SshKey key{.id = core::NewId(rng_, "key"),
             .name = clean_name,
             .type = parsed.type,
             .bits = parsed.bits,
             .public_key = parsed.Line(),
             .fingerprint = parsed.Fingerprint(),
             .created_at = clock_.NowUnix()};
  GPUWERK_TRY(db_.Write([&](store::Transaction& tx) -> core::Result<void> {
    GPUWERK_ASSIGN_OR_RETURN(
        auto clash, tx.QueryOne("SELECT name, fingerprint FROM ssh_keys WHERE person_id = ? AND "
                                "(name = ? OR fingerprint = ?)",
                                {person_id, key.name, key.fingerprint}));
    if (clash) {
      if (clash->Text(0) == key.name) {
        return core::Fail(core::ErrorCode::kAlreadyExists, "name_taken",
                          "You already have a key named '" + key.name + "'. Pick another name.");
      }
      return core::Fail(
          core::Error(core::ErrorCode::kAlreadyExists, "key_exists",
                      "This key is already on your account as '" + clash->Text(0) + "'.")
              .WithDetail("existing_name", clash->Text(0)));
    }
    GPUWERK_TRY(tx.Exec(
        "INSERT INTO ssh_keys (id, person_id, name, key_type, bits, public_key, fingerprint, "
        "created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        {key.id, person_id, key.name, key.type, static_cast<int64_t>(key.bits), key.public_key,
         key.fingerprint, key.created_at}));
    return store::RecordAudit(tx, clock_, rng_,
                              {.actor_id = person_id,
                               .action = "ssh_key.add",
                               .target = key.id,
                               .source_address = source_address,
                               .detail = {{"name", key.name}, {"fingerprint", key.fingerprint}}});
  }));
  return key;
}

core::Result<SshKeyPage> SshKeyRegistry::List(const std::string& person_id, int page) {
  if (page < 1 || page > 1'000'000) {
    return core::InvalidArgument("invalid_page", "page must be a whole number from 1.");
  }
  return db_.Read([&](store::Transaction& tx) -> core::Result<SshKeyPage> {
    SshKeyPage out;
    out.page = page;
    // One statement: the page and, beside each row, the total (an uncorrelated subquery, run
    // once). Only a page past the end needs a separate count.
    GPUWERK_ASSIGN_OR_RETURN(
        auto rows,
        tx.Query("SELECT id, name, key_type, bits, public_key, fingerprint, created_at, "
                 "(SELECT COUNT(*) FROM ssh_keys WHERE person_id = ?) FROM ssh_keys "
                 "WHERE person_id = ? ORDER BY created_at, id LIMIT ? OFFSET ?",
                 {person_id, person_id, int64_t{kPageSize}, int64_t{(page - 1) * kPageSize}}));
    if (!rows.empty()) {
      out.total = rows.front().Int(7);
    } else {
      GPUWERK_ASSIGN_OR_RETURN(auto count, tx.QueryOne("SELECT COUNT(*) FROM ssh_keys WHERE "
                                                       "person_id = ?",
                                                       {person_id}));
      out.total = count->Int(0);
    }
    out.pages = std::max<int64_t>(1, (out.total + kPageSize - 1) / kPageSize);
    for (const auto& r : rows) out.items.push_back(KeyFromRow(r));
    return out;
  });
}

core::Result<void> SshKeyRegistry::Delete(const std::string& person_id, std::string_view id,
                                          const std::string& source_address) {
  return db_.Write([&](store::Transaction& tx) -> core::Result<void> {
    GPUWERK_ASSIGN_OR_RETURN(
        auto row,
        tx.QueryOne("SELECT name, fingerprint FROM ssh_keys WHERE id = ? AND person_id = ?",
                    {std::string(id), person_id}));
    if (!row) return core::NotFound("SSH key");
    // a key held by a live instance or an open queue entry cannot go; the error names them.
    GPUWERK_ASSIGN_OR_RETURN(
        auto holders, tx.Query("SELECT name FROM instances WHERE ssh_key_id = ? AND person_id = ? "
                               "AND deleted_at IS NULL ORDER BY name",
                               {std::string(id), person_id}));
    GPUWERK_ASSIGN_OR_RETURN(
        auto queued, tx.Query("SELECT id, name, gpu_type FROM queue_entries WHERE ssh_key_id = ? "
                              "AND person_id = ? AND status = 'open' ORDER BY name",
                              {std::string(id), person_id}));
    if (!holders.empty() || !queued.empty()) {
      nlohmann::json names = nlohmann::json::array();
      nlohmann::json entries = nlohmann::json::array();
      std::string list;
      for (const auto& h : holders) {
        names.push_back(h.Text(0));
        list += (list.empty() ? "instance " : ", instance ") + h.Text(0);
      }
      for (const auto& q : queued) {
        entries.push_back({{"id", q.Text(0)}, {"name", q.Text(1)}, {"gpu_type", q.Text(2)}});
        list += (list.empty() ? "" : ", ") + std::string("queue entry ") + q.Text(1) + " (" +
                q.Text(2) + ")";
      }
      return core::Fail(core::Error(core::ErrorCode::kFailedPrecondition, "key_in_use",
                                    "This key is attached to " + list +
                                        "; delete the instances and leave the queue first.")
                            .WithDetail("instances", std::move(names))
                            .WithDetail("queue_entries", std::move(entries)));
    }
    GPUWERK_TRY(tx.Exec("DELETE FROM ssh_keys WHERE id = ? AND person_id = ?",
                        {std::string(id), person_id}));
    return store::RecordAudit(tx, clock_, rng_,
                              {.actor_id = person_id,
                               .action = "ssh_key.delete",
                               .target = std::string(id),
                               .source_address = source_address,
                               .detail = {{"name", row->Text(0)}, {"fingerprint", row->Text(1)}}});
  });
}

}  // namespace gpuwerk::keys

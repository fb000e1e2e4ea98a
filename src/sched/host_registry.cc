#include "sched/host_registry.h"

#include "core/encoding.h"
#include "store/audit_log.h"

namespace gpuwerk::sched {
namespace {

constexpr std::string_view kHostColumns =
    "h.id, h.name, h.gpu_type, h.gpu_required, h.drained, h.created_at, h.last_seen_at, "
    "h.inventory, h.engine_error, h.degraded_reason";

Host HostFromRow(const store::Row& r) {
  Host h{.id = r.Text(0),
         .name = r.Text(1),
         .gpu_type = r.Text(2),
         .gpu_required = r.Int(3) != 0,
         .drained = r.Int(4) != 0,
         .created_at = r.Int(5),
         .last_seen_at = r.OptInt(6),
         .inventory = nlohmann::json::parse(r.Text(7), nullptr, false),
         .engine_error = r.Text(8),
         .degraded_reason = r.Text(9)};
  if (!h.inventory.is_object()) h.inventory = nlohmann::json::object();
  return h;
}

}  // namespace

std::string HostTokenHash(std::string_view token) { return core::HexEncode(core::Sha256(token)); }

core::Result<void> ValidateDnsLabel(std::string_view name, std::string_view what) {
  auto fail = [&] {
    return core::InvalidArgument("invalid_name",
                                 std::string(what) +
                                     " must be 1 to 63 characters of a-z, 0-9 and '-', not "
                                     "starting or ending with '-' (a DNS label).");
  };
  if (name.empty() || name.size() > 63 || name.front() == '-' || name.back() == '-') {
    return fail();
  }
  for (char c : name) {
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-')) return fail();
  }
  return {};
}

core::Result<NewHost> HostRegistry::Add(const std::string& actor_id, std::string_view name,
                                        std::string_view gpu_type, bool gpu_required,
                                        const std::string& source_address) {
  GPUWERK_TRY(ValidateDnsLabel(name, "A host name"));
  NewHost out;
  out.token = "gwh_" + core::RandomToken(rng_);
  out.host = Host{.id = core::NewId(rng_, "hst"),
                  .name = std::string(name),
                  .gpu_type = std::string(gpu_type),
                  .gpu_required = gpu_required,
                  .created_at = clock_.NowUnix()};
  GPUWERK_TRY(db_.Write([&](store::Transaction& tx) -> core::Result<void> {
    GPUWERK_ASSIGN_OR_RETURN(
        auto type, tx.QueryOne("SELECT name FROM gpu_types WHERE name = ?", {out.host.gpu_type}));
    if (!type) {
      return core::Fail(core::Error(core::ErrorCode::kInvalidArgument, "unknown_gpu_type",
                                    "There is no GPU type by that name.")
                            .WithDetail("gpu_type", out.host.gpu_type));
    }
    GPUWERK_ASSIGN_OR_RETURN(auto clash,
                             tx.QueryOne("SELECT id FROM hosts WHERE name = ?", {out.host.name}));
    if (clash) {
      return core::Fail(core::ErrorCode::kAlreadyExists, "name_taken",
                        "A host named '" + out.host.name + "' is already registered.");
    }
    GPUWERK_TRY(tx.Exec(
        "INSERT INTO hosts (id, name, gpu_type, token_hash, gpu_required, drained, created_at, "
        "inventory, engine_error) VALUES (?, ?, ?, ?, ?, 0, ?, '{}', '')",
        {out.host.id, out.host.name, out.host.gpu_type, HostTokenHash(out.token),
         int64_t{gpu_required ? 1 : 0}, out.host.created_at}));
    return store::RecordAudit(tx, clock_, rng_,
                              {.actor_id = actor_id,
                               .action = "host.add",
                               .target = out.host.id,
                               .source_address = source_address,
                               .detail = {{"name", out.host.name},
                                          {"gpu_type", out.host.gpu_type},
                                          {"gpu_required", gpu_required}}});
  }));
  return out;
}

core::Result<NewHost> HostRegistry::AddOrRotateToken(const std::string& actor_id,
                                                     std::string_view name,
                                                     std::string_view gpu_type, bool gpu_required,
                                                     const std::string& source_address) {
  GPUWERK_ASSIGN_OR_RETURN(auto existing, db_.Read([&](store::Transaction& tx) {
    return tx.QueryOne("SELECT " + std::string(kHostColumns) + " FROM hosts h WHERE h.name = ?",
                       {std::string(name)});
  }));
  if (!existing) return Add(actor_id, name, gpu_type, gpu_required, source_address);
  NewHost out;
  out.host = HostFromRow(*existing);
  if (out.host.gpu_type != gpu_type) {
    return core::Fail(core::ErrorCode::kFailedPrecondition, "gpu_type_mismatch",
                      "The host '" + out.host.name + "' is registered as " + out.host.gpu_type +
                          ", not " + std::string(gpu_type) + ".");
  }
  out.token = "gwh_" + core::RandomToken(rng_);
  out.host.gpu_required = gpu_required;
  GPUWERK_TRY(db_.Write([&](store::Transaction& tx) -> core::Result<void> {
    GPUWERK_TRY(tx.Exec("UPDATE hosts SET token_hash = ?, gpu_required = ? WHERE id = ?",
                        {HostTokenHash(out.token), int64_t{gpu_required ? 1 : 0}, out.host.id}));
    return store::RecordAudit(
        tx, clock_, rng_,
        {.actor_id = actor_id,
         .action = "host.token_rotated",
         .target = out.host.id,
         .source_address = source_address,
         .detail = {{"name", out.host.name}, {"gpu_required", gpu_required}}});
  }));
  return out;
}

core::Result<std::vector<Host>> HostRegistry::List() {
  return db_.Read([&](store::Transaction& tx) -> core::Result<std::vector<Host>> {
    GPUWERK_ASSIGN_OR_RETURN(
        auto rows,
        tx.Query("SELECT " + std::string(kHostColumns) +
                 ", p.instance_id, m.pair_id, m.node_index, m.rail_address, h2.name FROM hosts h "
                 "LEFT JOIN placements p ON p.host_id = h.id LEFT JOIN host_pair_members m ON "
                 "m.host_id = h.id LEFT JOIN host_pair_members m2 ON m2.pair_id = m.pair_id AND "
                 "m2.host_id <> h.id LEFT JOIN hosts h2 ON h2.id = m2.host_id ORDER BY h.name"));
    std::vector<Host> out;
    for (const auto& r : rows) {
      out.push_back(HostFromRow(r));
      out.back().instance_id = r.Text(10);
      out.back().pair_id = r.Text(11);
      out.back().node_index = r.Int(12);
      out.back().rail_address = r.Text(13);
      out.back().partner = r.Text(14);
    }
    return out;
  });
}

core::Result<Host> HostRegistry::AuthenticateAgent(std::string_view token) {
  auto unauthenticated = [] {
    return core::Fail(core::ErrorCode::kUnauthenticated, "unauthenticated",
                      "A valid host token is required.");
  };
  if (!token.starts_with("gwh_") || token.size() > 256) return unauthenticated();
  return db_.Read([&](store::Transaction& tx) -> core::Result<Host> {
    GPUWERK_ASSIGN_OR_RETURN(auto row, tx.QueryOne("SELECT " + std::string(kHostColumns) +
                                                       " FROM hosts h WHERE h.token_hash = ?",
                                                   {HostTokenHash(token)}));
    if (!row) return unauthenticated();
    return HostFromRow(*row);
  });
}

core::Result<void> HostRegistry::SetDrained(const std::string& actor_id, std::string_view name,
                                            bool drained, const std::string& source_address) {
  return db_.Write([&](store::Transaction& tx) -> core::Result<void> {
    GPUWERK_ASSIGN_OR_RETURN(
        auto row, tx.QueryOne("SELECT id FROM hosts WHERE name = ?", {std::string(name)}));
    if (!row) return core::NotFound("Host");
    if (drained) {
      GPUWERK_TRY(tx.Exec("UPDATE hosts SET drained = 1 WHERE id = ?", {row->Text(0)}));
    } else {
      GPUWERK_TRY(tx.Exec("UPDATE hosts SET drained = 0, degraded_reason = '' WHERE id = ?",
                          {row->Text(0)}));
    }
    return store::RecordAudit(tx, clock_, rng_,
                              {.actor_id = actor_id,
                               .action = drained ? "host.drain" : "host.undrain",
                               .target = row->Text(0),
                               .source_address = source_address,
                               .detail = {{"name", std::string(name)}}});
  });
}

core::Result<Host> HostRegistry::Remove(const std::string& actor_id, std::string_view name,
                                        const std::string& source_address) {
  return db_.Write([&](store::Transaction& tx) -> core::Result<Host> {
    GPUWERK_ASSIGN_OR_RETURN(auto row, tx.QueryOne("SELECT " + std::string(kHostColumns) +
                                                       " FROM hosts h WHERE h.name = ?",
                                                   {std::string(name)}));
    if (!row) return core::NotFound("Host");
    Host host = HostFromRow(*row);
    GPUWERK_ASSIGN_OR_RETURN(auto pair, tx.QueryOne("SELECT pair_id FROM host_pair_members WHERE "
                                                    "host_id = ?",
                                                    {host.id}));
    // The host itself, or its partner: a 2x instance holds both.
    GPUWERK_ASSIGN_OR_RETURN(
        auto placed,
        tx.QueryOne("SELECT p.instance_id FROM placements p WHERE p.host_id = ? OR p.host_id IN "
                    "(SELECT m.host_id FROM host_pair_members m WHERE m.pair_id = ?) LIMIT 1",
                    {host.id, pair ? pair->Text(0) : std::string()}));
    if (placed) {
      return core::Fail(core::Error(core::ErrorCode::kFailedPrecondition, "host_in_use",
                                    "An instance is placed on the host '" + host.name +
                                        "'; it can be removed once that instance is deleted "
                                        "(drain the host first so that it gets no new one).")
                            .WithDetail("instance_id", placed->Text(0)));
    }
    if (pair) {
      host.pair_id = pair->Text(0);
      GPUWERK_TRY(tx.Exec("DELETE FROM host_pair_members WHERE pair_id = ?", {host.pair_id}));
      GPUWERK_TRY(tx.Exec("DELETE FROM host_pairs WHERE id = ?", {host.pair_id}));
    }
    GPUWERK_TRY(tx.Exec("DELETE FROM observed_containers WHERE host_id = ?", {host.id}));
    GPUWERK_TRY(tx.Exec("DELETE FROM hosts WHERE id = ?", {host.id}));
    nlohmann::json detail = {{"name", host.name}, {"gpu_type", host.gpu_type}};
    if (pair) detail["unlinked_pair_id"] = host.pair_id;
    GPUWERK_TRY(store::RecordAudit(tx, clock_, rng_,
                                   {.actor_id = actor_id,
                                    .action = "host.remove",
                                    .target = host.id,
                                    .source_address = source_address,
                                    .detail = std::move(detail)}));
    return host;
  });
}

}  // namespace gpuwerk::sched

// Linked host pairs (R-7, R-8, migration 5): HostRegistry::LinkPair, ListPairs, UnlinkPair.
#include <arpa/inet.h>

#include <algorithm>

#include "sched/host_registry.h"
#include "sched/internal/launch.h"
#include "store/audit_log.h"

namespace gpuwerk::sched {
namespace {

constexpr int kPageSize = 15;

/// Whether the IPv4 address in `b` (network order) can be a host's own unicast address: not
/// 0.0.0.0/8 ("this network"), 127/8 (loopback: the other host cannot reach it), 224/4
/// (multicast) or 240/4 (reserved, incl. broadcast). RFC 6890.
bool UsableIpv4(const unsigned char* b) { return b[0] != 0 && b[0] != 127 && b[0] < 224; }

/// `text` as a normalised unicast IPv4 or IPv6 literal (inet_ntop's form; an IPv4-mapped IPv6
/// address becomes its IPv4 form, so the same address cannot be given twice in two spellings);
/// nullopt when it is not one, or is unspecified, loopback, multicast or broadcast.
std::optional<std::string> NormaliseIp(const std::string& text) {
  unsigned char bytes[16];
  char out[INET6_ADDRSTRLEN];
  if (::inet_pton(AF_INET, text.c_str(), bytes) == 1) {
    if (!UsableIpv4(bytes)) return std::nullopt;
    return std::string(::inet_ntop(AF_INET, bytes, out, sizeof out));
  }
  if (::inet_pton(AF_INET6, text.c_str(), bytes) == 1) {
    static constexpr unsigned char kMapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    if (std::equal(bytes, bytes + 12, kMapped)) {
      if (!UsableIpv4(bytes + 12)) return std::nullopt;
      return std::string(::inet_ntop(AF_INET, bytes + 12, out, sizeof out));
    }
    const bool unspecified_or_loopback =
        std::all_of(bytes, bytes + 15, [](unsigned char c) { return c == 0; }) && bytes[15] <= 1;
    if (unspecified_or_loopback || bytes[0] == 0xff) return std::nullopt;  // ::, ::1, ff00::/8
    return std::string(::inet_ntop(AF_INET6, bytes, out, sizeof out));
  }
  return std::nullopt;
}

/// Pair `id` with its members and the instance placed on it; nullopt when absent.
core::Result<std::optional<HostPair>> LoadPair(store::Transaction& tx, const std::string& id) {
  GPUWERK_ASSIGN_OR_RETURN(
      auto rows,
      tx.Query("SELECT hp.id, hp.created_at, m.host_id, h.name, m.node_index, m.rail_address, "
               "h.gpu_type, p.instance_id FROM host_pairs hp JOIN host_pair_members m ON "
               "m.pair_id = hp.id JOIN hosts h ON h.id = m.host_id LEFT JOIN placements p ON "
               "p.host_id = h.id WHERE hp.id = ? ORDER BY m.node_index",
               {id}));
  if (rows.empty()) return std::optional<HostPair>();
  HostPair pair{.id = rows[0].Text(0), .gpu_type = rows[0].Text(6), .created_at = rows[0].Int(1)};
  for (const auto& r : rows) {
    pair.members.push_back(HostPairMember{.host_id = r.Text(2),
                                          .host_name = r.Text(3),
                                          .node_index = r.Int(4),
                                          .rail_address = r.Text(5)});
    if (pair.instance_id.empty() && !r.IsNull(7)) pair.instance_id = r.Text(7);
  }
  return std::optional<HostPair>(std::move(pair));
}

}  // namespace

core::Result<HostPair> HostRegistry::LinkPair(const std::string& actor_id, const PairNode& node0,
                                              const PairNode& node1,
                                              const std::string& source_address) {
  if (node0.host_name == node1.host_name) {
    return core::InvalidArgument("invalid_pair", "A pair links two different hosts.");
  }
  std::vector<std::string> rails;
  for (const PairNode* node : {&node0, &node1}) {
    auto rail = NormaliseIp(node->rail_address);
    if (!rail) {
      return core::Fail(core::Error(core::ErrorCode::kInvalidArgument, "invalid_rail_address",
                                    "The rail address of '" + node->host_name +
                                        "' must be the host's own unicast IPv4 or IPv6 address "
                                        "on the rail, such as 192.168.100.1 (not 0.0.0.0, "
                                        "loopback, multicast or broadcast).")
                            .WithDetail("host", node->host_name));
    }
    rails.push_back(*rail);
  }
  if (rails[0] == rails[1]) {
    return core::InvalidArgument("invalid_pair",
                                 "The two hosts of a pair need different rail "
                                 "addresses.");
  }
  const std::string id = core::NewId(rng_, "hpr");
  const int64_t now = clock_.NowUnix();
  return db_.Write([&](store::Transaction& tx) -> core::Result<HostPair> {
    std::vector<std::string> ids, types;
    for (const PairNode* node : {&node0, &node1}) {
      GPUWERK_ASSIGN_OR_RETURN(
          auto row, tx.QueryOne("SELECT h.id, h.gpu_type, m.pair_id FROM hosts h LEFT JOIN "
                                "host_pair_members m ON m.host_id = h.id WHERE h.name = ?",
                                {node->host_name}));
      if (!row) {
        return core::Fail(core::Error(core::ErrorCode::kNotFound, "not_found",
                                      "There is no host named '" + node->host_name + "'.")
                              .WithDetail("host", node->host_name));
      }
      if (!row->IsNull(2)) {
        return core::Fail(core::Error(core::ErrorCode::kAlreadyExists, "already_paired",
                                      "The host '" + node->host_name +
                                          "' is already linked in a pair; unlink it first.")
                              .WithDetail("host", node->host_name)
                              .WithDetail("pair_id", row->Text(2)));
      }
      ids.push_back(row->Text(0));
      types.push_back(row->Text(1));
    }
    if (types[0] != types[1]) {
      return core::Fail(core::ErrorCode::kFailedPrecondition, "gpu_type_mismatch",
                        "The hosts serve different GPU types (" + types[0] + " and " + types[1] +
                            "); a pair links two hosts of one type.");
    }
    GPUWERK_ASSIGN_OR_RETURN(internal::TypeRow type, internal::LoadType(tx, types[0]));
    if (type.hosts_per_instance != 2) {
      return core::Fail(core::Error(core::ErrorCode::kFailedPrecondition, "not_a_pair_type",
                                    "The hosts serve " + types[0] +
                                        ", whose instances take one host; only hosts of a "
                                        "2-host GPU type are linked in pairs.")
                            .WithDetail("gpu_type", types[0]));
    }
    GPUWERK_TRY(tx.Exec("INSERT INTO host_pairs (id, created_at) VALUES (?, ?)", {id, now}));
    for (int64_t node = 0; node < 2; ++node) {
      GPUWERK_TRY(tx.Exec(
          "INSERT INTO host_pair_members (host_id, pair_id, node_index, rail_address) VALUES "
          "(?, ?, ?, ?)",
          {ids[static_cast<size_t>(node)], id, node, rails[static_cast<size_t>(node)]}));
    }
    GPUWERK_TRY(store::RecordAudit(
        tx, clock_, rng_,
        {.actor_id = actor_id,
         .action = "host_pair.link",
         .target = id,
         .source_address = source_address,
         .detail = {{"gpu_type", types[0]},
                    {"hosts", nlohmann::json::array({node0.host_name, node1.host_name})},
                    {"rail_addresses", rails}}}));
    GPUWERK_ASSIGN_OR_RETURN(auto pair, LoadPair(tx, id));
    return std::move(*pair);
  });
}

core::Result<HostPairPage> HostRegistry::ListPairs(int page) {
  if (page < 1 || page > 1'000'000) {
    return core::InvalidArgument("invalid_page", "page must be a whole number from 1.");
  }
  return db_.Read([&](store::Transaction& tx) -> core::Result<HostPairPage> {
    HostPairPage out;
    out.page = page;
    GPUWERK_ASSIGN_OR_RETURN(auto count, tx.QueryOne("SELECT COUNT(*) FROM host_pairs"));
    out.total = count->Int(0);
    out.pages = static_cast<int>(std::max<int64_t>(1, (out.total + kPageSize - 1) / kPageSize));
    GPUWERK_ASSIGN_OR_RETURN(
        auto rows, tx.Query("SELECT id FROM host_pairs ORDER BY created_at, id LIMIT ? OFFSET ?",
                            {int64_t{kPageSize}, int64_t{(page - 1) * kPageSize}}));
    for (const auto& r : rows) {
      GPUWERK_ASSIGN_OR_RETURN(auto pair, LoadPair(tx, r.Text(0)));
      if (pair) out.items.push_back(std::move(*pair));
    }
    return out;
  });
}

core::Result<HostPair> HostRegistry::UnlinkPair(const std::string& actor_id, std::string_view id,
                                                const std::string& source_address) {
  return db_.Write([&](store::Transaction& tx) -> core::Result<HostPair> {
    GPUWERK_ASSIGN_OR_RETURN(auto pair, LoadPair(tx, std::string(id)));
    if (!pair) return core::NotFound("Host pair");
    if (!pair->instance_id.empty()) {
      return core::Fail(core::Error(core::ErrorCode::kFailedPrecondition, "host_in_use",
                                    "An instance is placed on this pair; it can be unlinked "
                                    "once that instance is deleted.")
                            .WithDetail("instance_id", pair->instance_id));
    }
    GPUWERK_TRY(tx.Exec("DELETE FROM host_pair_members WHERE pair_id = ?", {pair->id}));
    GPUWERK_TRY(tx.Exec("DELETE FROM host_pairs WHERE id = ?", {pair->id}));
    nlohmann::json hosts = nlohmann::json::array();
    for (const auto& m : pair->members) hosts.push_back(m.host_name);
    GPUWERK_TRY(store::RecordAudit(tx, clock_, rng_,
                                   {.actor_id = actor_id,
                                    .action = "host_pair.unlink",
                                    .target = pair->id,
                                    .source_address = source_address,
                                    .detail = {{"gpu_type", pair->gpu_type}, {"hosts", hosts}}}));
    return std::move(*pair);
  });
}

}  // namespace gpuwerk::sched

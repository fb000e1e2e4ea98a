// Linked host pairs (R-7, R-8, migration 5): HostRegistry::LinkPair, ListPairs, UnlinkPair.
#include <arpa/inet.h>

#include <algorithm>

#include "audit/audit_log.h"
#include "sched/host_registry.h"
#include "sched/internal/host_pair_table.h"
#include "sched/internal/host_table.h"
#include "sched/internal/launch.h"

namespace gpuwerk::sched {
namespace {

using internal::HostPairTable;

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
      GPUWERK_ASSIGN_OR_RETURN(auto host, internal::HostTable::FindByName(tx, node->host_name));
      if (!host) {
        return core::Fail(core::Error(core::ErrorCode::kNotFound, "not_found",
                                      "There is no host named '" + node->host_name + "'.")
                              .WithDetail("host", node->host_name));
      }
      GPUWERK_ASSIGN_OR_RETURN(auto paired, HostPairTable::PairOfHost(tx, host->id));
      if (paired) {
        return core::Fail(core::Error(core::ErrorCode::kAlreadyExists, "already_paired",
                                      "The host '" + node->host_name +
                                          "' is already linked in a pair; unlink it first.")
                              .WithDetail("host", node->host_name)
                              .WithDetail("pair_id", *paired));
      }
      ids.push_back(host->id);
      types.push_back(host->gpu_type);
    }
    if (types[0] != types[1]) {
      return core::Fail(core::ErrorCode::kFailedPrecondition, "gpu_type_mismatch",
                        "The hosts serve different GPU types (" + types[0] + " and " + types[1] +
                            "); a pair links two hosts of one type.");
    }
    GPUWERK_ASSIGN_OR_RETURN(GpuTypeConfig type, internal::LoadType(tx, types[0]));
    if (type.hosts_per_instance != 2) {
      return core::Fail(core::Error(core::ErrorCode::kFailedPrecondition, "not_a_pair_type",
                                    "The hosts serve " + types[0] +
                                        ", whose instances take one host; only hosts of a "
                                        "2-host GPU type are linked in pairs.")
                            .WithDetail("gpu_type", types[0]));
    }
    GPUWERK_TRY(HostPairTable::Insert(tx, id, now, ids, rails));
    GPUWERK_TRY(audit::RecordAudit(
        tx, clock_, rng_,
        {.actor_id = actor_id,
         .action = "host_pair.link",
         .target = id,
         .source_address = source_address,
         .detail = {{"gpu_type", types[0]},
                    {"hosts", nlohmann::json::array({node0.host_name, node1.host_name})},
                    {"rail_addresses", rails}}}));
    GPUWERK_ASSIGN_OR_RETURN(auto pair, HostPairTable::Load(tx, id));
    return std::move(*pair);
  });
}

core::Result<HostPairPage> HostRegistry::ListPairs(int page) {
  GPUWERK_TRY(CheckPage(page));
  return db_.Read([&](store::Transaction& tx) -> core::Result<HostPairPage> {
    HostPairPage out;
    out.page = page;
    GPUWERK_ASSIGN_OR_RETURN(out.total, HostPairTable::Count(tx));
    out.pages = PageCount(out.total);
    GPUWERK_ASSIGN_OR_RETURN(auto ids, HostPairTable::ListIds(tx, kPageSize, PageOffset(page)));
    for (const auto& pair_id : ids) {
      GPUWERK_ASSIGN_OR_RETURN(auto pair, HostPairTable::Load(tx, pair_id));
      if (pair) out.items.push_back(std::move(*pair));
    }
    return out;
  });
}

core::Result<HostPair> HostRegistry::UnlinkPair(const std::string& actor_id, std::string_view id,
                                                const std::string& source_address) {
  return db_.Write([&](store::Transaction& tx) -> core::Result<HostPair> {
    GPUWERK_ASSIGN_OR_RETURN(auto pair, HostPairTable::Load(tx, std::string(id)));
    if (!pair) return core::NotFound("Host pair");
    if (!pair->instance_id.empty()) {
      return core::Fail(core::Error(core::ErrorCode::kFailedPrecondition, "host_in_use",
                                    "An instance is placed on this pair; it can be unlinked "
                                    "once that instance is deleted.")
                            .WithDetail("instance_id", pair->instance_id));
    }
    GPUWERK_TRY(HostPairTable::Delete(tx, pair->id));
    nlohmann::json hosts = nlohmann::json::array();
    for (const auto& m : pair->members) hosts.push_back(m.host_name);
    GPUWERK_TRY(audit::RecordAudit(tx, clock_, rng_,
                                   {.actor_id = actor_id,
                                    .action = "host_pair.unlink",
                                    .target = pair->id,
                                    .source_address = source_address,
                                    .detail = {{"gpu_type", pair->gpu_type}, {"hosts", hosts}}}));
    return std::move(*pair);
  });
}

}  // namespace gpuwerk::sched

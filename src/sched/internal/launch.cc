#include "sched/internal/launch.h"

#include "audit/audit_log.h"
#include "billing/billing_account_id.h"
#include "billing/billing_session_table.h"
#include "keys/ssh_key_table.h"
#include "sched/instance_table.h"
#include "sched/internal/gpu_type_table.h"
#include "sched/internal/placement_table.h"
#include "sched/internal/queue_entry_table.h"

namespace gpuwerk::sched::internal {
namespace {

/// `<name>-<5 random base32 chars>`, the name cut so the result stays a DNS label.
std::string NewHostname(core::Rng& rng, const std::string& name) {
  static constexpr char kAlphabet[] = "abcdefghijklmnopqrstuvwxyz234567";
  unsigned char bytes[5];
  rng.Fill(bytes, sizeof bytes);
  std::string prefix = name.substr(0, 57);
  while (!prefix.empty() && prefix.back() == '-') prefix.pop_back();
  std::string out = prefix + "-";
  for (unsigned char b : bytes) out += kAlphabet[b % 32];
  return out;
}

}  // namespace

core::Result<GpuTypeConfig> LoadType(store::Transaction& tx, const std::string& gpu_type) {
  GPUWERK_ASSIGN_OR_RETURN(auto type, GpuTypeTable::Find(tx, gpu_type));
  if (!type) {
    return core::Fail(core::Error(core::ErrorCode::kInvalidArgument, "unknown_gpu_type",
                                  "There is no GPU type by that name; see gpuwerk gpu-types.")
                          .WithDetail("gpu_type", gpu_type));
  }
  return std::move(*type);
}

core::Result<void> CheckNameFree(store::Transaction& tx, const std::string& person_id,
                                 const std::string& name, const std::string& except_entry_id) {
  GPUWERK_ASSIGN_OR_RETURN(auto clash, InstanceTable::FindLiveByName(tx, person_id, name));
  if (clash) {
    return core::Fail(core::ErrorCode::kAlreadyExists, "name_taken",
                      "You already have an instance named '" + name + "'.");
  }
  GPUWERK_ASSIGN_OR_RETURN(auto queued,
                           QueueEntryTable::FindOpenByName(tx, person_id, name, except_entry_id));
  if (queued) {
    return core::Fail(core::Error(core::ErrorCode::kAlreadyExists, "name_taken",
                                  "Your queue entry for " + queued->gpu_type +
                                      " already has the "
                                      "name '" +
                                      name + "'.")
                          .WithDetail("queue_entry_id", queued->id));
  }
  return {};
}

core::Result<std::string> OwnKeyLine(store::Transaction& tx, const std::string& person_id,
                                     const std::string& ssh_key_id) {
  GPUWERK_ASSIGN_OR_RETURN(auto key, keys::SshKeyTable::FindOwned(tx, person_id, ssh_key_id));
  if (!key) return core::NotFound("SSH key");
  return std::move(key->public_key);
}

core::Result<std::string> InsertInstance(store::Transaction& tx, core::Clock& clock, core::Rng& rng,
                                         const SchedOptions& options, const LaunchSpec& spec) {
  const int64_t now = clock.NowUnix();
  GPUWERK_ASSIGN_OR_RETURN(std::string key_line, OwnKeyLine(tx, spec.person_id, spec.ssh_key_id));
  GPUWERK_ASSIGN_OR_RETURN(GpuTypeConfig type, LoadType(tx, spec.gpu_type));
  std::string hostname;
  for (int i = 0;; ++i) {
    hostname = NewHostname(rng, spec.name);
    GPUWERK_ASSIGN_OR_RETURN(auto taken, InstanceTable::FindByHostname(tx, hostname));
    if (!taken) break;
    if (i > 20) return core::Internal("could not find a free hostname");
  }
  const std::string id = core::NewId(rng, "ins");
  const std::string session_id = core::NewId(rng, "bil");
  GPUWERK_TRY(InstanceTable::Insert(tx, InstanceRow{.id = id,
                                                    .person_id = spec.person_id,
                                                    .name = spec.name,
                                                    .ssh_key_id = spec.ssh_key_id,
                                                    .public_key = key_line,
                                                    .gpu_type = spec.gpu_type,
                                                    .hostname = hostname,
                                                    .image = options.instance_image,
                                                    .desired = DesiredState::kRunning,
                                                    .restart_generation = 0,
                                                    .status = InstanceStatus::kProvisioning,
                                                    .status_reason = "",
                                                    .created_at = now,
                                                    .billing_session_id = session_id}));
  for (size_t node = 0; node < spec.host_ids.size(); ++node) {
    GPUWERK_TRY(PlacementTable::Insert(tx, id, spec.host_ids[node], static_cast<int64_t>(node)));
  }
  // the GPU type's price and currency are locked into the session at launch. R-15: the
  // account that pays is the person's own, or their team's (SchedOptions::resolve_account).
  std::string billing_account_id = billing::SoloBillingAccountId(spec.person_id);
  if (options.resolve_account) {
    GPUWERK_ASSIGN_OR_RETURN(auto account, options.resolve_account(tx, spec.person_id));
    billing_account_id = std::move(account.id);
  }
  GPUWERK_TRY(
      billing::BillingSessionTable::Insert(tx, {.id = session_id,
                                                .instance_id = id,
                                                .person_id = spec.person_id,
                                                .billing_account_id = billing_account_id,
                                                .instance_name = spec.name,
                                                .gpu_type = spec.gpu_type,
                                                .price_minor_per_hour = type.price_minor_per_hour,
                                                .currency = type.currency,
                                                .started_at = now}));
  nlohmann::json detail = {{"name", spec.name},
                           {"gpu_type", spec.gpu_type},
                           {"hostname", hostname},
                           {"ssh_key_id", spec.ssh_key_id},
                           {"billing_session_id", session_id}};
  if (spec.audit_detail.is_object()) detail.update(spec.audit_detail);
  GPUWERK_TRY(audit::RecordAudit(tx, clock, rng,
                                 {.actor_id = spec.actor_id,
                                  .action = "instance.create",
                                  .target = id,
                                  .source_address = spec.source_address,
                                  .detail = std::move(detail)}));
  return id;
}

}  // namespace gpuwerk::sched::internal

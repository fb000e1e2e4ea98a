#include "sched/account_instances.h"

#include "audit/audit_log.h"
#include "billing/billing_session_table.h"
#include "sched/instance_table.h"
#include "sched/internal/instance_rows.h"
#include "sched/internal/placement_table.h"

namespace gpuwerk::sched {

core::Result<DeletedInstances> DeleteInstancesBilledTo(store::Transaction& tx, core::Clock& clock,
                                                       core::Rng& rng, const std::string& person_id,
                                                       const std::string& billing_account_id,
                                                       int64_t at, const std::string& reason) {
  DeletedInstances out;
  GPUWERK_ASSIGN_OR_RETURN(auto live, InstanceTable::ListLive(tx, person_id));
  for (const InstanceRow& row : live) {
    if (row.desired == DesiredState::kDeleted) continue;  // being deleted already
    GPUWERK_ASSIGN_OR_RETURN(auto session,
                             billing::BillingSessionTable::Find(tx, row.billing_session_id));
    if (!session || session->billing_account_id != billing_account_id) continue;
    GPUWERK_ASSIGN_OR_RETURN(auto names, internal::PlacementTable::HostNamesOf(tx, row.id));
    out.hosts.insert(out.hosts.end(), names.begin(), names.end());
    out.instance_ids.push_back(row.id);
    GPUWERK_TRY(InstanceTable::MarkDeleting(tx, row.id));
    GPUWERK_TRY(billing::BillingSessionTable::End(tx, row.billing_session_id, at));
    GPUWERK_TRY(audit::RecordAudit(tx, clock, rng,
                                   {.actor_id = "",
                                    .action = "instance.delete",
                                    .target = row.id,
                                    .source_address = "system",
                                    .detail = {{"name", row.name},
                                               {"person_id", person_id},
                                               {"billing_account_id", billing_account_id},
                                               {"reason", reason}}}));
    GPUWERK_TRY(internal::FinalizeIfGone(tx, clock, rng, row.id));
  }
  return out;
}

}  // namespace gpuwerk::sched

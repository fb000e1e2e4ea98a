// GPU types as operator-managed data: HostRegistry::SetGpuType.
#include <algorithm>
#include <string_view>

#include "audit/audit_log.h"
#include "core/strings.h"
#include "sched/host_registry.h"
#include "sched/instance_table.h"
#include "sched/internal/gpu_type_table.h"
#include "sched/internal/host_table.h"
#include "sched/internal/queue_entry_table.h"

namespace gpuwerk::sched {
namespace {

constexpr int64_t kMaxPriceMinorPerHour = 1'000'000'000;
constexpr size_t kMaxDescriptionChars = 200;

core::Result<void> ValidateChange(const GpuTypeChange& c) {
  if (c.hosts_per_instance && *c.hosts_per_instance != 1 && *c.hosts_per_instance != 2) {
    return core::InvalidArgument("invalid_hosts_per_instance",
                                 "hosts_per_instance must be 1 or 2 (a linked pair).");
  }
  if (c.price_minor_per_hour &&
      (*c.price_minor_per_hour < 0 || *c.price_minor_per_hour > kMaxPriceMinorPerHour)) {
    return core::InvalidArgument("invalid_price",
                                 "price_minor_per_hour must be a whole number of minor units "
                                 "(cents) per hour from 0 to 1000000000.");
  }
  if (c.currency) {
    const std::string& cur = *c.currency;
    const bool ok = cur.size() == 3 && std::all_of(cur.begin(), cur.end(),
                                                   [](char ch) { return ch >= 'a' && ch <= 'z'; });
    if (!ok) {
      return core::InvalidArgument("invalid_currency",
                                   "currency must be an ISO 4217 code in 3 lowercase letters, "
                                   "such as usd or eur.");
    }
  }
  if (c.description) {
    // Controls, invisible direction and zero-width characters and line separators would make a
    // listing show text other than what it holds (core::IsUnsafeTextCodePoint).
    if (core::HasUnsafeText(*c.description)) {
      return core::InvalidArgument("invalid_description",
                                   "description must be one line without control characters or "
                                   "invisible direction or zero-width characters.");
    }
    size_t chars = 0;
    for (unsigned char ch : *c.description) {
      if (ch < 0x20 || ch == 0x7f) {
        return core::InvalidArgument("invalid_description",
                                     "description must be one line without control characters.");
      }
      if ((ch & 0xC0) != 0x80) ++chars;  // count UTF-8 characters, not continuation bytes
    }
    if (chars > kMaxDescriptionChars) {
      return core::InvalidArgument("invalid_description",
                                   "description must be at most 200 characters.");
    }
  }
  return {};
}

nlohmann::json ConfigJson(const GpuTypeConfig& t) {
  return {{"description", t.description},
          {"hosts_per_instance", t.hosts_per_instance},
          {"price_minor_per_hour", t.price_minor_per_hour},
          {"currency", t.currency}};
}

core::Error MissingField(const std::string& field) {
  return core::Error(core::ErrorCode::kInvalidArgument, "invalid_field",
                     "field '" + field + "' is required to create a GPU type")
      .WithDetail("field", field);
}

}  // namespace

core::Result<std::pair<GpuTypeConfig, bool>> HostRegistry::SetGpuType(
    const std::string& actor_id, std::string_view name, const GpuTypeChange& change,
    const std::string& source_address) {
  GPUWERK_TRY(ValidateDnsLabel(name, "A GPU type name"));
  GPUWERK_TRY(ValidateChange(change));
  const std::string type_name(name);
  return db_.Write([&](store::Transaction& tx) -> core::Result<std::pair<GpuTypeConfig, bool>> {
    GPUWERK_ASSIGN_OR_RETURN(auto stored, internal::GpuTypeTable::Find(tx, type_name));
    if (!stored) {
      if (!change.hosts_per_instance) return core::Fail(MissingField("hosts_per_instance"));
      if (!change.price_minor_per_hour) return core::Fail(MissingField("price_minor_per_hour"));
      GpuTypeConfig t{.name = type_name,
                      .description = change.description.value_or(""),
                      .hosts_per_instance = *change.hosts_per_instance,
                      .price_minor_per_hour = *change.price_minor_per_hour,
                      .currency = change.currency.value_or("usd")};
      GPUWERK_TRY(internal::GpuTypeTable::Insert(tx, t));
      GPUWERK_TRY(audit::RecordAudit(tx, clock_, rng_,
                                     {.actor_id = actor_id,
                                      .action = "gpu_type.create",
                                      .target = t.name,
                                      .source_address = source_address,
                                      .detail = {{"after", ConfigJson(t)}}}));
      return std::pair<GpuTypeConfig, bool>(std::move(t), true);
    }
    const GpuTypeConfig before = *stored;
    GpuTypeConfig after = before;
    if (change.description) after.description = *change.description;
    if (change.hosts_per_instance) after.hosts_per_instance = *change.hosts_per_instance;
    if (change.price_minor_per_hour) after.price_minor_per_hour = *change.price_minor_per_hour;
    if (change.currency) after.currency = *change.currency;
    if (after.hosts_per_instance != before.hosts_per_instance) {
      // Instances, entries and hosts (and pairs) are shaped by the number of hosts per instance.
      GPUWERK_ASSIGN_OR_RETURN(const int64_t instances,
                               InstanceTable::CountLiveOfType(tx, type_name));
      GPUWERK_ASSIGN_OR_RETURN(const int64_t entries,
                               internal::QueueEntryTable::CountOpen(tx, type_name));
      GPUWERK_ASSIGN_OR_RETURN(const int64_t hosts,
                               internal::HostTable::CountOfType(tx, type_name));
      if (instances + entries + hosts > 0) {
        return core::Fail(
            core::Error(core::ErrorCode::kFailedPrecondition, "gpu_type_in_use",
                        "The hosts per instance of " + type_name +
                            " cannot change while it has live instances, queue entries or "
                            "hosts; price, currency and description can.")
                .WithDetail("instances", instances)
                .WithDetail("queue_entries", entries)
                .WithDetail("hosts", hosts));
      }
    }
    GPUWERK_TRY(internal::GpuTypeTable::Update(tx, after));
    GPUWERK_TRY(audit::RecordAudit(
        tx, clock_, rng_,
        {.actor_id = actor_id,
         .action = "gpu_type.update",
         .target = type_name,
         .source_address = source_address,
         .detail = {{"before", ConfigJson(before)}, {"after", ConfigJson(after)}}}));
    return std::pair<GpuTypeConfig, bool>(std::move(after), false);
  });
}

}  // namespace gpuwerk::sched

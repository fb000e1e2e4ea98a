#pragma once

#include <functional>
#include <string>
#include <string_view>

#include "core/error.h"
#include "store/database.h"

namespace gpuwerk::sched {

/// Whether `person_id` may launch or restart an instance now: nothing when they may, else
/// the refusal to answer, kPaymentRequired `payment_method_required` (with what to do) when their
/// billing account has no payment method. `action` is "launch" or "restart". app/ installs
/// billing::PaymentMethods::RequireForLaunch; the default (an empty gate) lets everyone. Called
/// inside the caller's write transaction (a create, a restart, a queue drain): must be quick and
/// must only read through `tx`. Errors: the refusal; the store's.
using LaunchGate = std::function<core::Result<void>(
    store::Transaction& tx, const std::string& person_id, std::string_view action)>;

/// Whether `refusal` (an error of a LaunchGate) says the person may not launch now (a queue
/// drain passes their entry over) rather than that something failed (the drain fails).
inline bool IsLaunchRefusal(const core::Error& refusal) {
  return refusal.code == core::ErrorCode::kPaymentRequired;
}

}  // namespace gpuwerk::sched

#include "billing/invoice_pusher.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>

#include "audit/audit_log.h"
#include "billing/money.h"
#include "core/strings.h"

namespace gpuwerk::billing {

int64_t PushRetryDelaySeconds(int64_t failed_attempts) {
  const int64_t doublings = std::clamp<int64_t>(failed_attempts - 1, 0, 20);
  return std::min<int64_t>(int64_t{60} << doublings, kPushRetryMaxSeconds);
}

InvoiceToPush ToPush(const InvoiceRow& invoice) {
  InvoiceToPush out{.id = invoice.id,
                    .billing_account_id = invoice.billing_account_id,
                    .month = invoice.month,
                    .currency = invoice.currency,
                    .lines = {},
                    .total_minor = invoice.total_minor};
  for (const InvoiceLineRow& l : invoice.lines) {
    out.lines.push_back(
        {.id = invoice.id + "-" + l.session_id,
         .description =
             fmt::format("{} ({}), {} minute{}, {}", core::BoundedPrintable(l.instance_name, 64),
                         core::BoundedPrintable(l.gpu_type, 64), l.minutes,
                         l.minutes == 1 ? "" : "s", invoice.month),
         .amount_minor = l.amount_minor});
  }
  return out;
}

InvoicePusher::InvoicePusher(store::Database& db, core::Clock& clock, core::Rng& rng,
                             PaymentProvider& provider)
    : db_(db), clock_(clock), rng_(rng), provider_(provider) {}

core::Result<InvoicePushReport> InvoicePusher::PushDue(int64_t limit) {
  std::lock_guard lock(pass_mu_);
  const std::string provider(provider_.name());
  GPUWERK_ASSIGN_OR_RETURN(auto queued, db_.Read([&](store::Transaction& tx) {
    return InvoiceTable::PendingPushes(tx, provider, "", clock_.NowUnix(), limit);
  }));
  InvoicePushReport report;
  for (const InvoicePushRow& q : queued) {
    GPUWERK_ASSIGN_OR_RETURN(InvoicePushResult one, PushOne(q, "", "system"));
    report.results.push_back(std::move(one));
  }
  return report;
}

core::Result<InvoicePushReport> InvoicePusher::PushMonth(std::string_view month,
                                                         const std::string& actor_id,
                                                         const std::string& source_address) {
  GPUWERK_ASSIGN_OR_RETURN(const int64_t from, ParseMonth(month));
  const std::string label = MonthLabel(from);
  std::lock_guard lock(pass_mu_);
  const std::string provider(provider_.name());
  using Queued = std::pair<std::vector<InvoicePushRow>, int64_t>;
  GPUWERK_ASSIGN_OR_RETURN(
      Queued queued, db_.Read([&](store::Transaction& tx) -> core::Result<Queued> {
        GPUWERK_ASSIGN_OR_RETURN(auto pending,
                                 InvoiceTable::PendingPushes(tx, provider, label, 0, 0));
        GPUWERK_ASSIGN_OR_RETURN(int64_t done, InvoiceTable::PushedCount(tx, provider, label));
        return Queued{std::move(pending), done};
      }));
  InvoicePushReport report{.results = {}, .pushed_before = queued.second};
  for (const InvoicePushRow& q : queued.first) {
    GPUWERK_ASSIGN_OR_RETURN(InvoicePushResult one, PushOne(q, actor_id, source_address));
    report.results.push_back(std::move(one));
  }
  return report;
}

core::Result<InvoicePushResult> InvoicePusher::PushOne(const InvoicePushRow& queued,
                                                       const std::string& actor_id,
                                                       const std::string& source_address) {
  const InvoiceRow& invoice = queued.invoice;
  InvoicePushResult result{.invoice_id = invoice.id,
                           .billing_account_id = invoice.billing_account_id,
                           .month = invoice.month,
                           .currency = invoice.currency,
                           .total_minor = invoice.total_minor,
                           .attempts = queued.attempts + 1};
  // The network, outside any transaction (PaymentProvider: never inside one).
  auto pushed = provider_.PushInvoice(ToPush(invoice));
  const int64_t now = clock_.NowUnix();
  if (pushed) {
    GPUWERK_TRY(db_.Write([&](store::Transaction& tx) -> core::Result<void> {
      GPUWERK_ASSIGN_OR_RETURN(
          bool recorded, InvoiceTable::RecordPushDone(tx, invoice.id, pushed->provider_ref, now));
      if (!recorded) return {};  // a concurrent pusher recorded (and audited) it
      return audit::RecordAudit(tx, clock_, rng_,
                                {.actor_id = actor_id,
                                 .action = "billing.invoice_push",
                                 .target = invoice.id,
                                 .source_address = source_address,
                                 .detail = {{"billing_account", invoice.billing_account_id},
                                            {"provider", std::string(provider_.name())},
                                            {"provider_ref", pushed->provider_ref},
                                            {"month", invoice.month},
                                            {"currency", invoice.currency},
                                            {"total_minor", invoice.total_minor}}});
    }));
    spdlog::info("billing: invoice {} of billing account {} ({}) pushed to {} as {}", invoice.id,
                 core::BoundedPrintable(invoice.billing_account_id), invoice.month,
                 provider_.name(), core::BoundedPrintable(pushed->provider_ref));
    result.pushed = true;
    result.provider_ref = pushed->provider_ref;
    return result;
  }
  core::Error error = pushed.error();
  // Stripe's own code says why (e.g. "resource_missing"): kept beside the message.
  if (auto it = error.details.find("stripe_code");
      it != error.details.end() && it->is_string() && !it->get<std::string>().empty()) {
    error.message += " (Stripe code " + it->get<std::string>() + ")";
  }
  result.error_code = core::BoundedPrintable(error.api_code, 64);
  result.error_message = core::BoundedPrintable(error.message, kPushErrorBytes);
  result.next_attempt_at = now + PushRetryDelaySeconds(result.attempts);
  GPUWERK_ASSIGN_OR_RETURN(
      std::optional<InvoicePushRow> done_meanwhile,
      db_.Write([&](store::Transaction& tx) -> core::Result<std::optional<InvoicePushRow>> {
        GPUWERK_ASSIGN_OR_RETURN(
            bool recorded, InvoiceTable::RecordPushFailed(tx, invoice.id, error.api_code,
                                                          error.message, result.next_attempt_at));
        if (recorded) return std::optional<InvoicePushRow>();
        return InvoiceTable::PushOf(tx, invoice.id);
      }));
  if (done_meanwhile && done_meanwhile->pushed_at) {
    // Another server (or pass) pushed it while this attempt failed: it is on the provider's side.
    result.pushed = true;
    result.provider_ref = done_meanwhile->provider_ref;
    result.error_code.clear();
    result.error_message.clear();
    result.next_attempt_at = 0;
    return result;
  }
  spdlog::warn(
      "billing: pushing invoice {} of billing account {} ({}) to {} failed (attempt {}, {}): {}; "
      "tried again in {} s",
      invoice.id, core::BoundedPrintable(invoice.billing_account_id), invoice.month,
      provider_.name(), result.attempts, result.error_code, result.error_message,
      result.next_attempt_at - now);
  return result;
}

}  // namespace gpuwerk::billing

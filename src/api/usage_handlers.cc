// Invoices and the usage history (R-13, R-16; docs/api.md "Billing", "Usage"): a person's
// invoices and billing sessions, the operator's month close and CSV export.
#include <utility>

#include "api/handler_support.h"
#include "api/internal/handlers.h"
#include "billing/money.h"
#include "protocol/page.h"

namespace gpuwerk::api::handlers {
namespace {

core::Error NotRunning(const char* what) {
  return core::Error(core::ErrorCode::kUnavailable, "unavailable",
                     std::string("This server runs no ") + what + ".");
}

nlohmann::json InvoiceJson(const billing::InvoiceRow& inv) {
  nlohmann::json lines = nlohmann::json::array();
  for (const billing::InvoiceLineRow& l : inv.lines) {
    lines.push_back({{"billing_session_id", l.session_id},
                     {"instance_id", l.instance_id},
                     {"instance_name", l.instance_name},
                     {"gpu_type", l.gpu_type},
                     {"person_id", l.person_id},
                     {"minutes", l.minutes},
                     {"price_minor_per_hour", l.price_minor_per_hour},
                     {"amount_minor", l.amount_minor},
                     {"currency", inv.currency},
                     {"amount", billing::FormatAmount(l.amount_minor, inv.currency)}});
  }
  return {{"id", inv.id},
          {"billing_account_id", inv.billing_account_id},
          {"month", inv.month},
          {"currency", inv.currency},
          {"total_minor", inv.total_minor},
          {"total", billing::FormatAmount(inv.total_minor, inv.currency)},
          {"created_at", core::FormatRfc3339(inv.created_at)},
          {"lines", std::move(lines)}};
}

}  // namespace

Answer ListInvoices(ApiContext& ctx, Call& call) {
  if (!ctx.invoices) return core::Fail(NotRunning("invoices"));
  GPUWERK_ASSIGN_OR_RETURN(auto invoices, ctx.invoices->ForPerson(call.who.person_id));
  protocol::Page page{.page = 1, .pages = 1, .total = static_cast<int64_t>(invoices.size())};
  for (const auto& inv : invoices) page.items.push_back(InvoiceJson(inv));
  return Response::Json(200, protocol::ToJson(page));
}

Answer UsageSessions(ApiContext& ctx, Call& call) {
  if (!ctx.usage) return core::Fail(NotRunning("usage history"));
  auto param = [&](const char* name) {
    auto it = call.req.query.find(name);
    return it == call.req.query.end() ? std::string() : it->second;
  };
  GPUWERK_ASSIGN_OR_RETURN(
      auto found, ctx.usage->Sessions(call.who.person_id, param("before"), param("after")));
  protocol::Page page{.page = found.page,
                      .pages = found.pages,
                      .total = found.total,
                      .next = found.next_cursor,
                      .prev = found.prev_cursor};
  for (const billing::UsageRow& r : found.rows) {
    const billing::BillingSessionRow& s = r.session;
    page.items.push_back(
        {{"billing_session_id", s.id},
         {"name", s.instance_name},
         {"instance_id", s.instance_id},
         {"gpu_type", s.gpu_type},
         {"started_at", core::FormatRfc3339(s.started_at)},
         {"ended_at", s.ended_at ? nlohmann::json(core::FormatRfc3339(*s.ended_at)) : nullptr},
         {"active", r.active},
         {"duration_seconds", r.duration_seconds},
         {"billed_seconds", r.billed_seconds},
         {"minutes", r.minutes},
         {"price_minor_per_hour", s.price_minor_per_hour},
         {"amount_minor", r.amount_minor},
         {"currency", s.currency},
         {"amount", billing::FormatAmount(r.amount_minor, s.currency)}});
  }
  return Response::Json(200, protocol::ToJson(page));
}

Answer AdminCloseInvoices(ApiContext& ctx, Call& call) {
  if (!ctx.invoices) return core::Fail(NotRunning("invoices"));
  GPUWERK_ASSIGN_OR_RETURN(auto body, ParseJsonObject(call.req, {"month"}));
  GPUWERK_ASSIGN_OR_RETURN(auto month, RequireString(body, "month", 7));
  GPUWERK_ASSIGN_OR_RETURN(
      auto closed, ctx.invoices->CloseMonth(month, call.who.person_id, call.req.remote_address));
  nlohmann::json answer = {{"month", closed.month},
                           {"invoices_created", closed.invoices_created},
                           {"lines_created", closed.lines_created},
                           {"invoices", closed.invoices},
                           {"already_closed", closed.already_closed},
                           {"push", nullptr}};
  if (ctx.invoice_pusher) {
    // The month's queued invoices go to the provider now (the background pass retries failures).
    GPUWERK_ASSIGN_OR_RETURN(
        auto report,
        ctx.invoice_pusher->PushMonth(closed.month, call.who.person_id, call.req.remote_address));
    nlohmann::json pushed = nlohmann::json::array();
    nlohmann::json failed = nlohmann::json::array();
    for (const billing::InvoicePushResult& r : report.results) {
      nlohmann::json item = {{"invoice", r.invoice_id},
                             {"billing_account", r.billing_account_id},
                             {"currency", r.currency},
                             {"total_minor", r.total_minor},
                             {"attempts", r.attempts}};
      if (r.pushed) {
        item["provider_ref"] = r.provider_ref;
        pushed.push_back(std::move(item));
      } else {
        item["code"] = r.error_code;
        item["message"] = r.error_message;
        item["next_attempt_at"] = core::FormatRfc3339(r.next_attempt_at);
        failed.push_back(std::move(item));
      }
    }
    answer["push"] = {{"provider", std::string(ctx.invoice_pusher->provider().name())},
                      {"pushed", std::move(pushed)},
                      {"failed", std::move(failed)},
                      {"pushed_before", report.pushed_before}};
  }
  return Response::Json(200, answer);
}

Answer AdminExportInvoices(ApiContext& ctx, Call& call) {
  if (!ctx.invoices) return core::Fail(NotRunning("invoices"));
  auto it = call.req.query.find("month");
  if (it == call.req.query.end()) {
    return core::InvalidArgument("invalid_month",
                                 "Say which month to export: ?month=YYYY-MM (UTC), e.g. 2026-11.");
  }
  GPUWERK_ASSIGN_OR_RETURN(std::string csv, ctx.invoices->ExportCsv(it->second));
  Response r = Response::Text(200, std::move(csv), "text/csv; charset=utf-8");
  r.headers.emplace_back("Content-Disposition",
                         "attachment; filename=\"invoices-" + it->second + ".csv\"");
  return r;
}

}  // namespace gpuwerk::api::handlers

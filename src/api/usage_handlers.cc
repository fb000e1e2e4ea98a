// Invoices and the usage history (R-13, R-16; docs/api.md "Billing", "Usage"): a person's
// invoices and billing sessions, the operator's month close and CSV export.
#include <fmt/format.h>

#include <charconv>
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

Answer UsageDaily(ApiContext& ctx, Call& call) {
  if (!ctx.usage) return core::Fail(NotRunning("usage history"));
  // ?days=N (default 30) and ?utc_offset_minutes=M (default 0: UTC days), whole numbers only.
  auto integer = [&](const char* name, int64_t fallback, const char* code,
                     const char* what) -> core::Result<int64_t> {
    auto it = call.req.query.find(name);
    if (it == call.req.query.end()) return fallback;
    int64_t v = 0;
    const std::string& text = it->second;
    auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    if (text.empty() || text.size() > 12 || ec != std::errc() || ptr != text.data() + text.size()) {
      return core::Fail(core::ErrorCode::kInvalidArgument, code, what);
    }
    return v;
  };
  GPUWERK_ASSIGN_OR_RETURN(
      const int64_t days, integer("days", 30, "invalid_days",
                                  "days must be a whole number of days, 1 to 92 (e.g. ?days=30)."));
  GPUWERK_ASSIGN_OR_RETURN(
      const int64_t offset_minutes,
      integer("utc_offset_minutes", 0, "invalid_utc_offset",
              "utc_offset_minutes must be a whole number of minutes east of UTC, -840 to 840 "
              "(e.g. 120 for UTC+02:00)."));
  if (offset_minutes < -840 || offset_minutes > 840) {
    return core::Fail(core::ErrorCode::kInvalidArgument, "invalid_utc_offset",
                      "utc_offset_minutes must lie between -840 and 840 (UTC-14:00 to UTC+14:00).");
  }
  GPUWERK_ASSIGN_OR_RETURN(auto found,
                           ctx.usage->Daily(call.who.person_id, days, offset_minutes * 60));
  // "+02:00": the offset every day's start carries (RFC 3339).
  const int64_t m = offset_minutes < 0 ? -offset_minutes : offset_minutes;
  const std::string offset =
      fmt::format("{}{:02}:{:02}", offset_minutes < 0 ? '-' : '+', m / 60, m % 60);
  nlohmann::json items = nlohmann::json::array();
  for (const billing::UsageDay& d : found) {
    // The day's local date and start: its first second, shifted into the offset.
    const std::string local = core::FormatRfc3339(d.day_start + offset_minutes * 60);  // …Z
    nlohmann::json totals = nlohmann::json::array();
    for (const billing::DayAmount& a : d.amounts) {
      totals.push_back({{"currency", a.currency},
                        {"amount_minor", a.amount_minor},
                        {"amount", billing::FormatAmount(a.amount_minor, a.currency)}});
    }
    items.push_back({{"date", local.substr(0, 10)},
                     {"start", local.substr(0, 19) + offset},
                     {"minutes", d.minutes},
                     {"totals", std::move(totals)}});
  }
  return Response::Json(200, {{"utc_offset", offset},
                              {"utc_offset_minutes", offset_minutes},
                              {"as_of", core::FormatRfc3339(ctx.clock.NowUnix())},
                              {"days", std::move(items)}});
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

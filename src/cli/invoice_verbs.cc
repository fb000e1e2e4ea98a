// billing invoices, usage sessions, admin invoices close|export: invoices, the usage history and
// the operator's month close (docs/billing.md "Invoices", "Usage history").
#include <algorithm>
#include <cctype>
#include <fstream>

#include "cli/internal/verb_groups.h"
#include "cli/output.h"
#include "protocol/api_client.h"

namespace gpuwerk::cli::internal {
namespace {

using nlohmann::json;

/// Checks a month as the operator typed it ("YYYY-MM"). Errors: invalid_month.
core::Result<void> CheckMonth(const std::string& month) {
  const bool ok = month.size() == 7 && month[4] == '-' &&
                  std::all_of(month.begin(), month.begin() + 4,
                              [](char c) { return std::isdigit(static_cast<unsigned char>(c)); }) &&
                  std::isdigit(static_cast<unsigned char>(month[5])) &&
                  std::isdigit(static_cast<unsigned char>(month[6]));
  if (!ok) {
    return core::InvalidArgument("invalid_month",
                                 "--month takes a UTC month as YYYY-MM, e.g. --month 2026-11.");
  }
  return {};
}

core::Result<void> BillingInvoicesVerb(VerbContext& ctx) {
  GPUWERK_ASSIGN_OR_RETURN(ServerConnection server, Connect(ctx));
  GPUWERK_ASSIGN_OR_RETURN(json items, server.All("/api/v1/billing/invoices"));
  if (PrintJsonIfAsked(ctx, items)) return {};
  if (items.empty()) {
    Print(ctx, "No invoices yet: a month's invoice is made after the month ends (UTC).\n");
    return {};
  }
  for (const auto& inv : items) {
    Print(ctx, "Invoice " + SafeText(Str(inv, "id")) + " for " + SafeText(Str(inv, "month")) +
                   ": " + SafeText(Str(inv, "total")) + "\n");
    Table table({"INSTANCE", "GPU TYPE", "SESSION", "MINUTES", "AMOUNT"});
    for (const auto& l : Field(inv, "lines")) {
      table.AddRow({CellText(Field(l, "instance_name")), CellText(Field(l, "gpu_type")),
                    CellText(Field(l, "billing_session_id")), CellText(Field(l, "minutes")),
                    CellText(Field(l, "amount"))});
    }
    Print(ctx, table.Render());
  }
  return {};
}

/// The options of `usage sessions`.
struct UsageSessionsOptions {
  std::string before;
  std::string after;
};

core::Result<void> UsageSessionsVerb(VerbContext& ctx, const UsageSessionsOptions& opt) {
  for (const std::string* c : {&opt.before, &opt.after}) {
    if (!std::all_of(c->begin(), c->end(), [](char ch) {
          return std::isalnum(static_cast<unsigned char>(ch)) || ch == '.' || ch == '_';
        })) {
      return core::InvalidArgument(
          "invalid_cursor",
          "Pass --before or --after the cursor a page printed, exactly as it was printed.");
    }
  }
  GPUWERK_ASSIGN_OR_RETURN(ServerConnection server, Connect(ctx));
  std::string path = "/api/v1/usage/sessions";
  if (!opt.before.empty()) path += "?before=" + opt.before;
  if (!opt.after.empty()) path += (opt.before.empty() ? "?after=" : "&after=") + opt.after;
  GPUWERK_ASSIGN_OR_RETURN(json page, server.Ok("GET", path));
  if (PrintJsonIfAsked(ctx, page)) return {};
  const json& items = Field(page, "items");
  if (!items.is_array() || items.empty()) {
    Print(ctx, "No billing sessions.\n");
    return {};
  }
  Table table(
      {"NAME", "INSTANCE", "GPU TYPE", "STARTED", "ENDED", "DURATION", "MINUTES", "AMOUNT"});
  for (const auto& s : items) {
    const bool active = Field(s, "active").is_boolean() && Field(s, "active").get<bool>();
    table.AddRow({CellText(Field(s, "name")), CellText(Field(s, "instance_id")),
                  CellText(Field(s, "gpu_type")), CellText(Field(s, "started_at")),
                  active ? std::string("active") : CellText(Field(s, "ended_at")),
                  SafeText(DurationText(Field(s, "duration_seconds"))),
                  CellText(Field(s, "minutes")),
                  CellText(Field(s, "amount")) + (active ? " so far" : "")});
  }
  Print(ctx, table.Render());
  std::string footer =
      "Page " + CellText(Field(page, "page")) + " of " + CellText(Field(page, "pages")) + ".";
  if (!Str(page, "next").empty()) {
    footer += " Older: gpuwerk usage sessions --before " + SafeText(Str(page, "next"));
  }
  if (!Str(page, "prev").empty()) {
    footer += " Newer: gpuwerk usage sessions --after " + SafeText(Str(page, "prev"));
  }
  Print(ctx, footer + "\n");
  return {};
}

/// The options of `admin invoices close|export`.
struct AdminInvoiceOptions {
  std::string month;
  std::string month_arg;  ///< the month typed without --month (`close 2026-12`)
  std::string output;
};

/// The month the operator named: --month, or the bare argument (people type `close 2026-12`);
/// both, when they differ, is a mistake. Errors: invalid_month.
core::Result<std::string> MonthOf(const AdminInvoiceOptions& opt) {
  if (!opt.month_arg.empty() && !opt.month.empty() && opt.month_arg != opt.month) {
    return core::InvalidArgument("invalid_month", "two months given (" + opt.month_arg +
                                                      " and --month " + opt.month +
                                                      "): give one, with --month.");
  }
  const std::string month = opt.month.empty() ? opt.month_arg : opt.month;
  if (month.empty()) {
    return core::InvalidArgument("invalid_month",
                                 "which month? Give it as --month YYYY-MM, e.g. --month 2026-11.");
  }
  GPUWERK_TRY(CheckMonth(month));
  return month;
}

core::Result<void> AdminInvoicesCloseVerb(VerbContext& ctx, const AdminInvoiceOptions& opt) {
  GPUWERK_ASSIGN_OR_RETURN(const std::string wanted, MonthOf(opt));
  GPUWERK_ASSIGN_OR_RETURN(ServerConnection server, Connect(ctx));
  const json body = {{"month", wanted}};
  GPUWERK_ASSIGN_OR_RETURN(json closed, server.Ok("POST", "/api/v1/admin/invoices/close", &body));
  if (PrintJsonIfAsked(ctx, closed)) return {};
  const bool already =
      Field(closed, "already_closed").is_boolean() && Field(closed, "already_closed").get<bool>();
  const std::string month = SafeText(Str(closed, "month"));
  Print(ctx, "Closed " + month + ": " + CellText(Field(closed, "invoices_created")) +
                 " invoices made now, " + CellText(Field(closed, "invoices")) + " in all" +
                 (already ? " (it was closed before)" : "") + ".\n");
  const json& push = Field(closed, "push");
  if (!push.is_object()) {
    // The manual provider collects nothing itself: the operator does, from the export.
    Print(ctx, "Export them with: gpuwerk admin invoices export --month " + month + "\n");
    return {};
  }
  const std::string provider = SafeText(Str(push, "provider"));
  const json& pushed = Field(push, "pushed");
  const json& failed = Field(push, "failed");
  Print(ctx, "Pushed to " + provider + " now: " + std::to_string(pushed.size()) +
                 " invoices; pushed before: " + CellText(Field(push, "pushed_before")) +
                 "; failed: " + std::to_string(failed.size()) + ".\n");
  for (const auto& p : pushed) {
    Print(ctx, "  pushed " + SafeText(Str(p, "invoice")) + " (billing account " +
                   SafeText(Str(p, "billing_account")) + ") as " +
                   SafeText(Str(p, "provider_ref")) + "\n");
  }
  for (const auto& f : failed) {
    Print(ctx, "  failed " + SafeText(Str(f, "invoice")) + " (billing account " +
                   SafeText(Str(f, "billing_account")) + "): " + SafeText(Str(f, "code")) + ": " +
                   SafeText(Str(f, "message")) + " (the server tries again from " +
                   SafeText(Str(f, "next_attempt_at")) + ")\n");
  }
  return {};
}

core::Result<void> AdminInvoicesExportVerb(VerbContext& ctx, const AdminInvoiceOptions& opt) {
  GPUWERK_ASSIGN_OR_RETURN(const std::string month, MonthOf(opt));
  GPUWERK_ASSIGN_OR_RETURN(ServerConnection server, Connect(ctx));
  auto answer = server.client().Call("GET", "/api/v1/admin/invoices/export?month=" + month);
  if (!answer) return core::Fail(server.Explain(answer.error()));
  if (!answer->ok()) return core::Fail(server.Explain(protocol::ErrorFromResponse(*answer)));
  // Only the header line: the month has no invoice lines, most often because it was never closed.
  const std::string& csv = answer->text;
  const size_t first_end = csv.find('\n');
  if (first_end == std::string::npos || first_end + 1 >= csv.size()) {
    Warn(ctx, "no invoice lines for " + month +
                  ": a month has lines only once it is closed "
                  "('gpuwerk admin invoices close --month " +
                  month + "'), and a closed month without billing sessions has none.");
  }
  if (opt.output.empty()) {
    Print(ctx, answer->text);
    return {};
  }
  std::ofstream out(opt.output, std::ios::binary | std::ios::trunc);
  out << answer->text;
  out.close();
  if (!out) {
    return core::Fail(core::ErrorCode::kInvalidArgument, "cannot_write",
                      "Cannot write " + opt.output + ": check the folder exists and is writable.");
  }
  if (!ctx.common.json) Print(ctx, "Wrote " + SafeText(opt.output) + ".\n");
  return {};
}

}  // namespace

void AddInvoiceVerbs(CLI::App& app, const VerbRegistry& verbs) {
  // `billing` may be made by the payment-method verbs already; the invoices verb joins it.
  auto found = app.get_subcommands([](CLI::App* s) { return s->get_name() == "billing"; });
  CLI::App* billing = found.empty() ? VerbRegistry::AddGroup(app, "billing", "Your billing account")
                                    : found.front();
  verbs.AddVerb(*billing, "invoices", "Your billing account's monthly invoices, with their lines",
                &BillingInvoicesVerb);
}

void AddUsageSessionVerbs(CLI::App& usage, const VerbRegistry& verbs) {
  auto opt = std::make_shared<UsageSessionsOptions>();
  CLI::App* cmd = verbs.AddVerb(usage, "sessions", "Your billing sessions, newest first, 15 a page",
                                opt, &UsageSessionsVerb);
  cmd->footer(
      "Each page prints the cursors of its neighbours; pages stay put while new sessions start. "
      "Active sessions show their amount so far. --json prints the page with its cursors.");
  cmd->add_option("--before", opt->before, "the next (older) page's cursor");
  cmd->add_option("--after", opt->after, "the previous (newer) page's cursor");
}

void AddAdminInvoiceVerbs(CLI::App& admin, const VerbRegistry& verbs) {
  CLI::App* invoices = VerbRegistry::AddGroup(admin, "invoices", "Monthly invoices");
  auto opt = std::make_shared<AdminInvoiceOptions>();
  CLI::App* close = verbs.AddVerb(*invoices, "close",
                                  "Close a UTC month: one invoice per billing account (idempotent)",
                                  opt, &AdminInvoicesCloseVerb);
  close->add_option("--month", opt->month, "the month, YYYY-MM (UTC), e.g. 2026-11");
  close->add_option("MONTH", opt->month_arg, "the month, as --month takes it");
  CLI::App* exp = verbs.AddVerb(*invoices, "export", "A closed month's invoice lines as CSV", opt,
                                &AdminInvoicesExportVerb);
  exp->add_option("--month", opt->month, "the month, YYYY-MM (UTC), e.g. 2026-11");
  exp->add_option("MONTH", opt->month_arg, "the month, as --month takes it");
  exp->add_option("-o,--output", opt->output, "write the CSV to this file (default: stdout)");
}

}  // namespace gpuwerk::cli::internal

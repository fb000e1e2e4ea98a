// admin billing set-card|clear-card: under the manual provider the operator records and clears
// people's payment methods (R-14, docs/billing.md "Manual provider"), audited on the server.
#include <charconv>

#include "cli/internal/verb_groups.h"
#include "cli/output.h"

namespace gpuwerk::cli::internal {
namespace {

using nlohmann::json;

/// The options of `admin billing set-card` / `clear-card`.
struct AdminBillingOptions {
  std::string email;
  std::string brand;
  std::string last4;
  std::string exp;  ///< "MM/YYYY"
};

/// "12/2030" → {12, 2030}. Errors: invalid_exp.
core::Result<std::pair<int64_t, int64_t>> ParseExpiry(const std::string& text) {
  const auto slash = text.find('/');
  auto number = [](std::string_view s, int64_t& out) {
    auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
    return !s.empty() && ec == std::errc() && end == s.data() + s.size();
  };
  int64_t month = 0, year = 0;
  if (slash == std::string::npos || !number(std::string_view(text).substr(0, slash), month) ||
      !number(std::string_view(text).substr(slash + 1), year)) {
    return core::InvalidArgument("invalid_exp",
                                 "--exp must be the card's expiry as MM/YYYY, e.g. 12/2030.");
  }
  return std::pair<int64_t, int64_t>(month, year);
}

core::Result<void> AdminSetCardVerb(VerbContext& ctx, const AdminBillingOptions& opt) {
  GPUWERK_ASSIGN_OR_RETURN(auto exp, ParseExpiry(opt.exp));
  const json body = {{"brand", opt.brand},
                     {"last4", opt.last4},
                     {"exp_month", exp.first},
                     {"exp_year", exp.second}};
  GPUWERK_ASSIGN_OR_RETURN(ServerConnection server, Connect(ctx));
  GPUWERK_ASSIGN_OR_RETURN(
      json set,
      server.Ok("PUT", "/api/v1/admin/billing/" + PathEscape(opt.email) + "/card", &body));
  if (PrintJsonIfAsked(ctx, set)) return {};
  Print(ctx, "Recorded " + SafeText(Str(Field(set, "payment_method"), "description")) + " for " +
                 SafeText(Str(set, "email")) + " (billing account " +
                 SafeText(Str(set, "billing_account")) +
                 "): they can launch now, and their queue entries that were passed over launch "
                 "as hosts are free.\n");
  return {};
}

core::Result<void> AdminClearCardVerb(VerbContext& ctx, const AdminBillingOptions& opt) {
  GPUWERK_ASSIGN_OR_RETURN(ServerConnection server, Connect(ctx));
  GPUWERK_ASSIGN_OR_RETURN(json cleared, server.Ok("DELETE", "/api/v1/admin/billing/" +
                                                                 PathEscape(opt.email) + "/card"));
  if (PrintJsonIfAsked(ctx, cleared)) return {};
  const json& removed = Field(cleared, "removed");
  std::string text = removed.is_object() ? "Cleared " + Str(removed, "description") + " of " +
                                               Str(cleared, "email") + ". "
                                         : std::string();
  Print(ctx, SafeText(text + Str(cleared, "message")) + "\n");
  return {};
}

}  // namespace

void AddAdminBillingVerbs(CLI::App& admin, const VerbRegistry& verbs) {
  auto opt = std::make_shared<AdminBillingOptions>();
  CLI::App* billing =
      VerbRegistry::AddGroup(admin, "billing", "Record or clear people's payment methods (manual)");
  CLI::App* set = verbs.AddVerb(*billing, "set-card",
                                "Record a person's card (manual provider): they can launch at once",
                                opt, &AdminSetCardVerb);
  set->add_option("EMAIL", opt->email, "the person's email")->required();
  set->add_option("--brand", opt->brand, "the card's brand, lowercase, e.g. visa")->required();
  set->add_option("--last4", opt->last4, "the card number's last 4 digits")->required();
  set->add_option("--exp", opt->exp, "the expiry, MM/YYYY, e.g. 12/2030")->required();
  set->footer(
      "Only these facts are stored, never a card number. The person's billing account (theirs, "
      "or their team's) gets the card, replacing one on file; audited billing.set_card.");
  CLI::App* clear = verbs.AddVerb(
      *billing, "clear-card",
      "Clear a person's card: running instances keep running; new launches are refused", opt,
      &AdminClearCardVerb);
  clear->add_option("EMAIL", opt->email, "the person's email")->required();
}

}  // namespace gpuwerk::cli::internal

// admin billing set-card|clear-card EMAIL|TEAM: under the manual provider the operator records
// and clears payment methods of people's and teams' billing accounts (R-14, docs/billing.md
// "Manual provider"), audited on the server. An argument with an '@' is an email (team names
// cannot hold one); anything else names a team by its id or exact name.
#include <charconv>

#include "cli/internal/verb_groups.h"
#include "cli/output.h"

namespace gpuwerk::cli::internal {
namespace {

using nlohmann::json;

/// The options of `admin billing set-card` / `clear-card`.
struct AdminBillingOptions {
  std::string holder;  ///< a person's email, or a team's id or exact name
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

/// The card route of `holder`: /api/v1/admin/billing/{email}/card for an address,
/// /api/v1/admin/billing/teams/{team}/card for a team.
std::string CardPath(const std::string& holder) {
  if (holder.find('@') != std::string::npos) {
    return "/api/v1/admin/billing/" + PathEscape(holder) + "/card";
  }
  return "/api/v1/admin/billing/teams/" + PathEscape(holder) + "/card";
}

core::Result<void> AdminSetCardVerb(VerbContext& ctx, const AdminBillingOptions& opt) {
  GPUWERK_ASSIGN_OR_RETURN(auto exp, ParseExpiry(opt.exp));
  const json body = {{"brand", opt.brand},
                     {"last4", opt.last4},
                     {"exp_month", exp.first},
                     {"exp_year", exp.second}};
  GPUWERK_ASSIGN_OR_RETURN(ServerConnection server, Connect(ctx));
  auto answer = server.Ok("PUT", CardPath(opt.holder), &body);
  if (!answer) {
    return core::Fail(InFlagWords(
        answer.error(), {{"exp_month", "--exp"}, {"exp_year", "--exp"}, {"last4", "--last4"}}));
  }
  json set = std::move(*answer);
  if (PrintJsonIfAsked(ctx, set)) return {};
  Print(ctx, "Recorded " + SafeText(Str(Field(set, "payment_method"), "description")) + " for " +
                 SafeText(opt.holder) + " (billing account " +
                 SafeText(Str(set, "billing_account")) +
                 "): launches billed to it can start now, and queue entries that were passed "
                 "over launch as hosts are free.\n");
  return {};
}

core::Result<void> AdminClearCardVerb(VerbContext& ctx, const AdminBillingOptions& opt) {
  GPUWERK_ASSIGN_OR_RETURN(ServerConnection server, Connect(ctx));
  GPUWERK_ASSIGN_OR_RETURN(json cleared, server.Ok("DELETE", CardPath(opt.holder)));
  if (PrintJsonIfAsked(ctx, cleared)) return {};
  const json& removed = Field(cleared, "removed");
  std::string text = removed.is_object()
                         ? "Cleared " + Str(removed, "description") + " of " + opt.holder + ". "
                         : std::string();
  Print(ctx, SafeText(text + Str(cleared, "message")) + "\n");
  return {};
}

}  // namespace

void AddAdminBillingVerbs(CLI::App& admin, const VerbRegistry& verbs) {
  auto opt = std::make_shared<AdminBillingOptions>();
  CLI::App* billing = VerbRegistry::AddGroup(
      admin, "billing", "Record or clear payment methods of people and teams (manual)");
  CLI::App* set = verbs.AddVerb(
      *billing, "set-card",
      "Record a person's or a team's card (manual provider): launches can start at once", opt,
      &AdminSetCardVerb);
  set->add_option("EMAIL|TEAM", opt->holder,
                  "a person's email, or a team's id (team_…) or exact name")
      ->required()
      ->check(NamedArgument());
  set->add_option("--brand", opt->brand, "the card's brand, lowercase, e.g. visa")->required();
  set->add_option("--last4", opt->last4, "the card number's last 4 digits")->required();
  set->add_option("--exp", opt->exp, "the expiry, MM/YYYY, e.g. 12/2030")->required();
  set->footer(
      "Only these facts are stored, never a card number. The named billing account gets the card, "
      "replacing one on file; audited billing.set_card. An address with '@' names a person (a "
      "team member's is refused: name the team or an owner); anything else names a team by its "
      "id or exact name.");
  CLI::App* clear = verbs.AddVerb(
      *billing, "clear-card",
      "Clear a person's or a team's card: running instances keep running; new launches are "
      "refused",
      opt, &AdminClearCardVerb);
  clear
      ->add_option("EMAIL|TEAM", opt->holder,
                   "a person's email, or a team's id (team_…) or exact name")
      ->required()
      ->check(NamedArgument());
}

}  // namespace gpuwerk::cli::internal

#include "billing/stripe_provider.h"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "billing/manual_provider.h"
#include "billing/stripe_invoice_ledger.h"
#include "core/strings.h"

namespace gpuwerk::billing {
namespace {

core::Result<int64_t> CustomerCount(store::Transaction& tx, const std::string& account_id) {
  GPUWERK_ASSIGN_OR_RETURN(
      auto row,
      tx.QueryOne("SELECT COUNT(*) AS n FROM stripe_customers WHERE billing_account_id = ?",
                  {account_id}));
  return row ? row->Int("n") : 0;
}

/// `object[key]` when `object` is a JSON object and that field a string; "" otherwise.
std::string StringField(const nlohmann::json& object, const std::string& key) {
  if (!object.is_object()) return "";
  const auto it = object.find(key);
  return it != object.end() && it->is_string() ? it->get<std::string>() : "";
}

core::Error Unusable(std::string_view what) {
  return core::Error(core::ErrorCode::kUnavailable, "provider_unavailable",
                     "Stripe answered " + std::string(what) + "; nothing was sent");
}

}  // namespace

bool IsStripeId(std::string_view id) {
  if (id.empty() || id.size() > 255) return false;
  for (char c : id) {
    const bool ok =
        (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
    if (!ok) return false;
  }
  return true;
}

StripeProvider::StripeProvider(store::Database& db, core::Clock& clock, const StripeClient& client,
                               StripeProviderOptions options)
    : db_(db), clock_(clock), client_(client), options_(std::move(options)) {
  while (!options_.public_url.empty() && options_.public_url.back() == '/') {
    options_.public_url.pop_back();
  }
  options_.lookup_page_size = std::clamp(options_.lookup_page_size, 1, 100);
}

std::string StripeProvider::HowToAddPaymentMethod(bool may_manage) const {
  if (!may_manage) {
    return "Your team's owner manages its payment method: ask them to add a card.";
  }
  return "Add a card on the dashboard's billing page, or with 'gpuwerk billing add-card': "
         "Stripe's page takes it.";
}

core::Result<std::string> StripeProvider::EnsureCustomer(const BillingAccount& account,
                                                         const std::string& email) {
  struct Known {
    std::optional<StripeCustomer> live;
    int64_t count = 0;
  };
  GPUWERK_ASSIGN_OR_RETURN(
      Known known, db_.Read([&](store::Transaction& tx) -> core::Result<Known> {
        GPUWERK_ASSIGN_OR_RETURN(auto live, StripeCustomerTable::FindLive(tx, account.id));
        GPUWERK_ASSIGN_OR_RETURN(int64_t count, CustomerCount(tx, account.id));
        return Known{std::move(live), count};
      }));
  if (known.live) {
    auto got = client_.Call("GET", "/v1/customers/" + known.live->customer_id);
    bool gone = false;
    if (got) {
      gone = got->is_object() && got->value("deleted", false) == true;
    } else if (got.error().code == core::ErrorCode::kNotFound) {
      gone = true;
    } else {
      return core::Fail(got.error());
    }
    if (!gone) {
      // The customer's address is that of whoever manages the account now (a team's owner
      // changes; a person changes their address): Stripe mails receipts and invoices there.
      if (StringField(*got, "email") != email) {
        GPUWERK_TRY(
            client_.Call("POST", "/v1/customers/" + known.live->customer_id, {{"email", email}}));
      }
      return known.live->customer_id;
    }
    spdlog::warn(
        "billing: Stripe customer {} of billing account {} is deleted on Stripe's side; "
        "a new one replaces it",
        core::BoundedPrintable(known.live->customer_id), core::BoundedPrintable(account.id));
    GPUWERK_TRY(db_.Write([&](store::Transaction& tx) -> core::Result<void> {
      GPUWERK_TRY(StripeCustomerTable::MarkDeleted(tx, known.live->customer_id, clock_.NowUnix()));
      return {};
    }));
  }
  const std::string key = "gpuwerk-customer-" + account.id + "-" + std::to_string(known.count + 1);
  GPUWERK_ASSIGN_OR_RETURN(
      nlohmann::json created,
      client_.Call(
          "POST", "/v1/customers",
          {{"email", email}, {"name", account.name}, {"metadata[billing_account_id]", account.id}},
          key));
  const std::string id = created.value("id", "");
  if (!IsStripeId(id)) {
    return core::Fail(core::ErrorCode::kUnavailable, "provider_unavailable",
                      "Stripe answered a customer without a usable id");
  }
  return db_.Write([&](store::Transaction& tx) -> core::Result<std::string> {
    GPUWERK_ASSIGN_OR_RETURN(auto live, StripeCustomerTable::FindLive(tx, account.id));
    if (live) return live->customer_id;  // a concurrent setup recorded one first
    GPUWERK_ASSIGN_OR_RETURN(auto same, StripeCustomerTable::Find(tx, id));
    if (same) return id;  // the idempotent replay of a customer already recorded
    GPUWERK_TRY(StripeCustomerTable::Insert(
        tx, {.customer_id = id, .billing_account_id = account.id, .created_at = clock_.NowUnix()}));
    return id;
  });
}

core::Result<CardSetup> StripeProvider::BeginCardSetup(const CardSetupRequest& request) {
  GPUWERK_ASSIGN_OR_RETURN(std::string customer, EnsureCustomer(request.account, request.email));
  GPUWERK_ASSIGN_OR_RETURN(
      nlohmann::json session,
      client_.Call("POST", "/v1/checkout/sessions",
                   {{"mode", "setup"},
                    {"customer", customer},
                    {"payment_method_types[0]", "card"},
                    {"client_reference_id", request.account.id},
                    {"metadata[billing_account_id]", request.account.id},
                    {"success_url", options_.public_url + "/billing?card_setup=done"},
                    {"cancel_url", options_.public_url + "/billing?card_setup=cancelled"}}));
  CardSetup out;
  if (auto it = session.find("url"); it != session.end() && it->is_string()) out.url = *it;
  if (auto it = session.find("expires_at"); it != session.end() && it->is_number_integer()) {
    out.expires_at = it->get<int64_t>();
  }
  out.provider_ref = StringField(session, "id");
  if (out.url.empty() || !IsStripeId(out.provider_ref)) {
    return core::Fail(core::ErrorCode::kUnavailable, "provider_unavailable",
                      "Stripe answered a Checkout Session without a url or a usable id");
  }
  return out;
}

std::string StripeProvider::Describe(const PaymentMethod& method) const {
  return CardSummary(method);
}

core::Result<void> StripeProvider::Detach(const BillingAccount&, const PaymentMethod& method) {
  if (!IsStripeId(method.provider_ref)) return {};  // nothing Stripe could know
  const std::string path = "/v1/payment_methods/" + method.provider_ref;
  auto done = client_.Call("POST", path + "/detach");
  if (done) return {};
  if (done.error().code == core::ErrorCode::kNotFound) return {};
  if (done.error().api_code != "stripe_error") return core::Fail(done.error());
  // Stripe refuses to detach a method that is not attached (any more: e.g. Stripe detached it
  // itself) with a 400 that carries no code: ask Stripe whether it is still attached.
  auto found = client_.Call("GET", path);
  if (!found) {
    if (found.error().code == core::ErrorCode::kNotFound) return {};
    return core::Fail(found.error());
  }
  auto customer = found->find("customer");
  if (customer == found->end() || customer->is_null()) return {};  // not attached: done
  return core::Fail(done.error());
}

core::Result<std::string> StripeProvider::SendOnce(const StripeInvoiceRequest& fresh,
                                                   const LookUp& look_up) {
  GPUWERK_ASSIGN_OR_RETURN(
      StripeInvoiceRequest stored,
      db_.Write([&](store::Transaction& tx) -> core::Result<StripeInvoiceRequest> {
        return StripeInvoiceLedger::Prepare(tx, fresh, clock_.NowUnix());
      }));
  if (!stored.answer_id.empty()) return stored.answer_id;
  const int64_t age = clock_.NowUnix() - stored.created_at;
  // Stored this long ago (or "in the future": our clock went back, so its age is unknown), the
  // request may have made its object under a key Stripe has forgotten since: resending it would
  // make a second one. Ask Stripe first.
  if (age < 0 || age >= kStripeKeySafeAge.count()) {
    GPUWERK_ASSIGN_OR_RETURN(std::optional<std::string> found, look_up());
    if (found) {
      spdlog::info(
          "billing: invoice {}: request {} had no answer and was stored {} s ago, past what "
          "Stripe's idempotency key is sure to cover; Stripe has {} for it: recorded as its "
          "answer, not sent again",
          core::BoundedPrintable(stored.invoice_id), core::BoundedPrintable(stored.idempotency_key),
          age, core::BoundedPrintable(*found));
      GPUWERK_TRY(db_.Write([&](store::Transaction& tx) -> core::Result<void> {
        return StripeInvoiceLedger::Answered(tx, stored.idempotency_key, *found, clock_.NowUnix());
      }));
      return *found;
    }
    spdlog::info(
        "billing: invoice {}: request {} had no answer and was stored {} s ago; Stripe has "
        "nothing for it: sending it (same key, same body)",
        core::BoundedPrintable(stored.invoice_id), core::BoundedPrintable(stored.idempotency_key),
        age);
  }
  GPUWERK_ASSIGN_OR_RETURN(
      nlohmann::json answer,
      client_.CallEncoded("POST", stored.path, stored.body, stored.idempotency_key));
  const std::string id = StringField(answer, "id");
  if (!IsStripeId(id)) {
    return core::Fail(core::ErrorCode::kUnavailable, "provider_unavailable",
                      "Stripe answered without a usable id");
  }
  GPUWERK_TRY(db_.Write([&](store::Transaction& tx) -> core::Result<void> {
    return StripeInvoiceLedger::Answered(tx, stored.idempotency_key, id, clock_.NowUnix());
  }));
  return id;
}

core::Result<std::optional<std::string>> StripeProvider::FindByMetadata(
    std::string_view path, const std::string& customer, const std::string& key,
    const std::string& value) const {
  std::string after;
  for (int page = 0; page < kMaxLookUpPages; ++page) {
    StripeForm query{{"customer", customer}, {"limit", std::to_string(options_.lookup_page_size)}};
    if (!after.empty()) query.emplace_back("starting_after", after);
    GPUWERK_ASSIGN_OR_RETURN(nlohmann::json list, client_.Call("GET", path, query));
    const auto data = list.is_object() ? list.find("data") : list.end();
    if (!list.is_object() || data == list.end() || !data->is_array()) {
      return core::Fail(Unusable("a list without data"));
    }
    for (const nlohmann::json& object : *data) {
      const std::string id = StringField(object, "id");
      if (!IsStripeId(id)) return core::Fail(Unusable("a listed object without a usable id"));
      const auto metadata = object.find("metadata");
      if (metadata != object.end() && StringField(*metadata, key) == value) {
        return std::optional<std::string>(id);
      }
      after = id;
    }
    const auto more = list.find("has_more");
    if (more == list.end() || !more->is_boolean() || !more->get<bool>()) {
      return std::optional<std::string>();
    }
    if (data->empty()) return core::Fail(Unusable("an empty page with has_more"));
  }
  return core::Fail(core::ErrorCode::kUnavailable, "provider_unavailable",
                    "Stripe's list " + std::string(path) + " has more than " +
                        std::to_string(kMaxLookUpPages) +
                        " pages for the customer; the object was not found and nothing was sent");
}

core::Result<std::optional<std::string>> StripeProvider::FindFinalized(
    const std::string& stripe_invoice) const {
  GPUWERK_ASSIGN_OR_RETURN(nlohmann::json invoice,
                           client_.Call("GET", "/v1/invoices/" + stripe_invoice));
  const std::string status = StringField(invoice, "status");
  if (status.empty()) return core::Fail(Unusable("an invoice without a status"));
  if (status == "draft") return std::optional<std::string>();
  return std::optional<std::string>(stripe_invoice);
}

core::Result<PushedInvoice> StripeProvider::PushInvoice(const InvoiceToPush& invoice) {
  using Known = std::pair<std::optional<PushedInvoice>, std::optional<StripeCustomer>>;
  GPUWERK_ASSIGN_OR_RETURN(
      Known known, db_.Read([&](store::Transaction& tx) -> core::Result<Known> {
        GPUWERK_ASSIGN_OR_RETURN(auto pushed, StripeInvoiceLedger::Pushed(tx, invoice.id));
        GPUWERK_ASSIGN_OR_RETURN(auto customer,
                                 StripeCustomerTable::FindLive(tx, invoice.billing_account_id));
        return Known{std::move(pushed), std::move(customer)};
      }));
  if (known.first) return *known.first;  // done once: never again, whatever Stripe remembers
  if (!known.second) {
    return core::Fail(core::ErrorCode::kFailedPrecondition, "no_customer",
                      "The billing account has no Stripe customer (no card was ever added).");
  }
  const std::string& customer = known.second->customer_id;
  for (const InvoiceLineToPush& line : invoice.lines) {
    GPUWERK_TRY(SendOnce(
        {.idempotency_key = "gpuwerk-invoiceitem-" + line.id,
         .invoice_id = invoice.id,
         .path = "/v1/invoiceitems",
         .body = EncodeStripeForm({{"customer", customer},
                                   {"amount", std::to_string(line.amount_minor)},
                                   {"currency", invoice.currency},
                                   {"description", line.description},
                                   {"metadata[gpuwerk_line]", line.id}})},
        [&] { return FindByMetadata("/v1/invoiceitems", customer, "gpuwerk_line", line.id); }));
  }
  GPUWERK_ASSIGN_OR_RETURN(
      std::string stripe_invoice,
      SendOnce(
          {.idempotency_key = "gpuwerk-invoice-" + invoice.id,
           .invoice_id = invoice.id,
           .path = "/v1/invoices",
           .body = EncodeStripeForm({{"customer", customer},
                                     {"pending_invoice_items_behavior", "include"},
                                     {"metadata[gpuwerk_invoice]", invoice.id},
                                     {"metadata[month]", invoice.month}})},
          [&] { return FindByMetadata("/v1/invoices", customer, "gpuwerk_invoice", invoice.id); }));
  GPUWERK_TRY(SendOnce({.idempotency_key = "gpuwerk-finalize-" + invoice.id,
                        .invoice_id = invoice.id,
                        .path = "/v1/invoices/" + stripe_invoice + "/finalize",
                        .body = ""},
                       [&] { return FindFinalized(stripe_invoice); }));
  PushedInvoice pushed{.provider_ref = stripe_invoice, .status = "open"};
  GPUWERK_TRY(db_.Write([&](store::Transaction& tx) -> core::Result<void> {
    return StripeInvoiceLedger::RecordPushed(tx, invoice.id, pushed, clock_.NowUnix());
  }));
  return pushed;
}

}  // namespace gpuwerk::billing

#!/usr/bin/python3
"""A local stand-in for the Stripe API endpoints gpuwerk uses (a test double, not Stripe).

Python 3 standard library only. Run:

    /usr/bin/python3 tests/support/stripe_stand_in.py PORT [--api-key KEY]
        [--webhook-url URL] [--webhook-secret SECRET] [--subset FILE]

Listens on 127.0.0.1:PORT (0 picks a free port) and prints "listening <port>" as the first line
on stdout once it accepts connections. Runs until killed.

What it answers, as Stripe's API version pinned in the subset file does (api_version in
tests/support/stripe_openapi_subset.json, generated from github.com/stripe/openapi by
scripts/stripe_openapi_subset.py; object fields start from that description's fixtures):

  POST   /v1/customers                         GET/POST/DELETE /v1/customers/{id}
  POST   /v1/checkout/sessions (mode=setup)    GET /v1/checkout/sessions/{id}
  GET    /v1/setup_intents/{id}                GET /v1/payment_methods/{id}
  POST   /v1/payment_methods/{id}/detach       (records payment_method.detached)
  POST   /v1/invoiceitems                      POST /v1/invoices   GET /v1/invoices/{id}
  POST   /v1/invoices/{id}/finalize            POST /v1/invoices/{id}/pay
  GET    /v1/invoiceitems  GET /v1/invoices    lists: Stripe's list object (newest first,
         `limit` 1..100 (10 when not given), `starting_after` or `ending_before` an id of the
         list, `has_more`), filtered by customer, created, and for invoice items invoice and
         pending, for invoices status and collection_method

Requests are form-encoded with `Authorization: Bearer KEY`. Every parameter is checked against
the names (and enum values) the OpenAPI description lists for that endpoint: an unknown one is
answered 400 `parameter_unknown`, a missing required one `parameter_missing`, as Stripe does,
and recorded as a violation (GET /_test/requests). Errors have Stripe's shape
{"error": {"type", "code", "message", "param", "doc_url"}}. A deleted customer reads as
{"id", "object": "customer", "deleted": true}; using it elsewhere is `resource_missing`.

Idempotency keys (`Idempotency-Key` on POST), as Stripe documents them: the first answer of an
endpoint that started executing is stored with the key; the same key with the same endpoint and
parameters gets that answer again (header `Idempotent-Replayed: true`); the same key with other
parameters or another endpoint gets 400 `idempotency_error`; the same key while the first request
still runs gets 409 `idempotency_error`. Parameter validation errors are not stored. Keys live
until POST /_test/idempotency/expire (Stripe keeps them at least 24 hours).

Test hooks (JSON in, JSON out; not Stripe's):
  POST /_test/webhook {"url", "secret"}          where and with which secret events are signed
  POST /_test/checkout/sessions/{id}/complete    "pays" a Checkout: creates the PaymentMethod,
       {"card": {"brand","last4","exp_month","exp_year"}, "deliver": true}
       attaches it, succeeds the SetupIntent, completes the session, records the events
       payment_method.attached, setup_intent.succeeded, checkout.session.completed and, with
       "deliver", delivers them in that order; answers {"events": [ids], "deliveries": [...]}
  POST /_test/payment_methods/{id}/detach {"deliver"}     payment_method.detached
  POST /_test/invoices/{id}/payment_failed {"deliver"}    invoice.payment_failed
  POST /_test/invoices/{id}/paid {"deliver"}              invoice.paid
  POST /_test/events/{id}/deliver {"times": 1, "concurrent": false, "secrets": [...],
       "timestamp": T, "timestamp_offset": S, "extra_schemes": {"v0": "..."}, "tamper": false}
       delivers an event again (duplicates, out of order, concurrently, signed with other
       secrets or times); answers {"deliveries": [{"status", "body"}...]}
  GET  /_test/events                             every event, oldest first
  GET  /_test/requests                           every API request: method, path, params,
                                                 idempotency_key, stripe_version, status,
                                                 violations
  GET  /_test/objects/{kind}                     customers, checkout_sessions, setup_intents,
                                                 payment_methods, invoiceitems, invoices
  POST /_test/idempotency/expire                 forgets every stored key (Stripe's 24 h)
  POST /_test/faults {"method","path","action","status","error","count","customer"}
       the next `count` (-1: every) matching requests: action "drop" runs the request and then
       closes the connection without an answer (a lost answer); action "status" answers
       status/error without running it. "customer" matches the request's customer parameter.
  DELETE /_test/faults                           forgets every fault not used up yet

Webhooks are POSTed as JSON with `Stripe-Signature: t=<unix>,v1=<hex hmac-sha256 of "t.body">`
(one v1 per secret, in the order given).
"""

import argparse
import copy
import hashlib
import hmac
import http.server
import json
import os
import re
import secrets as pysecrets
import string
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
DOC_URL = "https://stripe.com/docs/error-codes/"


class StripeError(Exception):
    def __init__(self, status, type_, message, code=None, param=None, store=True, extra=None):
        super().__init__(message)
        self.status = status
        self.body = {"type": type_, "message": message}
        if code:
            self.body["code"] = code
            self.body["doc_url"] = DOC_URL + code.replace("_", "-")
        if param:
            self.body["param"] = param
        if extra:
            self.body.update(extra)
        # Stripe stores an idempotent result only when the endpoint started executing.
        self.store = store


def no_such(kind, object_id, param="id"):
    return StripeError(404 if param == "id" else 400, "invalid_request_error",
                       "No such %s: '%s'" % (kind, object_id), code="resource_missing",
                       param=param)


def random_id(prefix, length=24):
    alphabet = string.ascii_letters + string.digits
    return prefix + "".join(pysecrets.choice(alphabet) for _ in range(length))


def pattern_regex(pattern):
    escaped = re.escape(pattern).replace(re.escape("[*]"), r"\[[^\[\]]+\]")
    return re.compile("^" + escaped + "$")


class Spec:
    """The subset of Stripe's OpenAPI description: parameter names per endpoint, fixtures."""

    def __init__(self, path):
        with open(path) as f:
            data = json.load(f)
        self.api_version = data["api_version"]
        self.fixtures = data["fixtures"]
        self.endpoints = {}
        self.lists = {}  # "GET /v1/…" -> {"fields", "url"}: the list object it answers
        for key, endpoint in data["endpoints"].items():
            if "list" in endpoint:
                self.lists[key] = endpoint["list"]
            method, template = key.split(" ", 1)
            path_re = re.compile("^" + re.sub(r"\\\{[a-z_]+\\\}", r"([^/]+)",
                                              re.escape(template)) + "$")
            params = [(pattern_regex(name), name, entry.get("enum"))
                      for name, entry in endpoint["params"].items()]
            self.endpoints[(method, template)] = (path_re, params, endpoint["required"])

    def check(self, method, path, pairs):
        """Violations (Stripe error objects) of `pairs` for the endpoint, [] when none."""
        for (m, template), (path_re, params, required) in self.endpoints.items():
            if m == method and path_re.match(path):
                break
        else:
            return None
        violations = []
        seen = set()
        for key, value in pairs:
            normal = re.sub(r"\[\d+\]", "[]", key)
            seen.add(re.split(r"\[", key, 1)[0])
            match = None
            for regex, name, enum in params:
                if regex.match(normal):
                    match = (name, enum)
                    break
            if match is None:
                violations.append({"type": "invalid_request_error", "code": "parameter_unknown",
                                   "param": key,
                                   "message": "Received unknown parameter: %s" % key})
            elif match[1] is not None and value not in match[1] and value != "":
                violations.append({"type": "invalid_request_error", "param": key,
                                   "message": "Invalid %s: must be one of %s" %
                                   (key, ", ".join(match[1]))})
        for name in required:
            if name not in seen:
                violations.append({"type": "invalid_request_error", "code": "parameter_missing",
                                   "param": name,
                                   "message": "Missing required param: %s." % name})
        return violations


class State:
    def __init__(self, spec, api_key, webhook_url, webhook_secret):
        self.spec = spec
        self.api_key = api_key
        self.webhook_url = webhook_url
        self.webhook_secret = webhook_secret
        self.lock = threading.RLock()
        self.objects = {k: {} for k in ("customers", "checkout_sessions", "setup_intents",
                                         "payment_methods", "invoiceitems", "invoices")}
        self.events = []
        self.requests = []
        self.idempotency = {}   # key -> {"endpoint", "params", "status", "body"}
        self.in_flight = set()
        self.faults = []
        self.invoice_counter = 0
        self.base_url = ""

    def fixture(self, resource, /, **fields):
        obj = copy.deepcopy(self.spec.fixtures[resource])
        obj.update(fields)
        return obj

    def event(self, type_, obj, previous=None, request=None):
        data = {"object": copy.deepcopy(obj)}
        if previous is not None:
            data["previous_attributes"] = previous
        evt = self.fixture("event", id=random_id("evt_"), api_version=self.spec.api_version,
                           created=int(time.time()), data=data, type=type_,
                           pending_webhooks=1,
                           request=request or {"id": None, "idempotency_key": None})
        self.events.append(evt)
        return evt


def first(pairs, key, default=None):
    for k, v in pairs:
        if k == key:
            return v
    return default


def prefixed(pairs, prefix):
    """{sub: value} of keys `prefix[sub]`."""
    out = {}
    for k, v in pairs:
        if k.startswith(prefix + "[") and k.endswith("]"):
            out[k[len(prefix) + 1:-1]] = v
    return out


def to_int(pairs, key, required=False):
    value = first(pairs, key)
    if value is None:
        if required:
            raise StripeError(400, "invalid_request_error", "Missing required param: %s." % key,
                              code="parameter_missing", param=key, store=False)
        return None
    if not re.fullmatch(r"-?\d+", value):
        raise StripeError(400, "invalid_request_error",
                          "Invalid integer: %s" % value, code="parameter_invalid_integer",
                          param=key, store=False)
    return int(value)


class Api:
    """Stripe's endpoints. Each method runs under the state lock and returns (status, body)."""

    def __init__(self, state):
        self.s = state

    # customers -----------------------------------------------------------------------------
    def live_customer(self, customer_id, param="customer"):
        customer = self.s.objects["customers"].get(customer_id)
        if customer is None or customer.get("deleted"):
            raise no_such("customer", customer_id, param)
        return customer

    def create_customer(self, pairs):
        customer = self.s.fixture(
            "customer", id=random_id("cus_", 14), created=int(time.time()),
            email=first(pairs, "email"), name=first(pairs, "name"),
            description=first(pairs, "description"), metadata=prefixed(pairs, "metadata"),
            invoice_prefix=random_id("", 8).upper())
        customer["invoice_settings"]["default_payment_method"] = None
        self.s.objects["customers"][customer["id"]] = customer
        self.s.event("customer.created", customer)
        return 200, customer

    def get_customer(self, customer_id):
        customer = self.s.objects["customers"].get(customer_id)
        if customer is None:
            raise no_such("customer", customer_id)
        if customer.get("deleted"):
            return 200, self.s.fixture("deleted_customer", id=customer_id)
        return 200, customer

    def update_customer(self, customer_id, pairs):
        customer = self.s.objects["customers"].get(customer_id)
        if customer is None or customer.get("deleted"):
            raise no_such("customer", customer_id)
        previous = {}
        pm_key = "invoice_settings[default_payment_method]"
        pm_id = first(pairs, pm_key)
        if pm_id is not None:
            if pm_id != "":
                pm = self.s.objects["payment_methods"].get(pm_id)
                if pm is None or pm.get("customer") != customer_id:
                    raise StripeError(
                        400, "invalid_request_error",
                        "The customer does not have a payment method with the ID %s. The payment"
                        " method must be attached to the customer." % pm_id,
                        code="resource_missing", param=pm_key)
            previous["invoice_settings"] = copy.deepcopy(customer["invoice_settings"])
            customer["invoice_settings"]["default_payment_method"] = pm_id or None
        for field in ("email", "name", "description"):
            if first(pairs, field) is not None:
                previous[field] = customer.get(field)
                customer[field] = first(pairs, field) or None
        metadata = prefixed(pairs, "metadata")
        if metadata:
            previous["metadata"] = dict(customer["metadata"])
            for k, v in metadata.items():
                if v == "":
                    customer["metadata"].pop(k, None)
                else:
                    customer["metadata"][k] = v
        self.s.event("customer.updated", customer, previous)
        return 200, customer

    def delete_customer(self, customer_id):
        customer = self.s.objects["customers"].get(customer_id)
        if customer is None or customer.get("deleted"):
            raise no_such("customer", customer_id)
        customer["deleted"] = True
        for pm in self.s.objects["payment_methods"].values():
            if pm.get("customer") == customer_id:
                pm["customer"] = None
        self.s.event("customer.deleted", customer)
        return 200, self.s.fixture("deleted_customer", id=customer_id)

    # checkout sessions, setup intents, payment methods --------------------------------------
    def create_checkout_session(self, pairs):
        mode = first(pairs, "mode")
        if mode is None:
            raise StripeError(400, "invalid_request_error", "Missing required param: mode.",
                              code="parameter_missing", param="mode", store=False)
        if mode != "setup":
            raise StripeError(400, "invalid_request_error",
                              "This stand-in implements Checkout in setup mode only.",
                              param="mode")
        types = [v for k, v in pairs if re.fullmatch(r"payment_method_types\[\d*\]", k)]
        currency = first(pairs, "currency")
        if not types and currency is None:
            raise StripeError(400, "invalid_request_error",
                              "currency is required in setup mode when payment_method_types is "
                              "not set.", code="parameter_missing", param="currency")
        customer_id = first(pairs, "customer")
        if customer_id is not None:
            self.live_customer(customer_id)
        now = int(time.time())
        setup_intent = self.s.fixture(
            "setup_intent", id=random_id("seti_"), created=now, customer=customer_id,
            payment_method_types=types or ["card"],
            metadata=prefixed(pairs, "setup_intent_data[metadata]"))
        setup_intent["client_secret"] = setup_intent["id"] + "_secret_" + random_id("", 24)
        self.s.objects["setup_intents"][setup_intent["id"]] = setup_intent
        session_id = random_id("cs_test_", 58)
        session = self.s.fixture(
            "checkout.session", id=session_id, created=now, expires_at=now + 24 * 3600,
            mode="setup", customer=customer_id, client_reference_id=first(
                pairs, "client_reference_id"), success_url=first(pairs, "success_url"),
            cancel_url=first(pairs, "cancel_url"), metadata=prefixed(pairs, "metadata"),
            payment_method_types=types or ["card"], currency=currency, payment_intent=None,
            setup_intent=setup_intent["id"], status="open", payment_status="no_payment_required",
            url="%s/c/pay/%s" % (self.s.base_url, session_id), customer_details=None)
        self.s.objects["checkout_sessions"][session_id] = session
        return 200, session

    def get(self, kind, label, object_id):
        obj = self.s.objects[kind].get(object_id)
        if obj is None:
            raise no_such(label, object_id)
        return 200, obj

    def complete_checkout(self, session_id, card):
        session = self.s.objects["checkout_sessions"].get(session_id)
        if session is None:
            raise no_such("checkout.session", session_id)
        if session["status"] != "open":
            raise StripeError(400, "invalid_request_error",
                              "This Checkout Session is no longer open.")
        customer_id = session["customer"]
        if customer_id is not None:
            self.live_customer(customer_id)
        pm = self.s.fixture("payment_method", id=random_id("pm_"), created=int(time.time()),
                            customer=customer_id, metadata={})
        pm["card"].update({k: card[k] for k in ("brand", "last4", "exp_month", "exp_year")
                           if k in card})
        pm["card"]["networks"]["available"] = [pm["card"]["brand"]]
        self.s.objects["payment_methods"][pm["id"]] = pm
        setup_intent = self.s.objects["setup_intents"][session["setup_intent"]]
        setup_intent.update(status="succeeded", payment_method=pm["id"],
                            latest_attempt=random_id("setatt_"))
        session.update(status="complete")
        events = []
        if customer_id is not None:
            events.append(self.s.event("payment_method.attached", pm))
        events.append(self.s.event("setup_intent.succeeded", setup_intent))
        events.append(self.s.event("checkout.session.completed", session))
        return events

    def detach_payment_method(self, pm_id):
        """Detaches a PaymentMethod from its customer (no longer the customer's default for
        invoices); the payment_method.detached event. A method not attached is Stripe's 400
        invalid_request_error, which carries no `code`."""
        pm = self.s.objects["payment_methods"].get(pm_id)
        if pm is None:
            raise no_such("PaymentMethod", pm_id)
        customer_id = pm.get("customer")
        if customer_id is None:
            raise StripeError(400, "invalid_request_error",
                              "The payment method you provided is not attached to a customer so "
                              "detachment is impossible.")
        pm["customer"] = None
        customer = self.s.objects["customers"].get(customer_id)
        if customer and customer["invoice_settings"]["default_payment_method"] == pm_id:
            customer["invoice_settings"]["default_payment_method"] = None
        return [self.s.event("payment_method.detached", pm, {"customer": customer_id})]

    def api_detach_payment_method(self, pm_id, pairs):
        """POST /v1/payment_methods/{id}/detach: the PaymentMethod, its customer now null."""
        self.detach_payment_method(pm_id)
        return 200, self.s.objects["payment_methods"][pm_id]

    # invoice items and invoices -------------------------------------------------------------
    def create_invoice_item(self, pairs):
        customer_id = first(pairs, "customer")
        self.live_customer(customer_id)
        amount = to_int(pairs, "amount", required=True)
        currency = first(pairs, "currency")
        if currency is None:
            raise StripeError(400, "invalid_request_error", "Missing required param: currency.",
                              code="parameter_missing", param="currency", store=False)
        if not re.fullmatch(r"[a-z]{3}", currency):
            raise StripeError(400, "invalid_request_error", "Invalid currency: %s." % currency,
                              param="currency")
        now = int(time.time())
        period = {"start": to_int(pairs, "period[start]") or now,
                  "end": to_int(pairs, "period[end]") or now}
        item = self.s.fixture(
            "invoiceitem", id=random_id("ii_"), amount=amount, currency=currency,
            customer=customer_id, date=now, description=first(pairs, "description"),
            invoice=None, metadata=prefixed(pairs, "metadata"), period=period, price=None,
            quantity=1, unit_amount=amount, unit_amount_decimal=str(amount))
        self.s.objects["invoiceitems"][item["id"]] = item
        return 200, item

    def create_invoice(self, pairs):
        customer_id = first(pairs, "customer")
        if customer_id is None:
            raise StripeError(400, "invalid_request_error", "Missing required param: customer.",
                              code="parameter_missing", param="customer", store=False)
        customer = self.live_customer(customer_id)
        behavior = first(pairs, "pending_invoice_items_behavior", "exclude")
        now = int(time.time())
        invoice_id = random_id("in_")
        lines = []
        currency = first(pairs, "currency")
        if behavior in ("include", "include_and_require"):
            for item in self.s.objects["invoiceitems"].values():
                if item["customer"] != customer_id or item["invoice"] is not None:
                    continue
                if currency is None:
                    currency = item["currency"]
                if item["currency"] != currency:
                    continue
                item["invoice"] = invoice_id
                lines.append({"id": random_id("il_"), "object": "line_item",
                              "amount": item["amount"], "amount_excluding_tax": item["amount"],
                              "currency": item["currency"], "description": item["description"],
                              "discount_amounts": [], "discountable": True, "discounts": [],
                              "invoice_item": item["id"], "livemode": False,
                              "metadata": item["metadata"], "period": item["period"],
                              "price": None, "proration": False, "quantity": 1,
                              "type": "invoiceitem"})
            if behavior == "include_and_require" and not lines:
                raise StripeError(400, "invalid_request_error",
                                  "Nothing to invoice for customer",
                                  code="invoice_no_customer_line_items", param="customer")
        total = sum(line["amount"] for line in lines)
        invoice = self.s.fixture(
            "invoice", id=invoice_id, created=now, customer=customer_id,
            currency=currency or "usd", status="draft", number=None, paid=False,
            attempted=False, attempt_count=0, amount_due=total, amount_paid=0,
            amount_remaining=total, subtotal=total, subtotal_excluding_tax=total, total=total,
            total_excluding_tax=total, tax=None, description=first(pairs, "description"),
            metadata=prefixed(pairs, "metadata"), customer_email=customer.get("email"),
            customer_name=customer.get("name"), hosted_invoice_url=None, invoice_pdf=None,
            auto_advance=first(pairs, "auto_advance", "true") == "true",
            collection_method=first(pairs, "collection_method", "charge_automatically"),
            period_start=now, period_end=now, subscription=None, charge=None,
            payment_intent=None, webhooks_delivered_at=None,
            lines={"object": "list", "data": lines, "has_more": False,
                   "total_count": len(lines), "url": "/v1/invoices/%s/lines" % invoice_id})
        invoice["status_transitions"] = {"finalized_at": None, "marked_uncollectible_at": None,
                                         "paid_at": None, "voided_at": None}
        self.s.objects["invoices"][invoice_id] = invoice
        self.s.event("invoice.created", invoice)
        return 200, invoice

    def invoice(self, invoice_id):
        invoice = self.s.objects["invoices"].get(invoice_id)
        if invoice is None:
            raise no_such("invoice", invoice_id)
        return invoice

    def finalize_invoice(self, invoice_id):
        invoice = self.invoice(invoice_id)
        if invoice["status"] != "draft":
            raise StripeError(400, "invalid_request_error",
                              "This invoice is already finalized, you can't re-finalize a "
                              "non-draft invoice.", code="invoice_not_editable")
        customer = self.s.objects["customers"][invoice["customer"]]
        self.s.invoice_counter += 1
        now = int(time.time())
        invoice.update(status="open", number="%s-%04d" % (customer["invoice_prefix"],
                                                          self.s.invoice_counter),
                       hosted_invoice_url="%s/i/%s" % (self.s.base_url, invoice_id))
        invoice["status_transitions"]["finalized_at"] = now
        self.s.event("invoice.finalized", invoice)
        if invoice["amount_due"] == 0:
            self.mark_paid(invoice)
        return 200, invoice

    def mark_paid(self, invoice):
        invoice.update(status="paid", paid=True, attempted=True, amount_paid=invoice["amount_due"],
                       amount_remaining=0)
        invoice["status_transitions"]["paid_at"] = int(time.time())
        return [self.s.event("invoice.paid", invoice)]

    def pay_invoice(self, invoice_id, pairs=()):
        """POST /v1/invoices/{id}/pay: charges `payment_method` when given (it must be attached to
        the invoice's customer, else Stripe's 400 resource_missing), else the customer's
        invoice_settings.default_payment_method; paid, or invoice.payment_failed and a 400."""
        invoice = self.invoice(invoice_id)
        if invoice["status"] == "paid":
            raise StripeError(400, "invalid_request_error", "Invoice is already paid",
                              code="invoice_already_paid")
        if invoice["status"] != "open":
            raise StripeError(400, "invalid_request_error",
                              "You can only pay an invoice that is open.")
        customer = self.s.objects["customers"][invoice["customer"]]
        pm_id = first(pairs, "payment_method")
        if pm_id is not None:
            pm = self.s.objects["payment_methods"].get(pm_id)
            if pm is None or pm.get("customer") != invoice["customer"]:
                raise StripeError(400, "invalid_request_error",
                                  "No such PaymentMethod: '%s'" % pm_id, code="resource_missing",
                                  param="payment_method")
            if pm["card"].get("last4") == "0002":  # Stripe's test card that is declined
                invoice.update(attempted=True, attempt_count=invoice["attempt_count"] + 1)
                self.s.event("invoice.payment_failed", invoice)
                raise StripeError(402, "card_error", "Your card was declined.",
                                  code="card_declined")
        elif not customer["invoice_settings"]["default_payment_method"]:
            invoice.update(attempted=True, attempt_count=invoice["attempt_count"] + 1)
            self.s.event("invoice.payment_failed", invoice)
            raise StripeError(400, "invalid_request_error",
                              "This customer has no attached payment source or default payment "
                              "method. Please consider adding a default payment method.")
        self.mark_paid(invoice)
        return 200, invoice

    def fail_invoice_payment(self, invoice_id):
        invoice = self.invoice(invoice_id)
        invoice.update(attempted=True, attempt_count=invoice["attempt_count"] + 1)
        return [self.s.event("invoice.payment_failed", invoice)]

    # lists -----------------------------------------------------------------------------------
    def list_objects(self, endpoint, kind, label, pairs, keep):
        """Stripe's list object for `endpoint` ("GET /v1/…"): the objects of `kind` that `keep`
        and the common filters (customer, created) let through, newest first, one page of
        `limit` after `starting_after` or before `ending_before`."""
        shape = self.s.spec.lists[endpoint]
        limit = to_int(pairs, "limit")
        if limit is None:
            limit = 10
        if not 1 <= limit <= 100:
            raise StripeError(400, "invalid_request_error",
                              "This value must be greater than or equal to 1 and less than or "
                              "equal to 100.", param="limit", store=False)
        after = first(pairs, "starting_after")
        before = first(pairs, "ending_before")
        if after is not None and before is not None:
            raise StripeError(400, "invalid_request_error",
                              "You may only specify one of these parameters: ending_before, "
                              "starting_after.", store=False)
        customer_id = first(pairs, "customer")
        if customer_id is not None and customer_id not in self.s.objects["customers"]:
            raise no_such("customer", customer_id, "customer")
        created = {op: to_int(pairs, "created[%s]" % op) for op in ("gt", "gte", "lt", "lte")}
        exact = to_int(pairs, "created")

        def wanted(obj):
            if customer_id is not None and obj.get("customer") != customer_id:
                return False
            c = obj.get("created", obj.get("date"))
            if exact is not None and c != exact:
                return False
            for op, bound in created.items():
                if bound is None:
                    continue
                if not {"gt": c > bound, "gte": c >= bound, "lt": c < bound,
                        "lte": c <= bound}[op]:
                    return False
            return keep(obj)

        # Insertion order is creation order: newest first is the reverse.
        objects = [o for o in reversed(list(self.s.objects[kind].values())) if wanted(o)]
        ids = [o["id"] for o in objects]
        if after is not None:
            if after not in ids:
                raise no_such(label, after, "starting_after")
            start = ids.index(after) + 1
            page = objects[start:start + limit]
            has_more = start + limit < len(objects)
        elif before is not None:
            if before not in ids:
                raise no_such(label, before, "ending_before")
            end = ids.index(before)
            page = objects[max(0, end - limit):end]
            has_more = end - limit > 0
        else:
            page = objects[:limit]
            has_more = limit < len(objects)
        answer = {"object": "list", "data": page, "has_more": has_more, "url": shape["url"]}
        missing = [f for f in shape["fields"] if f not in answer]
        assert not missing, "the list object lacks %s" % missing
        return 200, answer

    def list_invoice_items(self, pairs):
        invoice = first(pairs, "invoice")
        pending = first(pairs, "pending")
        if pending not in (None, "true", "false"):
            raise StripeError(400, "invalid_request_error", "Invalid boolean: %s" % pending,
                              param="pending", store=False)

        def keep(item):
            if invoice is not None and item.get("invoice") != invoice:
                return False
            if pending is not None and (item.get("invoice") is None) != (pending == "true"):
                return False
            return True
        return self.list_objects("GET /v1/invoiceitems", "invoiceitems", "invoiceitem", pairs,
                                 keep)

    def list_invoices(self, pairs):
        status = first(pairs, "status")
        method = first(pairs, "collection_method")

        def keep(invoice):
            if status is not None and invoice.get("status") != status:
                return False
            if method is not None and invoice.get("collection_method") != method:
                return False
            return True
        return self.list_objects("GET /v1/invoices", "invoices", "invoice", pairs, keep)


ROUTES = [
    ("POST", r"/v1/customers", "create_customer"),
    ("GET", r"/v1/customers/([^/]+)", "get_customer"),
    ("POST", r"/v1/customers/([^/]+)", "update_customer"),
    ("DELETE", r"/v1/customers/([^/]+)", "delete_customer"),
    ("POST", r"/v1/checkout/sessions", "create_checkout_session"),
    ("GET", r"/v1/checkout/sessions/([^/]+)", ("checkout_sessions", "checkout.session")),
    ("GET", r"/v1/setup_intents/([^/]+)", ("setup_intents", "setup_intent")),
    ("GET", r"/v1/payment_methods/([^/]+)", ("payment_methods", "PaymentMethod")),
    ("POST", r"/v1/payment_methods/([^/]+)/detach", "api_detach_payment_method"),
    ("GET", r"/v1/invoiceitems", "list_invoice_items"),
    ("POST", r"/v1/invoiceitems", "create_invoice_item"),
    ("GET", r"/v1/invoices", "list_invoices"),
    ("POST", r"/v1/invoices", "create_invoice"),
    ("GET", r"/v1/invoices/([^/]+)", ("invoices", "invoice")),
    ("POST", r"/v1/invoices/([^/]+)/finalize", "finalize_invoice"),
    ("POST", r"/v1/invoices/([^/]+)/pay", "pay_invoice"),
]


def sign(payload, timestamp, secret_list, extra_schemes=None):
    parts = ["t=%d" % timestamp]
    for secret in secret_list:
        mac = hmac.new(secret.encode(), b"%d." % timestamp + payload, hashlib.sha256)
        parts.append("v1=" + mac.hexdigest())
    for scheme, value in (extra_schemes or {}).items():
        parts.append("%s=%s" % (scheme, value))
    return ",".join(parts)


def deliver(state, event, times=1, concurrent=False, secret_list=None, timestamp=None,
            timestamp_offset=0, extra_schemes=None, tamper=False):
    """POSTs the event to the webhook URL `times` times; answers [{"status", "body"}]."""
    with state.lock:
        url = state.webhook_url
        if secret_list is None:
            secret_list = [state.webhook_secret]
    if not url:
        return [{"status": 0, "body": "no webhook URL configured"}]
    payload = json.dumps(event, indent=2).encode()
    results = [None] * times
    barrier = threading.Barrier(times) if concurrent and times > 1 else None

    def one(i):
        t = timestamp if timestamp is not None else int(time.time()) + timestamp_offset
        header = sign(payload, t, secret_list, extra_schemes)
        body = payload.replace(b'"livemode": false', b'"livemode": true') if tamper else payload
        request = urllib.request.Request(url, data=body, method="POST", headers={
            "Content-Type": "application/json; charset=utf-8",
            "User-Agent": "Stripe/1.0 (+https://stripe.com/docs/webhooks)",
            "Stripe-Signature": header})
        if barrier is not None:
            barrier.wait(10)
        try:
            with urllib.request.urlopen(request, timeout=30) as answer:
                results[i] = {"status": answer.status, "body": answer.read().decode("utf-8",
                                                                                    "replace")}
        except urllib.error.HTTPError as e:
            results[i] = {"status": e.code, "body": e.read().decode("utf-8", "replace")}
        except OSError as e:
            results[i] = {"status": 0, "body": str(e)}

    if concurrent and times > 1:
        threads = [threading.Thread(target=one, args=(i,)) for i in range(times)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    else:
        for i in range(times):
            one(i)
    return results


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "stripe-stand-in"

    def log_message(self, fmt, *args):
        sys.stderr.write("stripe-stand-in: " + (fmt % args) + "\n")

    @property
    def state(self):
        return self.server.state

    def send_json(self, status, body, headers=None):
        data = json.dumps(body, indent=2).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Request-Id", random_id("req_", 14))
        self.send_header("Stripe-Version", self.state.spec.api_version)
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)

    def read_body(self):
        length = int(self.headers.get("Content-Length") or 0)
        if length > 1 << 20:
            raise StripeError(400, "invalid_request_error", "Request body too large", store=False)
        return self.rfile.read(length) if length else b""

    def do_GET(self):
        self.dispatch("GET")

    def do_POST(self):
        self.dispatch("POST")

    def do_DELETE(self):
        self.dispatch("DELETE")

    def dispatch(self, method):
        url = urllib.parse.urlsplit(self.path)
        try:
            body = self.read_body()
        except StripeError as e:
            self.send_json(e.status, {"error": e.body})
            return
        if url.path.startswith("/_test/"):
            self.test_hook(method, url.path, body)
            return
        if url.path.startswith("/c/pay/") and method == "GET":
            page = b"<!doctype html><title>Stripe stand-in checkout</title>"
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(page)))
            self.end_headers()
            self.wfile.write(page)
            return
        self.api(method, url, body)

    # the API -------------------------------------------------------------------------------
    def api(self, method, url, body):
        s = self.state
        query = urllib.parse.parse_qsl(url.query, keep_blank_values=True)
        form = urllib.parse.parse_qsl(body.decode("utf-8", "replace"), keep_blank_values=True)
        pairs = query + form
        key = self.headers.get("Idempotency-Key")
        version = self.headers.get("Stripe-Version")
        record = {"method": method, "path": url.path, "params": pairs, "idempotency_key": key,
                  "stripe_version": version, "status": None, "violations": []}
        with s.lock:
            s.requests.append(record)
        status, answer, headers, drop = self.api_answer(method, url.path, pairs, key, version,
                                                        record)
        record["status"] = status
        if drop:
            self.close_connection = True
            self.connection.shutdown(2)
            return
        self.send_json(status, answer, headers)

    def api_answer(self, method, path, pairs, key, version, record):
        s = self.state
        auth = self.headers.get("Authorization", "")
        if not auth.startswith("Bearer "):
            return 401, {"error": {
                "type": "invalid_request_error",
                "message": "You did not provide an API key. You need to provide your API key in "
                           "the Authorization header, using Bearer auth (e.g. 'Authorization: "
                           "Bearer YOUR_SECRET_KEY')."}}, {}, False
        given = auth[len("Bearer "):]
        if s.api_key is not None and not hmac.compare_digest(given.encode(), s.api_key.encode()):
            return 401, {"error": {"type": "invalid_request_error",
                                   "message": "Invalid API Key provided: %s****%s" %
                                   (given[:8], given[-4:])}}, {}, False
        if version is not None and version != s.spec.api_version:
            return 400, {"error": {"type": "invalid_request_error",
                                   "message": "Invalid Stripe API version: %s (this stand-in "
                                              "speaks %s)" % (version, s.spec.api_version)}}, \
                {}, False
        route = None
        for m, pattern, target in ROUTES:
            match = re.fullmatch(pattern, path)
            if m == method and match:
                route = (target, match.groups())
                break
        if route is None:
            return 404, {"error": {
                "type": "invalid_request_error",
                "message": "Unrecognized request URL (%s: %s). Please see https://stripe.com/docs "
                           "or we can help at https://support.stripe.com/." % (method, path)}}, \
                {}, False
        violations = s.spec.check(method, path, pairs) or []
        record["violations"] = violations
        if violations:
            return 400, {"error": violations[0]}, {}, False

        fault = self.take_fault(method, path, pairs)
        if fault is not None and fault.get("action") == "status":
            return fault.get("status", 500), {"error": fault.get("error") or {
                "type": "api_error", "message": "Injected by the test."}}, {}, False
        drop = fault is not None and fault.get("action") == "drop"

        endpoint = method + " " + path
        canonical = sorted(pairs)
        if key is not None and method == "POST":
            with s.lock:
                stored = s.idempotency.get(key)
                if stored is None and key in s.in_flight:
                    return 409, {"error": {
                        "type": "idempotency_error",
                        "message": "There is currently another in-progress request using this "
                                   "Idempotent Key (that probably means you submitted twice, and "
                                   "the other request is still going through): %s. Please try "
                                   "again later." % key}}, {}, False
                if stored is not None:
                    if stored["endpoint"] != endpoint or stored["params"] != canonical:
                        return 400, {"error": {
                            "type": "idempotency_error",
                            "message": "Keys for idempotent requests can only be used with the "
                                       "same parameters they were first used with. Try using a "
                                       "key other than '%s' if you meant to execute a different "
                                       "request." % key}}, {}, False
                    return stored["status"], copy.deepcopy(stored["body"]), {
                        "Idempotent-Replayed": "true", "Idempotency-Key": key}, drop
                s.in_flight.add(key)
        try:
            with s.lock:
                status, answer, store = self.run(route, pairs)
            if key is not None and method == "POST":
                with s.lock:
                    if store:
                        s.idempotency[key] = {"endpoint": endpoint, "params": canonical,
                                              "status": status, "body": copy.deepcopy(answer)}
            headers = {"Idempotency-Key": key} if key is not None and method == "POST" else {}
            return status, answer, headers, drop
        finally:
            if key is not None and method == "POST":
                with s.lock:
                    s.in_flight.discard(key)

    def run(self, route, pairs):
        target, groups = route
        api = Api(self.state)
        try:
            if isinstance(target, tuple):
                status, obj = api.get(target[0], target[1], groups[0])
            else:
                fn = getattr(api, target)
                status, obj = fn(*groups, pairs) if target not in (
                    "get_customer", "delete_customer", "finalize_invoice") else \
                    fn(*groups)
            return status, copy.deepcopy(obj), True
        except StripeError as e:
            return e.status, {"error": e.body}, e.store
        except Exception as e:  # a bug of the stand-in: Stripe's answer to its own failures
            import traceback
            traceback.print_exc()
            return 500, {"error": {"type": "api_error", "message": "stand-in bug: %r" % e}}, \
                False

    def take_fault(self, method, path, pairs):
        s = self.state
        with s.lock:
            for fault in s.faults:
                if fault.get("method", method) != method:
                    continue
                if not re.fullmatch(fault.get("path", ".*"), path):
                    continue
                if "customer" in fault and first(pairs, "customer") != fault["customer"]:
                    continue
                if fault.get("count", 1) == 0:
                    continue
                if fault.get("count", 1) > 0:
                    fault["count"] = fault.get("count", 1) - 1
                return dict(fault)
        return None

    # test hooks ----------------------------------------------------------------------------
    def test_hook(self, method, path, body):
        s = self.state
        try:
            args = json.loads(body) if body else {}
        except ValueError:
            self.send_json(400, {"error": "body is not JSON"})
            return
        api = Api(s)
        try:
            if method == "POST" and path == "/_test/webhook":
                with s.lock:
                    s.webhook_url = args.get("url", s.webhook_url)
                    s.webhook_secret = args.get("secret", s.webhook_secret)
                self.send_json(200, {"url": s.webhook_url})
                return
            if method == "GET" and path == "/_test/events":
                with s.lock:
                    self.send_json(200, {"data": copy.deepcopy(s.events)})
                return
            if method == "GET" and path == "/_test/requests":
                with s.lock:
                    self.send_json(200, {"data": copy.deepcopy(s.requests)})
                return
            match = re.fullmatch(r"/_test/objects/([a-z_]+)", path)
            if method == "GET" and match and match.group(1) in s.objects:
                with s.lock:
                    self.send_json(200, {"data": copy.deepcopy(
                        list(s.objects[match.group(1)].values()))})
                return
            if method == "POST" and path == "/_test/idempotency/expire":
                with s.lock:
                    s.idempotency.clear()
                self.send_json(200, {})
                return
            if method == "POST" and path == "/_test/faults":
                with s.lock:
                    s.faults.append(args)
                self.send_json(200, {})
                return
            if method == "DELETE" and path == "/_test/faults":
                with s.lock:
                    s.faults.clear()
                self.send_json(200, {})
                return
            match = re.fullmatch(r"/_test/events/([^/]+)/deliver", path)
            if method == "POST" and match:
                with s.lock:
                    events = [e for e in s.events if e["id"] == match.group(1)]
                if not events:
                    self.send_json(404, {"error": "no such event"})
                    return
                results = deliver(s, events[0], times=args.get("times", 1),
                                  concurrent=args.get("concurrent", False),
                                  secret_list=args.get("secrets"),
                                  timestamp=args.get("timestamp"),
                                  timestamp_offset=args.get("timestamp_offset", 0),
                                  extra_schemes=args.get("extra_schemes"),
                                  tamper=args.get("tamper", False))
                self.send_json(200, {"deliveries": results})
                return
            events = None
            match = re.fullmatch(r"/_test/checkout/sessions/([^/]+)/complete", path)
            if method == "POST" and match:
                with s.lock:
                    events = api.complete_checkout(match.group(1), args.get("card", {}))
            match = re.fullmatch(r"/_test/payment_methods/([^/]+)/detach", path)
            if method == "POST" and match:
                with s.lock:
                    events = api.detach_payment_method(match.group(1))
            match = re.fullmatch(r"/_test/invoices/([^/]+)/(payment_failed|paid)", path)
            if method == "POST" and match:
                with s.lock:
                    if match.group(2) == "paid":
                        events = api.mark_paid(api.invoice(match.group(1)))
                    else:
                        events = api.fail_invoice_payment(match.group(1))
            if events is None:
                self.send_json(404, {"error": "no such test hook: %s %s" % (method, path)})
                return
            deliveries = []
            if args.get("deliver"):
                for event in events:
                    deliveries.extend(deliver(s, event))
            self.send_json(200, {"events": [e["id"] for e in events],
                                 "deliveries": deliveries})
        except StripeError as e:
            self.send_json(e.status, {"error": e.body})


class Server(http.server.ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("port", type=int)
    parser.add_argument("--api-key")
    parser.add_argument("--webhook-url", default="")
    parser.add_argument("--webhook-secret", default="")
    parser.add_argument("--subset", default=os.path.join(HERE, "stripe_openapi_subset.json"))
    args = parser.parse_args()
    spec = Spec(args.subset)
    server = Server(("127.0.0.1", args.port), Handler)
    server.state = State(spec, args.api_key, args.webhook_url, args.webhook_secret)
    port = server.server_address[1]
    server.state.base_url = "http://127.0.0.1:%d" % port
    sys.stdout.write("listening %d\n" % port)
    sys.stdout.flush()
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()

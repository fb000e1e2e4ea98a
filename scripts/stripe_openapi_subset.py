#!/usr/bin/python3
"""Extracts from Stripe's published OpenAPI description the small part gpuwerk's Stripe
stand-in (tests/support/stripe_stand_in.py) needs, and writes it as
tests/support/stripe_openapi_subset.json.

The description is the public repository github.com/stripe/openapi: `openapi/spec3.yaml` (or
`openapi/spec3.json`) and `openapi/fixtures3.json` of one commit. Nothing of it is committed
here except what this script writes: for each endpoint gpuwerk calls, the form (or query)
parameter names the description lists, flattened to Stripe's bracket notation
(`invoice_settings[default_payment_method]`, `payment_method_types[]`, `metadata[*]` for free
keys), their enum values where it lists them, the required ones; for a list endpoint (its answer
is Stripe's list object), the fields that list object carries and its `url`; and the example
object of each resource the stand-in answers with (its fields, so the stand-in's answers carry
the same keys as Stripe's).

    git -C STRIPE_OPENAPI show COMMIT:openapi/spec3.yaml > /tmp/spec3.yaml
    git -C STRIPE_OPENAPI show COMMIT:openapi/fixtures3.json > /tmp/fixtures3.json
    /usr/bin/python3 scripts/stripe_openapi_subset.py /tmp/spec3.yaml /tmp/fixtures3.json \
        COMMIT > tests/support/stripe_openapi_subset.json

Reading YAML needs PyYAML (Debian's python3-yaml); JSON needs nothing.
"""

import json
import sys

# The endpoints gpuwerk's stripe provider calls, and the ones the tests call as Stripe's
# dashboard would (deleting a customer).
ENDPOINTS = [
    ("post", "/v1/customers"),
    ("get", "/v1/customers/{customer}"),
    ("post", "/v1/customers/{customer}"),
    ("delete", "/v1/customers/{customer}"),
    ("post", "/v1/checkout/sessions"),
    ("get", "/v1/checkout/sessions/{session}"),
    ("get", "/v1/setup_intents/{intent}"),
    ("get", "/v1/payment_methods/{payment_method}"),
    ("post", "/v1/payment_methods/{payment_method}/detach"),
    ("get", "/v1/invoiceitems"),
    ("post", "/v1/invoiceitems"),
    ("get", "/v1/invoices"),
    ("post", "/v1/invoices"),
    ("get", "/v1/invoices/{invoice}"),
    ("post", "/v1/invoices/{invoice}/finalize"),
    ("post", "/v1/invoices/{invoice}/pay"),
]

RESOURCES = ["customer", "deleted_customer", "checkout.session", "setup_intent",
             "payment_method", "invoiceitem", "invoice", "event"]

MAX_DEPTH = 4


def load(path):
    with open(path, "rb") as f:
        data = f.read()
    if path.endswith((".yaml", ".yml")):
        import yaml  # python3-yaml
        loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
        return yaml.load(data, Loader=loader)
    return json.loads(data)


def resolve(spec, schema):
    while isinstance(schema, dict) and "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[-1]
        schema = spec["components"]["schemas"][name]
    return schema


def flatten(spec, schema, prefix, depth, out):
    """Adds to `out` every bracket-notation parameter name `schema` allows under `prefix`."""
    schema = resolve(spec, schema)
    if not isinstance(schema, dict):
        out.setdefault(prefix, {})
        return
    branches = schema.get("anyOf") or schema.get("oneOf")
    if branches:
        for branch in branches:
            flatten(spec, branch, prefix, depth, out)
        return
    kind = schema.get("type")
    if kind == "object" or "properties" in schema:
        properties = schema.get("properties") or {}
        if depth >= MAX_DEPTH or (not properties and schema.get("additionalProperties")):
            out.setdefault(prefix + "[*]", {})
            return
        if not properties:
            # An empty object: Stripe accepts "" to unset it.
            out.setdefault(prefix, {})
            return
        for name, sub in sorted(properties.items()):
            flatten(spec, sub, "%s[%s]" % (prefix, name), depth + 1, out)
        return
    if kind == "array":
        flatten(spec, schema.get("items", {}), prefix + "[]", depth + 1, out)
        return
    entry = out.setdefault(prefix, {})
    if "enum" in schema:
        values = set(entry.get("enum", [])) | {str(v) for v in schema["enum"]}
        entry["enum"] = sorted(values)
    elif kind is not None or "enum" in entry:
        # A branch without an enum (a free string, an integer) lifts the restriction.
        entry.pop("enum", None)
        entry["free"] = True


def endpoint_params(spec, method, path):
    operation = spec["paths"][path][method]
    params = {}
    required = []
    for parameter in operation.get("parameters", []):
        if parameter.get("in") != "query":
            continue
        flatten(spec, parameter.get("schema", {}), parameter["name"], 1, params)
        if parameter.get("required"):
            required.append(parameter["name"])
    body = (operation.get("requestBody") or {}).get("content", {})
    form = body.get("application/x-www-form-urlencoded")
    if form:
        schema = resolve(spec, form["schema"])
        for name, sub in sorted((schema.get("properties") or {}).items()):
            flatten(spec, sub, name, 1, params)
        required.extend(schema.get("required", []))
    # Entries with "free" are only a marker that no enum applies.
    for entry in params.values():
        entry.pop("free", None)
    out = {"params": dict(sorted(params.items())), "required": sorted(required)}
    shape = list_shape(spec, operation)
    if shape is not None:
        out["list"] = shape
    return out


def list_shape(spec, operation):
    """For an endpoint that answers Stripe's list object (`object: "list"`, a page of `data`
    newest first, `has_more`, `url`; paged with `starting_after`/`ending_before`): the fields
    that object carries and its url. None for any other endpoint."""
    answer = (operation.get("responses") or {}).get("200", {})
    schema = resolve(spec, answer.get("content", {}).get("application/json", {}).get("schema"))
    if not isinstance(schema, dict):
        return None
    properties = schema.get("properties") or {}
    kind = resolve(spec, properties.get("object", {}))
    if not isinstance(kind, dict) or kind.get("enum") != ["list"]:
        return None
    url = resolve(spec, properties.get("url", {}))
    return {"fields": sorted(schema.get("required", [])),
            "url": url.get("pattern", "").lstrip("^")}


def main():
    if len(sys.argv) != 4:
        sys.exit("usage: stripe_openapi_subset.py SPEC3.(yaml|json) FIXTURES3.json COMMIT")
    spec = load(sys.argv[1])
    fixtures = load(sys.argv[2])
    out = {
        "comment": "Generated by scripts/stripe_openapi_subset.py from github.com/stripe/openapi "
                   "(openapi/spec3 and openapi/fixtures3.json); do not edit by hand.",
        "source_commit": sys.argv[3],
        "api_version": spec["info"]["version"],
        "endpoints": {},
        "fixtures": {},
    }
    for method, path in ENDPOINTS:
        out["endpoints"]["%s %s" % (method.upper(), path)] = endpoint_params(spec, method, path)
    for name in RESOURCES:
        out["fixtures"][name] = fixtures["resources"][name]
    json.dump(out, sys.stdout, indent=1, sort_keys=True)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()

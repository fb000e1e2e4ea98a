#include "app/server_config.h"

#include <algorithm>
#include <cctype>

#include "api/client_address.h"
#include "api/listen_address.h"
#include "app/common_options.h"
#include "auth/account_service.h"
#include "core/ip_networks.h"
#include "core/strings.h"
#include "mail/mail_transport.h"
#include "mail/smtp_mailer.h"

namespace gpuwerk::app {
namespace {

core::Error ConfigError(std::string message) {
  return core::Error(core::ErrorCode::kInvalidArgument, "invalid_config", std::move(message));
}

using C = ServerConfig;

}  // namespace

const std::vector<Option<ServerConfig>>& ServerOptions() {
  static const std::vector<Option<C>> kOptions = {
      {.key = "data_dir",
       .field = &C::data_dir,
       .help = "data directory: the SQLite store gpuwerk.db, the local mail outbox mail/, the "
               "operator password of `up`",
       .flag = "--data"},
      {.key = "database",
       .field = &C::database,
       .help = "the store: a PostgreSQL connection URI (postgresql://user@host:5432/gpuwerk) or "
               "a SQLite file's path",
       .shown_default = "DATA/gpuwerk.db",
       .details = "Several servers may share one PostgreSQL database; keep its password out of "
                  "the command line (GPUWERK_DATABASE, the config file, or libpq's PGPASSWORD "
                  "and ~/.pgpass). docs/database.md says what the server needs."},
      {.key = "listen",
       .field = &C::listen,
       .help = "HTTP address ADDR:PORT; port 0 picks a free one"},
      {.key = "public_url",
       .field = &C::public_url,
       .help = "the base URL people reach (http:// or https://); used in mailed links, the "
               "cookie's Secure flag and the origin check",
       .shown_default = "http://<listen>"},
      {.key = "mail",
       .field = &C::mail,
       .help = "maildir (files in DATA/mail/new, links printed to the log) or smtp"},
      {.key = "smtp_url",
       .field = &C::smtp_url,
       .help = "the SMTP server: smtp://host:25, smtp://host:587 or smtps://host:465"},
      {.key = "smtp_from", .field = &C::smtp_from, .help = "the sender of mails"},
      {.key = "smtp_username",
       .field = &C::smtp_username,
       .help = "SMTP AUTH user name (used when smtp_password is set too)"},
      {.key = "smtp_password",
       .field = &C::smtp_password,
       .help = "SMTP AUTH password",
       .secret = true},
      {.key = "smtp_starttls", .field = &C::smtp_starttls, .help = "never, if-offered or required"},
      LogLevelOption<C>(),
      {.key = "password_hash_cost",
       .field = &C::password_hash_cost,
       .help = "argon2id cost: interactive, moderate, or test-only-minimum (test suites only)"},
      {.key = "http_threads", .field = &C::http_threads, .help = "threads serving HTTP (1 to 256)"},
      {.key = "body_limit_bytes",
       .field = &C::body_limit_bytes,
       .help = "largest request body in bytes; larger ones get 413 payload_too_large"},
      {.key = "read_timeout_seconds",
       .field = &C::read_timeout_seconds,
       .help = "a request must arrive whole within this"},
      {.key = "idle_timeout_seconds",
       .field = &C::idle_timeout_seconds,
       .help = "idle keep-alive connections are closed after this"},
      {.key = "http_connections_per_source",
       .field = &C::http_connections_per_source,
       .help = "HTTP connections open at once from one IPv4 address or IPv6 /64; one more gets "
               "503 too_many_connections; 0: no cap; a trusted proxy's connections are not "
               "counted (the proxy caps its clients)"},
      {.key = "http_max_connections",
       .field = &C::http_max_connections,
       .help = "HTTP connections open at once in all; one more gets 503 server_busy "
               "(Retry-After: 1) and is closed unread, until one closes",
       .shown_default = "0 (automatic)",
       .details = "0: the open-file limit (raised to its hard limit at start; both logged) less "
                  "a quarter, keeping at least 128 descriptors spare, e.g. 49152 for 65536."},
      {.key = "trusted_proxies",
       .field = &C::trusted_proxies,
       .help = "a reverse proxy (an IPv4/IPv6 CIDR or address, e.g. 10.0.0.0/8, ::1) whose "
               "X-Forwarded-For is believed; repeat the flag for several. From them, the client "
               "is the right-most hop that is not itself a trusted proxy; everyone else's "
               "X-Forwarded-For is ignored",
       .flag = "--trusted-proxy",
       .details =
           "Every per-source rule (sign-in lockout, sign-up and link limits, audit source "
           "addresses, log lines) then uses that client address; /metrics still looks at "
           "the TCP peer. A malformed hop makes the proxy the client (docs/configuration.md, "
           "\"Behind a reverse proxy\")."},
      {.key = "sign_in_failures_per_account",
       .field = &C::sign_in_failures_per_account,
       .help = "failed sign-ins per account from one source address (an IPv6 /64) per window; "
               "other sources are not affected (docs/accounts.md)"},
      {.key = "sign_in_failures_per_address",
       .field = &C::sign_in_failures_per_address,
       .help = "failed sign-ins per source address (an IPv6 /64) per window, all accounts "
               "together"},
      {.key = "sign_in_window_seconds",
       .field = &C::sign_in_window_seconds,
       .help = "the sliding window of both sign-in limits"},
      {.key = "sign_up_policy",
       .field = &C::sign_up_policy,
       .help = "who may sign up: open (anyone), domains (addresses at sign_up_domains) or "
               "invite (nobody; operators invite with `gpuwerk admin invite EMAIL`)",
       .details = "Refused sign-ups answer 403 signup_domain_not_allowed or signup_invite_only, "
                  "the same for every address (docs/accounts.md)."},
      {.key = "sign_up_domains",
       .field = &C::sign_up_domains,
       .help = "with sign_up_policy = domains: the email domains whose addresses may sign up, "
               "e.g. example.com (exact: list subdomains too)"},
      {.key = "instance_image",
       .field = &C::instance_image,
       .help = "the container image of every instance, snapshotted per instance at create",
       .details = "(production: a CUDA base image with openssh-server, "
                  "scripts/instance-image/README.md)"},
      {.key = "instance_memory_bytes",
       .field = &C::instance_memory_bytes,
       .help = "each instance container's memory limit in bytes; 0 means no limit"},
      {.key = "host_unknown_after_seconds",
       .field = &C::host_unknown_after_seconds,
       .help = "a host whose agent has not synced for this long gets no new instances, and its "
               "instances show unknown"},
      {.key = "leader_lease_seconds",
       .field = &C::leader_lease_seconds,
       .help = "with PostgreSQL: how long the leader lease lasts; the leader renews it every "
               "third of this, and another server takes the leader-only work over this long "
               "after the leader died (docs/scale-out.md)"},
      {.key = "payment_provider",
       .field = &C::payment_provider,
       .help = "who holds payment methods: manual (the operator records cards) or stripe "
               "(people add a card in Stripe Checkout; docs/stripe.md)"},
      {.key = "stripe_api_base",
       .field = &C::stripe_api_base,
       .help = "with payment_provider = stripe: the Stripe API's base URL (a stand-in in tests)"},
      {.key = "stripe_secret_key",
       .field = &C::stripe_secret_key,
       .help = "with payment_provider = stripe: the Stripe secret API key (sk_…)",
       .secret = true},
      {.key = "stripe_webhook_secrets",
       .field = &C::stripe_webhook_secrets,
       .help = "with payment_provider = stripe: the webhook endpoint's signing secrets (whsec_…), "
               "comma-separated; two while a secret rolls",
       .details = "Stripe's endpoint: POST <public_url>/api/v1/billing/webhooks/stripe "
                  "(docs/stripe.md \"Webhooks\").",
       .secret = true},
      {.key = "operator_email",
       .field = &C::operator_email,
       .help = "bootstrap: create this operator account at start when no account has the email "
               "(an existing one is left alone); needs operator_password",
       .details = "`gpuwerk up` makes its own operator (`operator@gpuwerk.local`, password in "
                  "`DATA/operator-password`) when this is unset."},
      {.key = "operator_password",
       .field = &C::operator_password,
       .help = "the bootstrap operator's password (12 characters or more)",
       .secret = true},
      {.key = "ssh_domain",
       .field = &C::ssh_domain,
       .help = "the relays' wildcard DNS domain, e.g. ssh.example.com: instances then show "
               "ssh <hostname>@<hostname>.<ssh_domain> (docs/ssh.md)",
       .details = "Unset: the direct command to the container's sshd, or under `gpuwerk up` its "
                  "relay's address."},
      {.key = "ssh_port",
       .field = &C::ssh_port,
       .help = "the relays' public SSH port, used with ssh_domain"},
      {.key = "test_clock_offset_seconds",
       .field = &C::test_clock_offset_seconds,
       .help = "test suites only: the server's clock runs this many seconds (0 to 31622400) "
               "ahead of the system's",
       .details = "End-to-end tests restart the real server a month ahead to close that month "
                  "(docs/billing.md \"Month close\"). Never set it for people: every time the "
                  "server keeps, bills and checks (sign-in sessions, webhook signatures) moves "
                  "with it. Logged as a warning at start."},
  };
  return kOptions;
}

const std::vector<Option<ServerConfig>>& UpOnlyOptions() {
  static const std::vector<Option<C>> kOptions = {
      {.key = "engine",
       .field = &C::engine,
       .help = "the container engine, a Docker Engine API socket unix:///PATH",
       .shown_default = "found or started",
       .details = "Unset: Docker's `/var/run/docker.sock` when it answers, else a podman API "
                  "service that `up` starts on `DATA/engine/podman.sock` (with the project's "
                  "`config/containers.conf`, compiled into the binary) and stops on Ctrl-C."},
      {.key = "ssh_listen",
       .field = &C::ssh_listen,
       .help = "where the SSH relay of `up` listens, ADDR:PORT (numeric address); port 0 picks "
               "a free one"},
      {.key = "relay_memory_limit_mib",
       .field = &C::relay_memory_limit_mib,
       .help = "the memory limit of the relay's own process under `up`, in MiB (64 to 1048576)",
       .details = "`up` runs the relay as a child process (`gpuwerk relay`), restarted when it "
                  "dies, so that a relay that runs out of memory never takes the control plane "
                  "with it: a cgroup of its own with this `memory.max` (cgroup v2) or "
                  "`memory.limit_in_bytes` (a cgroup v1 memory controller) where this process "
                  "may make one, else RLIMIT_AS of this size (not in sanitizer builds). The log "
                  "says which (docs/ssh.md \"Running it\")."},
      RelayTrustedProxiesOption<C>(),
      DockerInsideOption<C>(),
      InstanceShmOption<C>(),
  };
  return kOptions;
}

std::vector<Option<ServerConfig>> UpOptions() {
  std::vector<Option<C>> all = ServerOptions();
  all.insert(all.end(), UpOnlyOptions().begin(), UpOnlyOptions().end());
  return all;
}

std::string UpBillingLine(const ServerConfig& config, bool card_recorded,
                          const std::string& email) {
  const bool stripe = config.payment_provider == "stripe";
  std::string line = stripe ? "Stripe; " : "manual; ";
  // Under Stripe the operator's card is still recorded by hand: say so; under manual billing
  // "manual" is already said.
  const std::string recorded =
      stripe ? "a manual payment method was recorded for " : "a payment method was recorded for ";
  line += card_recorded ? recorded + email : email + " has a payment method on file";
  line += stripe ? " (others: gpuwerk billing add-card, which opens Stripe Checkout)"
                 : " (others: gpuwerk admin billing set-card EMAIL --brand visa --last4 4242 "
                   "--exp 12/2030)";
  return line;
}

core::Result<void> Validate(const ServerConfig& c) {
  if (!api::SplitListenAddress(c.listen)) {
    return std::unexpected(
        ConfigError("listen must be HOST:PORT (e.g. 127.0.0.1:8080 or [::1]:8080), got '" +
                    core::BoundedPrintable(c.listen, 64) + "'"));
  }
  if (auto ssh = ParseAddressPort(c.ssh_listen); !c.ssh_listen.empty() && !ssh) {
    return std::unexpected(ConfigError("ssh_listen " + ssh.error().message));
  }
  GPUWERK_ASSIGN_OR_RETURN(const mail::MailTransport transport, mail::ParseMailTransport(c.mail));
  if (transport == mail::MailTransport::kSmtp && c.smtp_url.empty()) {
    return std::unexpected(ConfigError("mail = 'smtp' needs smtp_url (e.g. smtp://mail:25)"));
  }
  GPUWERK_TRY(mail::ParseStartTls(c.smtp_starttls));
  if (c.password_hash_cost != "interactive" && c.password_hash_cost != "moderate" &&
      c.password_hash_cost != "test-only-minimum") {
    return std::unexpected(
        ConfigError("password_hash_cost must be interactive, moderate or test-only-minimum"));
  }
  if (c.test_clock_offset_seconds < 0 || c.test_clock_offset_seconds > 366 * 86400) {
    return std::unexpected(
        ConfigError("test_clock_offset_seconds must be from 0 to 31622400 (366 days)"));
  }
  // `up`'s local agent resolves these against the machine (agent::ResolveInstanceRuntime); the
  // form is checked here so that a bad value is refused before anything starts.
  if (c.docker_inside != "off" && c.docker_inside != "sysbox" && c.docker_inside != "privileged") {
    return std::unexpected(ConfigError("docker_inside must be off, sysbox or privileged, not '" +
                                       core::BoundedPrintable(c.docker_inside, 40) + "'"));
  }
  if (c.instance_shm_bytes != 0 && c.instance_shm_bytes < (int64_t{64} << 20)) {
    return std::unexpected(ConfigError(
        "instance_shm_bytes must be 0 (automatic) or at least 67108864 (64 MiB, Docker's "
        "default)"));
  }
  if (c.relay_memory_limit_mib < 64 || c.relay_memory_limit_mib > 1'048'576) {
    return std::unexpected(ConfigError("relay_memory_limit_mib must be from 64 to 1048576"));
  }
  if (c.http_threads < 1 || c.http_threads > 256) {
    return std::unexpected(ConfigError("http_threads must be from 1 to 256"));
  }
  if (c.http_connections_per_source < 0 || c.http_connections_per_source > 1'000'000) {
    return std::unexpected(ConfigError("http_connections_per_source must be from 0 to 1000000"));
  }
  if (c.http_max_connections < 0 || c.http_max_connections > 100'000'000) {
    return std::unexpected(
        ConfigError("http_max_connections must be from 0 (automatic) to 100000000"));
  }
  GPUWERK_TRY(api::TrustedProxies::Parse(c.trusted_proxies));
  GPUWERK_TRY(core::IpNetworks::Parse(c.relay_trusted_proxies, "relay_trusted_proxies"));
  if (c.body_limit_bytes < 1024) {
    return std::unexpected(ConfigError("body_limit_bytes must be at least 1024"));
  }
  if (c.read_timeout_seconds < 1 || c.idle_timeout_seconds < 1 || c.sign_in_window_seconds < 1 ||
      c.sign_in_failures_per_account < 1 || c.sign_in_failures_per_address < 1) {
    return std::unexpected(ConfigError("timeouts, windows and limits must be positive"));
  }
  GPUWERK_ASSIGN_OR_RETURN(const auth::SignUpPolicy policy,
                           auth::ParseSignUpPolicy(c.sign_up_policy));
  if (policy == auth::SignUpPolicy::kDomains && c.sign_up_domains.empty()) {
    return std::unexpected(
        ConfigError("sign_up_policy = 'domains' needs sign_up_domains (e.g. example.com)"));
  }
  if (policy != auth::SignUpPolicy::kDomains && !c.sign_up_domains.empty()) {
    return std::unexpected(ConfigError("sign_up_domains is only for sign_up_policy = 'domains'"));
  }
  for (const std::string& domain : c.sign_up_domains) {
    const bool ok =
        !domain.empty() && domain.size() <= 253 && domain.find('.') != std::string::npos &&
        std::all_of(domain.begin(), domain.end(),
                    [](unsigned char ch) { return std::isalnum(ch) || ch == '.' || ch == '-'; });
    if (!ok) {
      return std::unexpected(ConfigError("sign_up_domains: '" + domain +
                                         "' is not a domain name (e.g. example.com, no '@')"));
    }
  }
  if (c.instance_image.empty()) {
    return std::unexpected(ConfigError("instance_image must not be empty"));
  }
  if (c.instance_memory_bytes < 0) {
    return std::unexpected(ConfigError("instance_memory_bytes must be 0 (no limit) or more"));
  }
  if (c.host_unknown_after_seconds < 1) {
    return std::unexpected(ConfigError("host_unknown_after_seconds must be positive"));
  }
  if (c.leader_lease_seconds < 3 || c.leader_lease_seconds > 3600) {
    return std::unexpected(ConfigError("leader_lease_seconds must be 3 to 3600"));
  }
  if (!c.operator_email.empty() && c.operator_password.size() < 12) {
    return std::unexpected(
        ConfigError("operator_email needs operator_password of at least 12 characters (set "
                    "GPUWERK_OPERATOR_PASSWORD)"));
  }
  if (c.payment_provider != "manual" && c.payment_provider != "stripe") {
    return std::unexpected(ConfigError("payment_provider must be manual or stripe"));
  }
  if (c.payment_provider == "stripe") {
    if (c.stripe_secret_key.empty() || c.stripe_webhook_secrets.empty()) {
      return std::unexpected(
          ConfigError("payment_provider = 'stripe' needs stripe_secret_key and "
                      "stripe_webhook_secrets (set GPUWERK_STRIPE_SECRET_KEY and "
                      "GPUWERK_STRIPE_WEBHOOK_SECRETS, or their -file flags)"));
    }
    if (!c.stripe_api_base.starts_with("http://") && !c.stripe_api_base.starts_with("https://")) {
      return std::unexpected(ConfigError("stripe_api_base must start with http:// or https://"));
    }
  }
  if (c.ssh_port < 1 || c.ssh_port > 65535) {
    return std::unexpected(ConfigError("ssh_port must be from 1 to 65535"));
  }
  if (!c.engine.empty() && !c.engine.starts_with("unix:///")) {
    return std::unexpected(ConfigError("engine must be unix:///PATH"));
  }
  if (!c.public_url.empty() && !c.public_url.starts_with("http://") &&
      !c.public_url.starts_with("https://")) {
    return std::unexpected(ConfigError("public_url must start with http:// or https://"));
  }
  return {};
}

}  // namespace gpuwerk::app

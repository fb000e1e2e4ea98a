#include "app/server_app.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <thread>

#include "access/relay_access.h"
#include "api/api_context.h"
#include "api/api_routes.h"
#include "api/authenticator.h"
#include "api/dashboard.h"
#include "api/http_server.h"
#include "api/idempotency.h"
#include "api/metrics.h"
#include "api/router.h"
#include "app/store_relay_access.h"
#include "auth/account_service.h"
#include "auth/email_address.h"
#include "auth/password_hasher.h"
#include "auth/person_table.h"
#include "billing/invoice_pusher.h"
#include "billing/manual_provider.h"
#include "billing/payment_methods.h"
#include "billing/stripe_client.h"
#include "billing/stripe_provider.h"
#include "billing/stripe_webhooks.h"
#include "core/open_files.h"
#include "keys/ssh_key_registry.h"
#include "keys/ssh_key_table.h"
#include "mail/mail_transport.h"
#include "mail/maildir_mailer.h"
#include "mail/outbox.h"
#include "mail/smtp_mailer.h"
#include "sched/account_instances.h"
#include "sched/agent_sync.h"
#include "sched/desired_state_notifier.h"
#include "sched/host_registry.h"
#include "sched/instance_service.h"
#include "sched/person_events.h"
#include "sched/queue_service.h"
#include "store/leader_elector.h"
#include "store/open_database.h"
#include "teams/team_billing.h"
#include "teams/team_member_table.h"
#include "teams/team_service.h"
#include "teams/team_table.h"

namespace gpuwerk::app {

/// Owned components, in construction order (destroyed in reverse).
struct ServerApp::Parts {
  ~Parts() {
    if (lock_fd >= 0) ::close(lock_fd);
  }
  int lock_fd = -1;  ///< flock'd DATA/lock: one server per data directory
  ServerConfig config;
  mail::MailTransport mail_transport = mail::MailTransport::kMaildir;  ///< config.mail, parsed
  core::Clock* clock = nullptr;
  core::Rng* rng = nullptr;
  std::unique_ptr<store::Database> db;
  /// PostgreSQL (several replicas may share it): the leader lease (docs/scale-out.md), and the
  /// store as the leader-only work writes it, each write transaction fenced to the lease's epoch.
  /// Null on SQLite, where this one server is always the leader (its data directory's lock).
  std::unique_ptr<store::LeaderElector> leader;
  std::unique_ptr<store::FencedDatabase> leader_db;
  std::unique_ptr<mail::Mailer> mailer;
  std::unique_ptr<mail::Outbox> outbox;
  std::unique_ptr<mail::OutboxWorker> outbox_worker;
  /// Half the HTTP threads (at least one) may hash passwords at once; the rest stay free for
  /// cheap requests (PasswordHasher).
  std::unique_ptr<core::ConcurrencyLimit> hash_slots;
  std::unique_ptr<auth::PasswordHasher> hasher;
  std::unique_ptr<auth::AccountService> accounts;
  std::unique_ptr<keys::SshKeyRegistry> ssh_keys;
  /// Who holds cards: the manual provider, the default.
  std::unique_ptr<billing::StripeClient> stripe_client;  ///< payment_provider = stripe only
  std::unique_ptr<billing::PaymentProvider> payment_provider;
  std::unique_ptr<billing::StripeWebhooks> stripe_webhooks;  ///< payment_provider = stripe only
  /// The launch gate and payment methods; a recorded card ends pass-over streaks and drains.
  std::unique_ptr<billing::PaymentMethods> payment_methods;
  std::unique_ptr<sched::DesiredStateNotifier> desired_state;
  std::unique_ptr<sched::HostRegistry> hosts;
  std::unique_ptr<sched::InstanceService> instances;
  /// What the unknown worker marks silent hosts through: `instances`, or on PostgreSQL one over
  /// leader_db (fenced).
  std::unique_ptr<sched::InstanceService> leader_instances;
  sched::InstanceService* silent_host_marker = nullptr;
  std::unique_ptr<sched::QueueService> queue;
  std::unique_ptr<sched::AgentSync> agent_sync;
  /// Which billing account pays for a person: their team's, else their own. Installed in
  /// the scheduler's launches; whatever else asks who pays (the payment gate) takes it from here.
  billing::ResolveAccount resolve_account;
  std::unique_ptr<teams::TeamService> teams;
  std::unique_ptr<api::IdempotencyKeys> idempotency;
  std::unique_ptr<api::SshCommandFormat> ssh_command;
  std::unique_ptr<sched::PersonStateReader> person_state;       ///< what GET /api/v1/events shows
  std::unique_ptr<api::EventHub> events;                        ///< people's event streams
  std::unique_ptr<access::RelayAccess> relay_access;            ///< for remote relays' requests
  std::unique_ptr<access::RelayCredentials> relay_credentials;  ///< who may call as a relay
  std::unique_ptr<api::Authenticator> authn;
  std::unique_ptr<billing::Invoices> invoices;  ///< invoices and the month close (R-13)
  /// Pushes closed invoices to the provider when it collects them (stripe); null under manual.
  std::unique_ptr<billing::InvoicePusher> invoice_pusher;
  std::unique_ptr<billing::UsageHistory> usage;  ///< the usage history (R-16)
  /// The invoice worker's month close and pushes: over leader_db on PostgreSQL (fenced), else
  /// `invoices` and `invoice_pusher` themselves.
  std::unique_ptr<billing::Invoices> leader_invoices;
  std::unique_ptr<billing::InvoicePusher> leader_invoice_pusher;
  billing::Invoices* month_closer = nullptr;
  billing::InvoicePusher* due_pusher = nullptr;
  std::unique_ptr<api::ApiContext> api_context;
  std::unique_ptr<api::Metrics> metrics;
  std::unique_ptr<api::Router> router;
  std::unique_ptr<api::HttpServer> http;
  bool stopped = false;
  // The worker that persists `unknown` for instances on silent hosts, once a second.
  std::thread unknown_worker;
  std::mutex worker_mu;
  std::condition_variable worker_cv;
  bool worker_stop = false;
  bool drain_wake = false;  ///< guarded by worker_mu: the drain worker drains now (a lease won)
  /// Whether this server runs the leader-only work now: always on SQLite; on PostgreSQL while it
  /// holds the lease.
  bool Leading() const { return leader == nullptr || leader->Holding(); }
  // The worker that drains every GPU type's queue every few seconds, so that no entry waits on
  // a missed event (a host that came back, a drain that failed), and forgets old idempotency
  // keys.
  std::thread drain_worker;
  // The worker that closes the previous month once it has ended (Invoices::CloseDueMonth),
  // checking once a minute, then pushes the queued invoices that are due (InvoicePusher).
  std::thread invoice_worker;
  // Revocation (docs/ssh.md "Revocation"): where access changes are published, and the remote
  // relays' streams of them. The hub goes before the feed it listens to.
  struct {
    core::AccessChangeFeed feed;
    std::unique_ptr<api::RelayWatchHub> watch;
  } revocation;
};

namespace {

/// This server's id as a lease holder: the host name and a random id kept in DATA/replica-id
/// (made at the first start). The data directory's lock makes it one live process's at a time, so
/// a server restarted on the same data directory takes its lease back at once (under a new epoch)
/// instead of waiting for it to run out (docs/scale-out.md).
std::string ReplicaId(const std::filesystem::path& data_dir, core::Rng& rng) {
  char host[256] = {};
  if (::gethostname(host, sizeof(host) - 1) != 0) host[0] = '\0';
  const std::filesystem::path file = data_dir / "replica-id";
  std::string id;
  if (std::ifstream in(file); in) std::getline(in, id);
  const bool valid =
      id.size() >= 8 && id.size() <= 64 && std::all_of(id.begin(), id.end(), [](unsigned char c) {
        return std::isalnum(c) || c == '_' || c == '-';
      });
  if (!valid) {
    id = core::NewId(rng, "rep");
    std::ofstream out(file, std::ios::trunc);
    out << id << "\n";
    if (!out) spdlog::warn("server: cannot keep the replica id in {}", file.string());
  }
  return fmt::format("{}/{}", host[0] ? host : "server", id);
}

/// A file-descriptor limit as people read it.
std::string Shown(uint64_t limit) {
  return limit == UINT64_MAX ? std::string("unlimited") : std::to_string(limit);
}

auth::HashCost CostFromName(const std::string& name) {
  if (name == "moderate") return auth::HashCost::kModerate;
  if (name == "test-only-minimum") return auth::HashCost::kTestOnlyMinimum;
  return auth::HashCost::kInteractive;
}

/// The webhook signing secrets of `stripe_webhook_secrets`: comma-separated, spaces trimmed.
std::vector<std::string> SplitSecrets(const std::string& list) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= list.size()) {
    size_t end = list.find(',', start);
    if (end == std::string::npos) end = list.size();
    std::string item = list.substr(start, end - start);
    while (!item.empty() && item.front() == ' ') item.erase(item.begin());
    while (!item.empty() && item.back() == ' ') item.pop_back();
    if (!item.empty()) out.push_back(std::move(item));
    start = end + 1;
  }
  return out;
}

/// Who is mailed about a billing account (a failed payment): a solo account's person; every
/// active owner of a team, with the team's name.
core::Result<billing::AccountOwners> AccountOwners(store::Transaction& tx,
                                                   const std::string& account_id) {
  if (account_id.starts_with("solo_")) return billing::SoloAccountOwners(tx, account_id);
  billing::AccountOwners out;
  GPUWERK_ASSIGN_OR_RETURN(auto team, teams::TeamTable::Find(tx, account_id));
  if (!team) return out;
  out.team_name = team->name;
  GPUWERK_ASSIGN_OR_RETURN(auto members, teams::TeamMemberTable::ListActive(tx, account_id));
  for (const auto& m : members) {
    if (m.role != teams::Role::kOwner) continue;
    GPUWERK_ASSIGN_OR_RETURN(auto email, auth::PersonTable::Email(tx, m.person_id));
    if (email) out.emails.push_back(std::move(*email));
  }
  return out;
}

/// The invoice worker's push pass: batches of due invoices until one comes back short or the
/// server stops; each failure is logged by the pusher and retried at a later pass.
void PushDueInvoices(ServerApp::Parts& parts) {
  if (parts.due_pusher == nullptr) return;
  for (;;) {
    if (!parts.Leading()) return;
    auto report = parts.due_pusher->PushDue();
    if (!report) {
      spdlog::warn("billing: pushing invoices failed: {}", report.error().message);
      return;
    }
    if (static_cast<int64_t>(report->results.size()) < billing::kPushBatch) return;
    std::lock_guard lock(parts.worker_mu);
    if (parts.worker_stop) return;
  }
}

/// The leader state in /metrics (docs/scale-out.md "Watching it"): `leader` null (SQLite) is
/// always the leader.
void AddLeaderMetrics(api::Metrics& metrics, const store::LeaderElector* leader) {
  metrics.AddGauge("gpuwerk_leader",
                   "1 while this server runs the leader-only work (holds the leader lease), else 0",
                   [leader] { return leader == nullptr || leader->Holding() ? 1.0 : 0.0; });
  if (leader == nullptr) return;
  metrics.AddGauge("gpuwerk_leader_epoch",
                   "The leader lease's fencing epoch this server holds or last held (0: never)",
                   [leader] { return static_cast<double>(leader->epoch()); });
  metrics.AddCounter("gpuwerk_leader_gains_total", "Times this server became the leader",
                     [leader] { return static_cast<double>(leader->gains_total()); });
  metrics.AddCounter("gpuwerk_leader_fenced_writes_total",
                     "Leader-only write transactions whose lease check passed",
                     [leader] { return static_cast<double>(leader->fence_passed_total()); });
  metrics.AddCounter(
      "gpuwerk_leader_refused_writes_total",
      "Leader-only write transactions refused (not_leader): the lease was lost or taken over",
      [leader] { return static_cast<double>(leader->fence_refused_total()); });
}

core::Result<std::unique_ptr<mail::Mailer>> MakeMailer(mail::MailTransport transport,
                                                       const ServerConfig& c) {
  switch (transport) {
    case mail::MailTransport::kSmtp: {
      mail::SmtpMailer::Options o;
      o.url = c.smtp_url;
      o.from = c.smtp_from;
      o.username = c.smtp_username;
      o.password = c.smtp_password;
      GPUWERK_ASSIGN_OR_RETURN(o.starttls, mail::ParseStartTls(c.smtp_starttls));
      GPUWERK_TRY(mail::ValidateSmtpMailerOptions(o));
      return std::unique_ptr<mail::Mailer>(new mail::SmtpMailer(o));
    }
    case mail::MailTransport::kMaildir:
      break;
  }
  return std::unique_ptr<mail::Mailer>(new mail::MaildirMailer(c.data_dir / "mail", c.smtp_from));
}

}  // namespace

ServerApp::ServerApp(std::unique_ptr<Parts> parts) : parts_(std::move(parts)) {}
ServerApp::~ServerApp() { Stop(); }

core::Result<std::unique_ptr<ServerApp>> ServerApp::Start(const ServerConfig& config,
                                                          core::Clock& clock, core::Rng& rng) {
  GPUWERK_TRY(Validate(config));
  auto p = std::make_unique<Parts>();
  p->config = config;
  GPUWERK_ASSIGN_OR_RETURN(p->mail_transport, mail::ParseMailTransport(config.mail));
  p->clock = &clock;
  p->rng = &rng;

  std::error_code ec;
  const bool fresh = !std::filesystem::exists(config.data_dir, ec);
  std::filesystem::create_directories(config.data_dir, ec);
  if (!ec && fresh) {
    // The store holds password hashes and token hashes: owner only.
    std::filesystem::permissions(config.data_dir, std::filesystem::perms::owner_all, ec);
  }
  if (ec) {
    return core::Fail(
        core::ErrorCode::kUnavailable, "data_dir_unavailable",
        "cannot create the data directory " + config.data_dir.string() + ": " + ec.message());
  }
  // One server per data directory: a second one would run a second mail worker and agent on
  // the same store.
  const std::string lock_path = (config.data_dir / "lock").string();
  p->lock_fd = ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (p->lock_fd < 0 || ::flock(p->lock_fd, LOCK_EX | LOCK_NB) != 0) {
    return core::Fail(core::ErrorCode::kFailedPrecondition, "data_dir_in_use",
                      "the data directory " + std::filesystem::absolute(config.data_dir).string() +
                          " is in use by another gpuwerk server; stop it, or pass --data DIR");
  }
  const std::string sqlite_path = (config.data_dir / "gpuwerk.db").string();
  GPUWERK_ASSIGN_OR_RETURN(p->db, store::OpenDatabase(config.database, sqlite_path));
  if (config.database.empty()) {
    // Password and token hashes: owner only, like the directory.
    std::filesystem::permissions(
        config.data_dir / "gpuwerk.db",
        std::filesystem::perms::owner_read | std::filesystem::perms::owner_write, ec);
  }
  GPUWERK_TRY(store::Migrate(*p->db));

  if (p->db->Backend() == "postgresql") {
    // Several replicas may share the database: one at a time runs the leader-only work
    // (docs/scale-out.md). The first round is taken now, so that a lone server leads at once.
    const std::chrono::milliseconds lease = std::chrono::seconds(config.leader_lease_seconds);
    Parts* woken = p.get();
    p->leader = std::make_unique<store::LeaderElector>(
        *p->db, store::LeaderElectorOptions{.name = "scheduler",
                                            .holder = ReplicaId(config.data_dir, rng),
                                            .lease = lease,
                                            .renew_every = lease / 3,
                                            .clock = {},
                                            .steady_ms = {},
                                            .on_gain = [woken] {
                                              // A new leader drains and sends at once.
                                              {
                                                std::lock_guard lock(woken->worker_mu);
                                                woken->drain_wake = true;
                                              }
                                              woken->worker_cv.notify_all();
                                              if (woken->outbox_worker)
                                                woken->outbox_worker->Wake();
                                            }});
    p->leader_db = std::make_unique<store::FencedDatabase>(*p->db, *p->leader);
    if (auto first = p->leader->Step(); !first) {
      spdlog::warn("leader: the first lease round failed (retried): {}", first.error().message);
    } else if (!*first) {
      spdlog::info(
          "leader: another server holds the scheduler lease; this one serves requests "
          "and takes the leader-only work over should the leader go");
    }
  }

  GPUWERK_ASSIGN_OR_RETURN(p->mailer, MakeMailer(p->mail_transport, config));
  p->outbox = std::make_unique<mail::Outbox>(*p->db, clock, rng);
  mail::OutboxWorker::Options outbox_options;
  outbox_options.fence = p->leader.get();  // sending is leader-only
  p->outbox_worker =
      std::make_unique<mail::OutboxWorker>(*p->db, *p->mailer, clock, outbox_options);
  p->hash_slots = std::make_unique<core::ConcurrencyLimit>(std::max(1, config.http_threads / 2));
  p->hasher = std::make_unique<auth::PasswordHasher>(CostFromName(config.password_hash_cost),
                                                     p->hash_slots.get());

  // The public URL defaults to the listen address; fixed up below once the port is known.
  auth::AccountOptions account_options;
  const std::chrono::seconds window(config.sign_in_window_seconds);
  account_options.sign_in_failures_per_account.limit = config.sign_in_failures_per_account;
  account_options.sign_in_failures_per_account.window = window;
  account_options.sign_in_failures_per_address.limit = config.sign_in_failures_per_address;
  account_options.sign_in_failures_per_address.window = window;
  // Claiming an unproven account removes its SSH keys: keys' owner does it (auth does not
  // depend on keys).
  account_options.remove_ssh_keys = &keys::SshKeyTable::DeleteAllOf;
  GPUWERK_ASSIGN_OR_RETURN(account_options.sign_up_policy,
                           auth::ParseSignUpPolicy(config.sign_up_policy));
  for (std::string domain : config.sign_up_domains) {
    std::transform(domain.begin(), domain.end(), domain.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    account_options.sign_up_domains.push_back(std::move(domain));
  }

  p->metrics = std::make_unique<api::Metrics>();
  p->router = std::make_unique<api::Router>();
  api::HttpServer::Options http_options;
  http_options.listen = config.listen;
  http_options.body_limit = static_cast<size_t>(config.body_limit_bytes);
  http_options.read_timeout = std::chrono::seconds(config.read_timeout_seconds);
  http_options.idle_timeout = std::chrono::seconds(config.idle_timeout_seconds);
  http_options.threads = config.http_threads;
  http_options.max_connections_per_source = static_cast<size_t>(config.http_connections_per_source);
  http_options.max_connections = static_cast<size_t>(config.http_max_connections);
  // Connections are file descriptors: take what the operator's hard limit allows, so that the
  // connection cap, not EMFILE, is what a flood meets.
  if (auto fds = core::RaiseOpenFileLimit(); !fds) {
    spdlog::warn("server: {}", fds.error().message);
  } else if (fds->soft != fds->soft_before) {
    spdlog::info("server: open-file limit raised from {} to {} (the hard limit {})",
                 fds->soft_before, fds->soft, Shown(fds->hard));
  } else {
    spdlog::info("server: open-file limit {} (the hard limit {})", Shown(fds->soft),
                 Shown(fds->hard));
  }
  GPUWERK_ASSIGN_OR_RETURN(http_options.trusted_proxies,
                           api::TrustedProxies::Parse(config.trusted_proxies));
  if (!http_options.trusted_proxies.empty()) {
    spdlog::info("server: X-Forwarded-For believed from the trusted proxies {}",
                 fmt::join(http_options.trusted_proxies.cidrs(), ", "));
  }
  GPUWERK_ASSIGN_OR_RETURN(p->http, api::HttpServer::Start(http_options, *p->router, *p->metrics));

  account_options.public_url = config.public_url.empty() ? p->http->base_url() : config.public_url;
  if (config.public_url.empty() &&
      (config.listen.starts_with("0.0.0.0:") || config.listen.starts_with("[::]:"))) {
    spdlog::warn(
        "server: listening on every address but mailed links will use {}; pass --public-url "
        "with the address people reach",
        account_options.public_url);
  }
  while (account_options.public_url.ends_with('/')) account_options.public_url.pop_back();
  mail::OutboxWorker* worker = p->outbox_worker.get();
  p->accounts = std::make_unique<auth::AccountService>(
      *p->db, clock, rng, *p->hasher, *p->outbox, account_options, [worker] { worker->Wake(); });
  // what holds a key is the scheduler's to say (keys does not depend on sched).
  p->ssh_keys = std::make_unique<keys::SshKeyRegistry>(
      *p->db, clock, rng, &sched::KeyUsers,
      [&clock, &rng, outbox = p->outbox.get(), worker](
          store::Transaction& tx, const keys::SshKey& former, const std::string& claimer_id) {
        auto cleared =
            sched::CancelEntriesHoldingAClaimedKey(tx, clock, rng, *outbox, former, claimer_id);
        if (cleared) worker->Wake();
        return cleared;
      });
  sched::SchedOptions sched_options;
  sched_options.instance_image = config.instance_image;
  sched_options.instance_memory_bytes = config.instance_memory_bytes;
  sched_options.host_unknown_after_seconds = config.host_unknown_after_seconds;
  // a team member's launches are billed to the team (billing does not link teams).
  p->resolve_account = &teams::TeamBillingAccountOf;
  sched_options.resolve_account = p->resolve_account;
  p->hosts = std::make_unique<sched::HostRegistry>(*p->db, clock, rng);
  p->desired_state = std::make_unique<sched::DesiredStateNotifier>();
  // launches and restarts need a payment method on the billing account; a recorded one
  // ends the pass-over streaks of its people's queue entries and drains the queues at once, so
  // that a passed-over entry launches while capacity is free (docs/billing.md "Gating").
  if (config.payment_provider == "stripe") {
    p->stripe_client = std::make_unique<billing::StripeClient>(billing::StripeClientOptions{
        .api_base = config.stripe_api_base, .secret_key = config.stripe_secret_key});
    p->payment_provider = std::make_unique<billing::StripeProvider>(
        *p->db, clock, *p->stripe_client,
        billing::StripeProviderOptions{.public_url = account_options.public_url});
  } else {
    p->payment_provider = std::make_unique<billing::ManualProvider>();
  }
  Parts* parts_for_billing = p.get();
  p->payment_methods = std::make_unique<billing::PaymentMethods>(
      *p->db, clock, rng, *p->payment_provider, p->resolve_account, [parts_for_billing] {
        auto ended = parts_for_billing->queue->EndPassOverStreaks();
        if (!ended)
          spdlog::warn("sched: ending pass-over streaks failed: {}", ended.error().message);
        auto drained = parts_for_billing->queue->DrainAll();
        if (!drained) spdlog::warn("sched: drain after a card failed: {}", drained.error().message);
      });
  p->payment_methods->SetAccountOwners(&AccountOwners);
  sched::LaunchGate gate = [methods = p->payment_methods.get()](store::Transaction& tx,
                                                                const std::string& person_id,
                                                                std::string_view action) {
    return methods->RequireForLaunch(tx, person_id, action);
  };
  p->instances = std::make_unique<sched::InstanceService>(*p->db, clock, rng, sched_options,
                                                          p->desired_state.get(), gate);
  p->silent_host_marker = p->instances.get();
  if (p->leader_db) {
    p->leader_instances = std::make_unique<sched::InstanceService>(
        *p->leader_db, clock, rng, sched_options, p->desired_state.get(), gate);
    p->silent_host_marker = p->leader_instances.get();
  }
  p->queue = std::make_unique<sched::QueueService>(
      *p->db, clock, rng, sched_options, *p->outbox, [worker] { worker->Wake(); },
      p->desired_state.get(), gate);
  p->queue->SetLeaderFence(p->leader.get());  // dispatch is leader-only (strict FIFO, R-11)
  sched::QueueService* queue = p->queue.get();
  p->agent_sync = std::make_unique<sched::AgentSync>(
      *p->db, clock, rng, sched_options,
      [queue](const std::string& gpu_type, const std::string& host_id) {
        auto drained = queue->Drain(gpu_type, {host_id});
        if (!drained) spdlog::warn("sched: queue drain failed: {}", drained.error().message);
      },
      p->outbox.get(), [worker] { worker->Wake(); });
  // Teams (R-15; docs/teams.md): what billing and the scheduler do when a membership changes
  // runs in the change's own transaction (TeamHooks).
  teams::TeamOptions team_options;
  team_options.public_url = account_options.public_url;
  team_options.hooks.team_created = [&clock, &rng, methods = p->payment_methods.get()](
                                        store::Transaction& tx, const std::string& team_id,
                                        const std::string& owner_id) -> core::Result<void> {
    // A person whose own invoice is unpaid makes no team (402 payment_failed, nothing made):
    // the team would otherwise launch around the hold (docs/teams.md "Billing").
    GPUWERK_TRY(methods->RequireNoOwnHold(tx, owner_id, "Making a team is refused"));
    GPUWERK_TRY(teams::MoveSoloBillingToTeam(tx, clock, rng, team_id, owner_id));
    return {};
  };
  team_options.hooks.member_left =
      [&clock, &rng, notifier = p->desired_state.get(), feed = &p->revocation.feed](
          store::Transaction& tx, const std::string& team_id, const std::string& person_id,
          int64_t at) -> core::Result<std::function<void()>> {
    GPUWERK_ASSIGN_OR_RETURN(
        auto deleted,
        sched::DeleteInstancesBilledTo(tx, clock, rng, person_id, team_id, at, "team_left"));
    if (deleted.instance_ids.empty()) return std::function<void()>();
    // Once committed: the hosts stop the containers and the relays end the relay sessions into
    // them now (docs/ssh.md "Revocation"), as a delete the person asked for would.
    return std::function<void()>([notifier, feed, deleted = std::move(deleted)] {
      if (!deleted.hosts.empty()) notifier->Notify(deleted.hosts);
      feed->Publish({.instance_ids = deleted.instance_ids, .reason = "team membership ended"});
    });
  };
  p->teams = std::make_unique<teams::TeamService>(
      *p->db, clock, rng, *p->outbox, std::move(team_options), [worker] { worker->Wake(); });
  p->idempotency = std::make_unique<api::IdempotencyKeys>(*p->db, clock);
  p->ssh_command = std::make_unique<api::SshCommandFormat>();
  if (!config.ssh_domain.empty()) {
    p->ssh_command->SetRelay(config.ssh_domain, "", static_cast<uint16_t>(config.ssh_port));
  }
  p->authn = std::make_unique<api::Authenticator>(*p->accounts, account_options.public_url);
  p->person_state = std::make_unique<sched::PersonStateReader>(*p->db, clock, sched_options);
  p->events =
      std::make_unique<api::EventHub>(api::PersonEventReader(*p->person_state, *p->ssh_command));
  p->events->ListenTo(*p->desired_state);
  p->relay_access =
      std::make_unique<access::RelayAccess>(*p->db, *p->instances, *p->clock, *p->rng);
  p->relay_credentials = std::make_unique<access::RelayCredentials>(*p->db, clock, rng);
  // A provider that collects invoices (stripe) gets each closed invoice pushed: queued by the
  // month close, sent by the invoice worker and by the operator's close (docs/billing.md
  // "Collecting invoices").
  const bool collects = p->payment_provider->CollectsInvoices();
  p->invoices = std::make_unique<billing::Invoices>(
      *p->db, clock, rng, sched_options.host_unknown_after_seconds, p->resolve_account,
      collects ? std::string(p->payment_provider->name()) : std::string());
  if (collects) {
    p->invoice_pusher =
        std::make_unique<billing::InvoicePusher>(*p->db, clock, rng, *p->payment_provider);
  }
  p->usage = std::make_unique<billing::UsageHistory>(*p->db, clock,
                                                     sched_options.host_unknown_after_seconds);
  p->month_closer = p->invoices.get();
  p->due_pusher = p->invoice_pusher.get();
  if (p->leader_db) {
    // The month close and the pushes are leader-only; an operator's close (a request) is not.
    p->leader_invoices = std::make_unique<billing::Invoices>(
        *p->leader_db, clock, rng, sched_options.host_unknown_after_seconds, p->resolve_account,
        collects ? std::string(p->payment_provider->name()) : std::string());
    p->month_closer = p->leader_invoices.get();
    if (collects) {
      p->leader_invoice_pusher =
          std::make_unique<billing::InvoicePusher>(*p->leader_db, clock, rng, *p->payment_provider);
      p->due_pusher = p->leader_invoice_pusher.get();
    }
  }
  p->api_context = std::make_unique<api::ApiContext>(api::ApiContext{
      *p->accounts, *p->ssh_keys, *p->authn, clock, *p->hosts, *p->instances, *p->agent_sync,
      *p->desired_state, *p->queue, *p->idempotency, *p->ssh_command, *p->relay_access,
      *p->relay_credentials, *p->db, rng, *p->payment_methods, p->events.get(), p->teams.get()});
  // Access changes (an instance deleted, a key taken off an account, an API token deleted) reach
  // the relays at once: in-process ones subscribe to the feed, remote ones hold a watch stream.
  p->instances->SetAccessChangeFeed(&p->revocation.feed);
  p->ssh_keys->SetAccessChangeFeed(&p->revocation.feed);
  p->accounts->SetAccessChangeFeed(&p->revocation.feed);
  p->revocation.watch = std::make_unique<api::RelayWatchHub>(p->revocation.feed);
  p->api_context->relay_watch = p->revocation.watch.get();
  p->api_context->invoices = p->invoices.get();
  p->api_context->invoice_pusher = p->invoice_pusher.get();
  p->api_context->usage = p->usage.get();
  if (p->stripe_client) {
    billing::StripeWebhooksOptions webhook_options;
    webhook_options.signing_secrets = SplitSecrets(config.stripe_webhook_secrets);
    webhook_options.owners = &AccountOwners;
    webhook_options.public_url = account_options.public_url;
    webhook_options.mail_queued = [worker] { worker->Wake(); };
    p->stripe_webhooks = std::make_unique<billing::StripeWebhooks>(
        *p->db, clock, rng, *p->stripe_client, *p->payment_methods, *p->outbox,
        std::move(webhook_options));
    p->api_context->stripe_webhook = [hooks = p->stripe_webhooks.get()](
                                         std::string_view signature,
                                         std::string_view body) -> core::Result<nlohmann::json> {
      GPUWERK_ASSIGN_OR_RETURN(billing::WebhookOutcome outcome, hooks->Handle(signature, body));
      return nlohmann::json{
          {"event", outcome.event_id}, {"type", outcome.type}, {"result", outcome.result}};
    };
  }
  // The configured first operator exists before /healthz answers, so that whoever waits for it
  // can sign in as them (an e2e test once signed in between the two and got 401).
  if (!config.operator_email.empty()) {
    auto made = p->accounts->EnsureOperator(config.operator_email, config.operator_password);
    if (!made) {
      made.error().message =
          "cannot create the operator " + config.operator_email + ": " + made.error().message;
      return std::unexpected(made.error());
    }
    if (*made) spdlog::info("server: created the operator account {}", config.operator_email);
  }
  // The server already listens (its port makes the public URL): /healthz goes in last, so that
  // whoever waits for it finds every API route there (QueueCrashTest once got a 404 between).
  api::RegisterApiRoutes(*p->router, *p->api_context);
  api::RegisterDashboardRoutes(*p->router, api::WebAssets(), api::DashboardPages());
  api::AddOperationalRoutes(*p->router, *p->metrics,
                            [ctx = p->api_context.get()](api::Request& req) {
                              return api::AdmitMetricsReader(*ctx, req);
                            });
  p->metrics->AddGauge("gpuwerk_event_streams", "Open event streams (GET /api/v1/events)",
                       [events = p->events.get()] { return double(events->open_streams()); });
  p->metrics->AddCounter("gpuwerk_mail_sent_total", "Outbox mails delivered",
                         [worker] { return static_cast<double>(worker->sent_total()); });
  p->metrics->AddCounter("gpuwerk_mail_failed_attempts_total", "Failed mail delivery attempts",
                         [worker] { return static_cast<double>(worker->failed_attempts_total()); });
  p->metrics->AddCounter("gpuwerk_mail_given_up_total", "Mails given up after the last retry",
                         [worker] { return static_cast<double>(worker->given_up_total()); });
  AddLeaderMetrics(*p->metrics, p->leader.get());
  p->outbox_worker->Start();
  Parts* parts = p.get();
  p->unknown_worker = std::thread([parts] {
    std::unique_lock lock(parts->worker_mu);
    while (!parts->worker_cv.wait_for(lock, std::chrono::seconds(1),
                                      [parts] { return parts->worker_stop; })) {
      lock.unlock();
      if (parts->Leading()) {
        auto marked = parts->silent_host_marker->MarkUnknownHosts(parts->clock->NowUnix());
        if (!marked)
          spdlog::warn("sched: marking unknown hosts failed: {}", marked.error().message);
      }
      lock.lock();
    }
  });
  p->drain_worker = std::thread([parts] {
    std::unique_lock lock(parts->worker_mu);
    for (;;) {
      // Every 3 s, or at once when this server became the leader (drain_wake).
      parts->worker_cv.wait_for(lock, std::chrono::seconds(3),
                                [parts] { return parts->worker_stop || parts->drain_wake; });
      if (parts->worker_stop) break;
      parts->drain_wake = false;
      lock.unlock();
      if (parts->Leading()) {
        auto drained = parts->queue->DrainAll();
        if (!drained)
          spdlog::warn("sched: periodic queue drain failed: {}", drained.error().message);
      }
      auto purged = parts->idempotency->Purge();
      if (!purged) spdlog::warn("api: purging idempotency keys failed: {}", purged.error().message);
      lock.lock();
    }
  });
  p->invoice_worker = std::thread([parts] {
    std::unique_lock lock(parts->worker_mu);
    while (!parts->worker_cv.wait_for(lock, std::chrono::seconds(60),
                                      [parts] { return parts->worker_stop; })) {
      lock.unlock();
      if (parts->Leading()) {
        auto closed = parts->month_closer->CloseDueMonth();
        if (!closed) {
          spdlog::warn("billing: closing the previous month failed: {}", closed.error().message);
        } else if (*closed) {
          spdlog::info("billing: closed month {}: {} invoices made", (*closed)->month,
                       (*closed)->invoices_created);
        }
        PushDueInvoices(*parts);
      }
      lock.lock();
    }
  });
  if (p->leader) p->leader->Start();
  spdlog::info("server: listening on {} (public URL {}, store {} {})", p->http->base_url(),
               account_options.public_url, p->db->Backend(),
               store::DescribeDatabase(config.database, sqlite_path));
  return std::unique_ptr<ServerApp>(new ServerApp(std::move(p)));
}

uint16_t ServerApp::port() const { return parts_->http->port(); }
std::string ServerApp::base_url() const { return parts_->http->base_url(); }

core::Result<bool> ServerApp::EnsureOperator(const std::string& email,
                                             const std::string& password) {
  return parts_->accounts->EnsureOperator(email, password);
}

core::Result<bool> ServerApp::PasswordMatches(const std::string& email,
                                              const std::string& password) {
  return parts_->accounts->PasswordMatches(email, password);
}

core::Result<std::string> ServerApp::RegisterLocalHost(const std::string& name,
                                                       const std::string& gpu_type,
                                                       bool gpu_required,
                                                       const sched::SshRegistration& ssh) {
  GPUWERK_ASSIGN_OR_RETURN(
      auto host,
      parts_->hosts->AddOrRotateToken(/*actor_id=*/"", name, gpu_type, gpu_required, "local", ssh));
  return host.token;
}

billing::PaymentMethods& ServerApp::payment_methods() { return *parts_->payment_methods; }

core::Result<bool> ServerApp::RecordLocalOperatorCard(const std::string& email) {
  billing::PaymentMethods& methods = *parts_->payment_methods;
  GPUWERK_ASSIGN_OR_RETURN(auth::EmailAddress address, auth::ParseEmailAddress(email));
  GPUWERK_ASSIGN_OR_RETURN(
      bool on_file, parts_->db->Read([&](store::Transaction& tx) -> core::Result<bool> {
        GPUWERK_ASSIGN_OR_RETURN(auto person,
                                 auth::PersonTable::FindByEmail(tx, address.normalised));
        if (!person) return core::NotFound("Person");
        return methods.HasPaymentMethod(tx, person->person.id);
      }));
  if (on_file) return false;
  GPUWERK_TRY(methods.SetCard(
      /*actor_id=*/"", email,
      {.brand = "manual", .last4 = "0000", .exp_month = 12, .exp_year = 2099}, "local"));
  return true;
}

core::Result<sched::DrainResult> ServerApp::DrainQueuesNow() { return parts_->queue->DrainAll(); }

core::Result<billing::InvoicePushReport> ServerApp::PushDueInvoicesNow() {
  if (!parts_->invoice_pusher) return billing::InvoicePushReport{};
  return parts_->invoice_pusher->PushDue();
}

void ServerApp::SetRelayAddress(const std::string& host, uint16_t port) {
  parts_->ssh_command->SetRelay("", host, port);
}

store::Database& ServerApp::database() { return *parts_->db; }
sched::InstanceService& ServerApp::instances() { return *parts_->instances; }
core::Clock& ServerApp::clock() { return *parts_->clock; }
core::Rng& ServerApp::rng() { return *parts_->rng; }
core::AccessChangeFeed& ServerApp::access_changes() { return parts_->revocation.feed; }

access::RelayCredentials& ServerApp::relay_credentials() { return *parts_->relay_credentials; }

mail::MailTransport ServerApp::mail_transport() const { return parts_->mail_transport; }

core::Result<int> ServerApp::DeliverMailNow() { return parts_->outbox_worker->DeliverDue(); }

void ServerApp::Stop() {
  if (!parts_ || parts_->stopped) return;
  parts_->stopped = true;
  // Long polls first: their answers go out before the HTTP server stops waiting for requests.
  if (parts_->events) parts_->events->Shutdown();  // event streams end (their last chunk)
  // Relays' watch streams end: each relay re-checks at once and, finding no server, fails closed.
  if (parts_->revocation.watch) parts_->revocation.watch->Shutdown();
  if (parts_->desired_state) parts_->desired_state->Shutdown();
  if (parts_->http) parts_->http->Stop();
  if (parts_->outbox_worker) parts_->outbox_worker->Stop();
  {
    std::lock_guard lock(parts_->worker_mu);
    parts_->worker_stop = true;
  }
  parts_->worker_cv.notify_all();
  if (parts_->unknown_worker.joinable()) parts_->unknown_worker.join();
  if (parts_->drain_worker.joinable()) parts_->drain_worker.join();
  if (parts_->invoice_worker.joinable()) parts_->invoice_worker.join();
  // Last: the lease is given up once no leader-only work runs here, so another replica takes it
  // over at once.
  if (parts_->leader) parts_->leader->Stop();
}

}  // namespace gpuwerk::app

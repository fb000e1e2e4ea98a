#include "app/server_app.h"

#include <spdlog/spdlog.h>

#include <filesystem>

#include "api/api_context.h"
#include "api/authenticator.h"
#include "api/http_server.h"
#include "api/metrics.h"
#include "api/router.h"
#include "auth/account_service.h"
#include "auth/password_hasher.h"
#include "keys/ssh_key_registry.h"
#include "mail/maildir_mailer.h"
#include "mail/outbox.h"
#include "mail/smtp_mailer.h"
#include "store/sqlite_database.h"

namespace gpuwerk::app {

/// Owned components, in construction order (destroyed in reverse).
struct ServerApp::Parts {
  ServerConfig config;
  core::Clock* clock = nullptr;
  core::Rng* rng = nullptr;
  std::unique_ptr<store::Database> db;
  std::unique_ptr<mail::Mailer> mailer;
  std::unique_ptr<mail::Outbox> outbox;
  std::unique_ptr<mail::OutboxWorker> outbox_worker;
  std::unique_ptr<auth::PasswordHasher> hasher;
  std::unique_ptr<auth::AccountService> accounts;
  std::unique_ptr<keys::SshKeyRegistry> ssh_keys;
  std::unique_ptr<api::Authenticator> authn;
  std::unique_ptr<api::ApiContext> api_context;
  std::unique_ptr<api::Metrics> metrics;
  std::unique_ptr<api::Router> router;
  std::unique_ptr<api::HttpServer> http;
  bool stopped = false;
};

namespace {

auth::HashCost CostFromName(const std::string& name) {
  if (name == "moderate") return auth::HashCost::kModerate;
  if (name == "test-only-minimum") return auth::HashCost::kTestOnlyMinimum;
  return auth::HashCost::kInteractive;
}

core::Result<std::unique_ptr<mail::Mailer>> MakeMailer(const ServerConfig& c) {
  if (c.mail == "smtp") {
    mail::SmtpMailer::Options o;
    o.url = c.smtp_url;
    o.from = c.smtp_from;
    o.username = c.smtp_username;
    o.password = c.smtp_password;
    o.starttls = c.smtp_starttls == "never"      ? mail::SmtpMailer::StartTls::kNever
                 : c.smtp_starttls == "required" ? mail::SmtpMailer::StartTls::kRequired
                                                 : mail::SmtpMailer::StartTls::kIfOffered;
    GPUWERK_TRY(mail::ValidateSmtpMailerOptions(o));
    return std::unique_ptr<mail::Mailer>(new mail::SmtpMailer(o));
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
  GPUWERK_ASSIGN_OR_RETURN(auto sqlite, store::SqliteDatabase::Open(
                                            {.path = (config.data_dir / "gpuwerk.db").string()}));
  p->db = std::move(sqlite);
  GPUWERK_TRY(store::Migrate(*p->db));

  GPUWERK_ASSIGN_OR_RETURN(p->mailer, MakeMailer(config));
  p->outbox = std::make_unique<mail::Outbox>(*p->db, clock, rng);
  p->outbox_worker = std::make_unique<mail::OutboxWorker>(*p->db, *p->mailer, clock,
                                                          mail::OutboxWorker::Options{});
  p->hasher = std::make_unique<auth::PasswordHasher>(CostFromName(config.password_hash_cost));

  // The public URL defaults to the listen address; fixed up below once the port is known.
  auth::AccountOptions account_options;
  const std::chrono::seconds window(config.sign_in_window_seconds);
  account_options.sign_in_failures_per_account.limit = config.sign_in_failures_per_account;
  account_options.sign_in_failures_per_account.window = window;
  account_options.sign_in_failures_per_address.limit = config.sign_in_failures_per_address;
  account_options.sign_in_failures_per_address.window = window;

  p->metrics = std::make_unique<api::Metrics>();
  p->router = std::make_unique<api::Router>();
  api::HttpServer::Options http_options;
  http_options.listen = config.listen;
  http_options.body_limit = static_cast<size_t>(config.body_limit_bytes);
  http_options.read_timeout = std::chrono::seconds(config.read_timeout_seconds);
  http_options.idle_timeout = std::chrono::seconds(config.idle_timeout_seconds);
  http_options.threads = config.http_threads;
  GPUWERK_ASSIGN_OR_RETURN(p->http, api::HttpServer::Start(http_options, *p->router, *p->metrics));

  account_options.public_url = config.public_url.empty() ? p->http->base_url() : config.public_url;
  while (account_options.public_url.ends_with('/')) account_options.public_url.pop_back();
  mail::OutboxWorker* worker = p->outbox_worker.get();
  p->accounts = std::make_unique<auth::AccountService>(
      *p->db, clock, rng, *p->hasher, *p->outbox, account_options, [worker] { worker->Wake(); });
  p->ssh_keys = std::make_unique<keys::SshKeyRegistry>(*p->db, clock, rng);
  p->authn = std::make_unique<api::Authenticator>(*p->accounts, account_options.public_url);
  p->api_context = std::make_unique<api::ApiContext>(
      api::ApiContext{*p->accounts, *p->ssh_keys, *p->authn, clock});
  api::AddOperationalRoutes(*p->router, *p->metrics);
  api::RegisterApiRoutes(*p->router, *p->api_context);
  p->metrics->AddCounter("gpuwerk_mail_sent_total", "Outbox mails delivered",
                         [worker] { return static_cast<double>(worker->sent_total()); });
  p->metrics->AddCounter("gpuwerk_mail_failed_attempts_total", "Failed mail delivery attempts",
                         [worker] { return static_cast<double>(worker->failed_attempts_total()); });
  p->metrics->AddCounter("gpuwerk_mail_given_up_total", "Mails given up after the last retry",
                         [worker] { return static_cast<double>(worker->given_up_total()); });
  p->outbox_worker->Start();
  spdlog::info("server: listening on {} (public URL {}, store sqlite {})", p->http->base_url(),
               account_options.public_url, (config.data_dir / "gpuwerk.db").string());
  return std::unique_ptr<ServerApp>(new ServerApp(std::move(p)));
}

uint16_t ServerApp::port() const { return parts_->http->port(); }
std::string ServerApp::base_url() const { return parts_->http->base_url(); }

core::Result<bool> ServerApp::EnsureOperator(const std::string& email,
                                             const std::string& password) {
  return parts_->accounts->EnsureOperator(email, password);
}

core::Result<int> ServerApp::DeliverMailNow() { return parts_->outbox_worker->DeliverDue(); }

void ServerApp::Stop() {
  if (!parts_ || parts_->stopped) return;
  parts_->stopped = true;
  if (parts_->http) parts_->http->Stop();
  if (parts_->outbox_worker) parts_->outbox_worker->Stop();
}

}  // namespace gpuwerk::app

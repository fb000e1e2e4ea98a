// login, signup, logout, whoami: the person's own account, and the login file they leave behind.
#include <signal.h>
#include <termios.h>
#include <unistd.h>

#include <array>
#include <cctype>
#include <ctime>
#include <filesystem>
#include <optional>

#include "cli/internal/verb_groups.h"
#include "cli/output.h"
#include "core/strings.h"
#include "core/time_format.h"

namespace gpuwerk::cli::internal {
namespace {

namespace fs = std::filesystem;
using core::ErrorCode;
using nlohmann::json;

/// The session cookie's names: the server's public URL decides (https: the `__Host-` one).
constexpr std::string_view kSessionCookieNames[] = {"__Host-gpuwerk_session", "gpuwerk_session"};
constexpr size_t kMaxPasswordBytes = 4096;

/// The options of login, logout and whoami (--url, --token, --json are in CommonOptions).
struct AccountOptions {
  std::string email;
  bool password_stdin = false;
};

/// The terminal state to restore if a signal ends the process while echo is off. A signal
/// handler can reach nothing else, hence file-scope state (set only by EchoOff).
struct termios g_saved_termios;
volatile sig_atomic_t g_echo_is_off = 0;

extern "C" void RestoreTerminalAndReraise(int sig) {
  if (g_echo_is_off) ::tcsetattr(STDIN_FILENO, TCSANOW, &g_saved_termios);
  ::signal(sig, SIG_DFL);
  ::raise(sig);
}

/// Turns terminal echo off on standard input for its lifetime (the newline still echoes), and
/// puts it back on destruction or on SIGINT/SIGTERM/SIGHUP/SIGQUIT.
class EchoOff {
 public:
  EchoOff() {
    if (::tcgetattr(STDIN_FILENO, &g_saved_termios) != 0) return;  // not a terminal
    struct termios quiet = g_saved_termios;
    quiet.c_lflag &= ~static_cast<tcflag_t>(ECHO);
    quiet.c_lflag |= ECHONL;
    struct sigaction action {};
    action.sa_handler = &RestoreTerminalAndReraise;
    sigemptyset(&action.sa_mask);
    for (size_t i = 0; i < kSignals.size(); ++i) ::sigaction(kSignals[i], &action, &old_[i]);
    installed_ = true;
    g_echo_is_off = 1;
    ::tcsetattr(STDIN_FILENO, TCSANOW, &quiet);  // not TCSAFLUSH: keep what was typed ahead
  }
  ~EchoOff() {
    if (!installed_) return;
    ::tcsetattr(STDIN_FILENO, TCSANOW, &g_saved_termios);
    g_echo_is_off = 0;
    for (size_t i = 0; i < kSignals.size(); ++i) ::sigaction(kSignals[i], &old_[i], nullptr);
  }
  EchoOff(const EchoOff&) = delete;
  EchoOff& operator=(const EchoOff&) = delete;

 private:
  static constexpr std::array<int, 4> kSignals = {SIGINT, SIGTERM, SIGHUP, SIGQUIT};
  std::array<struct sigaction, 4> old_{};
  bool installed_ = false;
};

core::Result<std::string> AskLine(VerbContext& ctx, std::string_view prompt) {
  *ctx.io.err << prompt;
  ctx.io.err->flush();
  std::string line;
  if (!std::getline(*ctx.io.in, line)) {
    return core::Fail(ErrorCode::kInvalidArgument, "input_ended",
                      "standard input ended before an answer was given");
  }
  return std::string(core::Trim(line, core::kWhitespace));
}

core::Result<std::string> ReadPassword(VerbContext& ctx, const AccountOptions& opt,
                                       std::string_view prompt) {
  if (opt.password_stdin) {
    GPUWERK_ASSIGN_OR_RETURN(std::string password,
                             ReadAll(*ctx.io.in, kMaxPasswordBytes, "the password on stdin"));
    // As `docker login --password-stdin`: one trailing newline (LF or CRLF) is not part of it.
    if (password.ends_with('\n')) password.pop_back();
    if (password.ends_with('\r')) password.pop_back();
    return password;
  }
  std::string password;
  {
    // Echo goes off before the prompt appears, so nothing typed after it can be shown.
    EchoOff echo_off;
    *ctx.io.err << prompt;
    ctx.io.err->flush();
    if (!std::getline(*ctx.io.in, password)) {
      return core::Fail(ErrorCode::kInvalidArgument, "input_ended",
                        "standard input ended before the password was given");
    }
  }
  if (password.ends_with('\r')) password.pop_back();
  return password;
}

/// The sign-in session's cookie as a Cookie header sends it back ("name=value") from the
/// Set-Cookie headers of a sign-in, "" when there is none.
std::string SessionCookiePair(const std::vector<std::string>& set_cookies) {
  for (const auto& cookie : set_cookies) {
    for (std::string_view name : kSessionCookieNames) {
      const std::string prefix = std::string(name) + "=";
      if (!cookie.starts_with(prefix)) continue;
      std::string pair = cookie.substr(0, cookie.find(';'));
      if (pair.size() > prefix.size()) return pair;
    }
  }
  return "";
}

/// "cli <hostname> <UTC time>", in the characters the server allows in a token name (letters,
/// digits, space, '.', '-', '_'; at most 64), e.g. "cli build-01 2026-11-30T024417Z".
std::string TokenName(int attempt) {
  char host_buffer[256] = {};
  if (::gethostname(host_buffer, sizeof(host_buffer) - 1) != 0) host_buffer[0] = '\0';
  std::string host;
  for (const char* p = host_buffer; *p != '\0' && host.size() < 32; ++p) {
    const auto c = static_cast<unsigned char>(*p);
    host += (std::isalnum(c) || c == '.' || c == '-' || c == '_') ? static_cast<char>(c) : '-';
  }
  if (host.empty()) host = "unknown-host";
  std::string stamp;
  for (char c : core::FormatRfc3339(static_cast<int64_t>(std::time(nullptr)))) {
    if (c != ':') stamp += c;
  }
  std::string name = "cli " + host + " " + stamp;
  if (attempt > 0) name += " " + std::to_string(attempt + 1);
  return name;
}

/// With a signed-in client: creates an API token and saves the login file. Deletes the token
/// again when the file cannot be written.
core::Result<void> CreateTokenAndSave(VerbContext& ctx, const ApiClient& client,
                                      const fs::path& login_path, const std::string& email) {
  json created;
  for (int attempt = 0;; ++attempt) {
    const json body = {{"name", TokenName(attempt)}};
    auto r = client.CallOk("POST", "/api/v1/tokens", &body);
    if (r) {
      created = std::move(*r);
      break;
    }
    // Two logins from one host within a second share the name; try again with a suffix.
    if (r.error().api_code != "name_taken" || attempt >= 4) return core::Fail(r.error());
  }
  const std::string token = Str(created, "token");
  const std::string id = Str(created, "id");
  if (token.empty()) {
    return core::Fail(ErrorCode::kInternal, "unexpected_response",
                      "the server at " + client.base_url() + " created no API token");
  }
  auto saved = WriteLoginFile(login_path, Login{client.base_url(), token, email});
  if (!saved) {
    if (!id.empty()) {
      auto undone = client.CallOk("DELETE", "/api/v1/tokens/" + PathEscape(id));
      if (!undone) Warn(ctx, "could not delete the unused API token: " + undone.error().message);
    }
    return saved;
  }
  return {};
}

/// Deletes the API token `token` on `url`, authenticating with the token itself. Best effort:
/// a token the server no longer accepts is already gone.
void RevokeOwnToken(VerbContext& ctx, const std::string& url, const std::string& token) {
  ApiClient old(url, token);
  auto tokens = old.GetAllPages("/api/v1/tokens");
  if (!tokens) return;
  for (const auto& item : *tokens) {
    if (!IsTokenItem(item, token)) continue;
    auto deleted = old.CallOk("DELETE", "/api/v1/tokens/" + PathEscape(Str(item, "id")));
    if (!deleted && deleted.error().api_code != "not_found") {
      Warn(ctx, "could not delete the previous login's API token: " + deleted.error().message);
    }
  }
}

/// Where login and signup go: the login file, the login it holds, and the server (--url,
/// GPUWERK_URL, the server of the last login, the local default).
struct LoginPlace {
  fs::path login_path;
  std::optional<Login> previous;
  std::string url;  ///< normalised as ApiClient does
};

core::Result<LoginPlace> FindLoginPlace(VerbContext& ctx) {
  LoginPlace place;
  GPUWERK_ASSIGN_OR_RETURN(place.login_path, LoginFilePath(ctx.io.env));
  if (auto read = ReadLoginFile(place.login_path); read && *read) place.previous = **read;
  std::string url = ctx.common.target.url;
  if (url.empty()) url = ctx.io.env("GPUWERK_URL").value_or("");
  if (url.empty() && place.previous) url = place.previous->url;
  if (url.empty()) url = kDefaultServerUrl;
  place.url = ApiClient(url, "").base_url();
  return place;
}

/// The email and password to sign in (or up) with: --email or asked; --password-stdin or asked
/// with echo off (`confirm`: asked twice, for a new password). Errors: "email_required",
/// "no_terminal" (`alternative` says what else works), "password_required", "passwords_differ",
/// "input_ended".
core::Result<std::pair<std::string, std::string>> AskCredentials(VerbContext& ctx,
                                                                 const AccountOptions& opt,
                                                                 bool confirm,
                                                                 std::string_view alternative) {
  if (opt.password_stdin && opt.email.empty()) {
    return core::Fail(ErrorCode::kInvalidArgument, "email_required",
                      "--password-stdin needs the address too: pass --email EMAIL");
  }
  if (!opt.password_stdin && !ctx.io.in_is_terminal) {
    return core::Fail(ErrorCode::kInvalidArgument, "no_terminal",
                      "cannot ask for the password: standard input is not a terminal; pass the "
                      "password on standard input with --password-stdin (and --email EMAIL)" +
                          std::string(alternative));
  }
  std::string email = opt.email;
  if (email.empty()) {
    GPUWERK_ASSIGN_OR_RETURN(email, AskLine(ctx, "Email: "));
    if (email.empty()) return core::InvalidArgument("email_required", "no email address given");
  }
  GPUWERK_ASSIGN_OR_RETURN(std::string password, ReadPassword(ctx, opt, "Password: "));
  if (password.empty()) return core::InvalidArgument("password_required", "no password given");
  if (confirm && !opt.password_stdin) {
    GPUWERK_ASSIGN_OR_RETURN(const std::string again, ReadPassword(ctx, opt, "Password again: "));
    if (again != password) {
      return core::InvalidArgument("passwords_differ",
                                   "the two passwords differ; nothing was sent");
    }
  }
  return std::pair{std::move(email), std::move(password)};
}

/// After a password login or a signup answered `signed_in` (with a sign-in session cookie):
/// creates an API token with that sign-in session, saves it in the login file, ends the sign-in
/// session, and deletes the previous login's token on the same server. Returns the person's
/// email as the server spells it.
core::Result<std::string> KeepSignIn(VerbContext& ctx, const LoginPlace& place,
                                     const ApiResponse& signed_in, std::string email) {
  if (!signed_in.ok()) return core::Fail(ErrorFromResponse(signed_in));
  const std::string session = SessionCookiePair(signed_in.set_cookies);
  if (session.empty()) {
    return core::Fail(ErrorCode::kInternal, "unexpected_response",
                      "the server at " + place.url +
                          " accepted the password but started no sign-in session; is it a "
                          "gpuwerk server?");
  }
  if (std::string e = Str(Field(signed_in.body, "person"), "email"); !e.empty()) email = e;

  // The sign-in session only serves to create the API token; end it whatever happens.
  ApiClient client(place.url, "");
  client.SetCookie(session);
  auto saved = CreateTokenAndSave(ctx, client, place.login_path, email);
  auto ended = client.Call("POST", "/api/v1/auth/logout");
  if (!ended) {
    Warn(ctx, "could not end the temporary sign-in session: " + ended.error().message);
  } else if (!ended->ok()) {
    Warn(ctx, "could not end the temporary sign-in session: " + ErrorFromResponse(*ended).message);
  }
  GPUWERK_TRY(saved);
  // A new login replaces the previous one on the same server: its token would be orphaned.
  const std::optional<Login>& previous = place.previous;
  if (previous && ApiClient(previous->url, "").base_url() == place.url &&
      !previous->token.empty()) {
    RevokeOwnToken(ctx, place.url, previous->token);
  }
  return email;
}

/// The answer of login and signup: `{"url", "email"}` under --json, else `sentence`.
void PrintLoggedIn(VerbContext& ctx, const std::string& url, const std::string& email,
                   std::string_view sentence) {
  if (PrintJsonIfAsked(ctx, json{{"url", url}, {"email", email}})) return;
  Print(ctx, std::string(sentence) + " " + url + " as " + SafeText(email) + ".\n");
}

core::Result<void> LoginVerb(VerbContext& ctx, const AccountOptions& opt) {
  GPUWERK_ASSIGN_OR_RETURN(const LoginPlace place, FindLoginPlace(ctx));
  const std::string& url = place.url;

  if (!ctx.common.target.token.empty()) {
    ApiClient authed(url, ctx.common.target.token);
    auto me = authed.CallOk("GET", "/api/v1/me");
    if (!me && me.error().api_code == "unauthenticated") {
      return core::Fail(ErrorCode::kUnauthenticated, "unauthenticated",
                        "the server at " + url + " does not accept this API token");
    }
    if (!me) return core::Fail(me.error());
    const std::string email = Str(*me, "email");
    GPUWERK_TRY(WriteLoginFile(place.login_path, Login{url, ctx.common.target.token, email}));
    PrintLoggedIn(ctx, url, email, "Logged in to");
    return {};
  }

  GPUWERK_ASSIGN_OR_RETURN(auto credentials, AskCredentials(ctx, opt, /*confirm=*/false,
                                                            ", or log in with --token TOKEN"));
  const json body = {{"email", credentials.first}, {"password", credentials.second}};
  GPUWERK_ASSIGN_OR_RETURN(ApiResponse signed_in,
                           ApiClient(url, "").Call("POST", "/api/v1/auth/login", &body));
  GPUWERK_ASSIGN_OR_RETURN(const std::string email,
                           KeepSignIn(ctx, place, signed_in, credentials.first));
  PrintLoggedIn(ctx, url, email, "Logged in to");
  return {};
}

core::Result<void> SignupVerb(VerbContext& ctx, const AccountOptions& opt) {
  GPUWERK_ASSIGN_OR_RETURN(const LoginPlace place, FindLoginPlace(ctx));
  GPUWERK_ASSIGN_OR_RETURN(auto credentials, AskCredentials(ctx, opt, /*confirm=*/true, ""));
  const json body = {{"email", credentials.first}, {"password", credentials.second}};
  GPUWERK_ASSIGN_OR_RETURN(ApiResponse signed_up,
                           ApiClient(place.url, "").Call("POST", "/api/v1/auth/signup", &body));
  if (!signed_up.ok()) return core::Fail(ErrorFromResponse(signed_up));
  // The server answers alike whether or not the address has an account; the mail tells which
  // (docs/accounts.md "Sign-up"), so there is nothing to log in with yet.
  const std::string& email = credentials.first;
  if (PrintJsonIfAsked(ctx, json{{"url", place.url}, {"email", email}, {"check_mail", true}})) {
    return {};
  }
  Print(ctx, "Check the mail of " + SafeText(email) +
                 ": open the link in it to confirm the address and set your password, then run "
                 "'gpuwerk login --url " +
                 place.url + "'.\n");
  return {};
}

core::Result<void> LogoutVerb(VerbContext& ctx) {
  auto resolved = ResolveTarget(ctx.common.target, ctx.io.env);
  if (!resolved && resolved.error().api_code == "not_logged_in") {
    if (!PrintJsonIfAsked(ctx, json{{"url", nullptr}, {"logged_out", false}})) {
      Print(ctx, "Not logged in.\n");
    }
    return {};
  }
  if (!resolved) return core::Fail(resolved.error());
  ServerConnection server(std::move(*resolved));
  const std::string& url = server.target().url;
  const std::string& token = server.target().token;

  bool token_was_valid = true;
  auto tokens = server.client().GetAllPages("/api/v1/tokens");
  if (!tokens && tokens.error().api_code == "unauthenticated") {
    token_was_valid = false;  // deleted already (or never valid): nothing to delete
  } else if (!tokens) {
    return core::Fail(tokens.error());
  } else {
    std::vector<std::string> ids;
    for (const auto& item : *tokens) {
      if (IsTokenItem(item, token)) ids.push_back(Str(item, "id"));
    }
    if (ids.size() > 1) {
      return core::Fail(ErrorCode::kFailedPrecondition, "ambiguous_token",
                        "several API tokens start like this one; delete it with 'gpuwerk "
                        "tokens rm ID' (see 'gpuwerk tokens ls')");
    }
    if (ids.size() == 1) {
      auto deleted = server.client().CallOk("DELETE", "/api/v1/tokens/" + PathEscape(ids[0]));
      if (!deleted && deleted.error().api_code != "not_found" &&
          deleted.error().api_code != "unauthenticated") {
        return core::Fail(deleted.error());
      }
    }
  }

  // Forget the saved login when it holds the token just deleted.
  if (auto path = LoginFilePath(ctx.io.env)) {
    if (auto saved = ReadLoginFile(*path); !saved || (*saved && (*saved)->token == token)) {
      GPUWERK_TRY(RemoveLoginFile(*path));
    }
  }
  if (PrintJsonIfAsked(ctx, json{{"url", url}, {"logged_out", true}})) return {};
  Print(ctx, token_was_valid
                 ? "Logged out of " + url + ".\n"
                 : "Logged out of " + url + " (the server no longer accepted the token).\n");
  return {};
}

core::Result<void> WhoamiVerb(VerbContext& ctx) {
  GPUWERK_ASSIGN_OR_RETURN(ServerConnection server, Connect(ctx));
  GPUWERK_ASSIGN_OR_RETURN(json me, server.Ok("GET", "/api/v1/me"));
  if (PrintJsonIfAsked(ctx, me)) return {};
  const json& team = Field(me, "team");
  std::string team_text = team.is_object() ? Str(team, "name") : CellText(team);
  if (std::string role = Str(me, "role"); !role.empty()) team_text += " (" + role + ")";
  const json& billing = Field(me, "billing");
  const json& account = Field(billing, "account");
  std::string billing_text =
      account.is_object() ? Str(account, "kind") + " (" + Str(account, "name") + ")"
                          : (billing.is_object() ? Str(billing, "account") : CellText(billing));
  if (Field(billing, "payment_method_on_file").is_boolean()) {
    billing_text += Field(billing, "payment_method_on_file").get<bool>()
                        ? ", payment method on file"
                        : ", no payment method on file";
  }
  if (const json& hold = Field(billing, "payment_hold"); hold.is_object()) {
    billing_text += "; payment of invoice " + Str(hold, "invoice_id") +
                    " failed: launches refused until it is paid ('gpuwerk billing')";
  }
  const std::vector<std::pair<std::string, std::string>> rows = {
      {"Email:", Str(me, "email")},
      {"Address:", Field(me, "email_proven") == false
                       ? "not confirmed: open the link mailed at sign-up"
                       : "confirmed"},
      {"Server:", server.target().url},
      {"Operator:", Field(me, "is_operator") == true ? "yes" : "no"},
      {"Team:", team_text},
      {"Billing:", billing_text},
  };
  std::string text;
  for (const auto& [label, value] : rows) {
    text += label + std::string(11 - label.size(), ' ') + SafeText(value) + "\n";
  }
  Print(ctx, text);
  return {};
}

}  // namespace

void AddAccountVerbs(CLI::App& app, const VerbRegistry& verbs) {
  auto opt = std::make_shared<AccountOptions>();
  CommonOptions& common = verbs.common();
  // login and signup: their own --url (no login yet), --email and --password-stdin.
  auto add_sign_in = [&](const std::string& name, const std::string& help,
                         const std::string& password_help, auto verb) {
    CLI::App* cmd = app.add_subcommand(name, help);
    cmd->add_option("--url", common.target.url,
                    "server URL (default: GPUWERK_URL, the last login's, or " +
                        std::string(kDefaultServerUrl) + ")");
    cmd->add_option("--email", opt->email, "your account's email address (asked if not given)");
    cmd->add_flag("--password-stdin", opt->password_stdin, password_help);
    verbs.OnRun(cmd, [opt, verb](VerbContext& ctx) { return verb(ctx, *opt); });
    return cmd;
  };
  add_sign_in("login", "Sign in to a gpuwerk server and save an API token for the other commands",
              "read the password from standard input", &LoginVerb)
      ->add_option("--token", common.target.token,
                   "save this existing API token instead of signing in with a password");
  add_sign_in("signup",
              "Ask for an account: a mailed link (valid 24 hours) confirms the address, then "
              "`gpuwerk login`",
              "read the new password from standard input (else it is asked twice)", &SignupVerb)
      ->footer(
          "The server mails the address a link (valid 24 hours) that confirms the address and "
          "sets the password; open it, then run `gpuwerk login` (before that, login fails with "
          "email_unverified). Nothing is saved, and the answer is the same whether or not the "
          "address has an account (its owner is mailed a notice instead). A lost or expired "
          "link: sign up again with the same address.");
  verbs.AddVerb(app, "logout", "Delete this CLI's API token and forget the saved login",
                &LogoutVerb);
  verbs.AddVerb(app, "whoami", "Show who the saved login belongs to", &WhoamiVerb);
}

}  // namespace gpuwerk::cli::internal

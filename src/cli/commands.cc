#include "cli/commands.h"

#include <signal.h>
#include <termios.h>
#include <unistd.h>

#include <array>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <memory>
#include <optional>
#include <thread>

#include "cli/api_client.h"
#include "cli/output.h"
#include "core/encoding.h"
#include "core/time_format.h"
#include "keys/public_key.h"

namespace gpuwerk::cli {
namespace {

namespace fs = std::filesystem;
using core::ErrorCode;
using nlohmann::json;

constexpr std::string_view kSessionCookieName = "gpuwerk_session";
/// The server accepts public keys of up to 64 KiB; a file larger than that is not one.
constexpr size_t kMaxPublicKeyFileBytes = 64 * 1024;
constexpr size_t kMaxPasswordBytes = 4096;

/// Storage for every verb's options; only one verb runs per invocation.
struct Options {
  TargetFlags target;
  bool json = false;
  std::string email;
  bool password_stdin = false;
  std::string name;
  std::string file;
  std::string id;
  std::string key;
  std::string gpu_type = "spark-1x";
  bool no_gpu = false;
  std::vector<std::string> args;
  // admin gpu-types set: only the options given are changed.
  std::optional<int64_t> price_minor;
  std::optional<int64_t> hosts_per_instance;
  std::optional<std::string> description;
  std::optional<std::string> currency;
  int page = 1;          ///< relay-sessions --page
  std::string instance;  ///< admin relay-sessions --instance
  std::string person;    ///< admin relay-sessions --person
  int64_t count = 0;     ///< events --count: stop after this many events (0: never)
};

/// What a verb's callback works with; owned (through a shared_ptr) by the CLI11 callbacks.
struct Context {
  ClientIo io;
  Options opt;
  int* exit_code = nullptr;
};

using Verb = core::Result<void> (*)(Context&);

// --- small helpers ---------------------------------------------------------------------------

/// `obj[key]` when `obj` is an object that has it, else null (never throws).
const json& Field(const json& obj, const char* key) {
  static const json kNull;
  if (!obj.is_object()) return kNull;
  auto it = obj.find(key);
  return it == obj.end() ? kNull : *it;
}

/// `obj[key]` as a string, "" when absent or not a string.
std::string Str(const json& obj, const char* key) {
  const json& v = Field(obj, key);
  return v.is_string() ? v.get<std::string>() : std::string();
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

void Print(Context& ctx, std::string_view text) {
  *ctx.io.out << text;
  ctx.io.out->flush();
}

void Warn(Context& ctx, std::string_view text) {
  *ctx.io.err << "gpuwerk: warning: " << SafeText(text) << "\n";
  ctx.io.err->flush();
}

/// Runs a verb and turns its outcome into the exit code and, on failure, the one stderr line.
void Run(Context& ctx, Verb verb) {
  core::Result<void> result;
  try {
    result = verb(ctx);
  } catch (const std::exception& e) {
    result = core::Internal(std::string("unexpected failure: ") + e.what());
  }
  ctx.io.out->flush();
  if (result) {
    *ctx.exit_code = 0;
    return;
  }
  const core::Error& error = result.error();
  *ctx.io.err << "gpuwerk: " << SafeText(error.message) << " (" << SafeText(error.api_code)
              << ")\n";
  ctx.io.err->flush();
  *ctx.exit_code = 1;
}

/// Reads all of `in`, refusing more than `limit` bytes.
core::Result<std::string> ReadAll(std::istream& in, size_t limit, std::string_view what) {
  std::string data(limit + 1, '\0');
  in.read(data.data(), static_cast<std::streamsize>(limit + 1));
  if (in.bad()) {
    return core::Fail(ErrorCode::kInvalidArgument, "read_failed",
                      "cannot read " + std::string(what));
  }
  data.resize(static_cast<size_t>(in.gcount()));
  if (data.size() > limit) {
    return core::Fail(ErrorCode::kPayloadTooLarge, "input_too_large",
                      std::string(what) + " is larger than " + std::to_string(limit) + " bytes");
  }
  return data;
}

// --- talking to the server -------------------------------------------------------------------

/// A resolved target and a client for it, with the CLI's wording for a refused token.
class Session {
 public:
  explicit Session(Target target) : client_(target.url, target.token), target_(std::move(target)) {
    target_.url = client_.base_url();
  }

  const Target& target() const { return target_; }
  const ApiClient& client() const { return client_; }

  core::Result<json> Ok(std::string_view method, std::string_view path,
                        const json* body = nullptr) const {
    auto r = client_.CallOk(method, path, body);
    if (!r) return core::Fail(Explain(std::move(r).error()));
    return r;
  }

  core::Result<json> All(std::string_view path) const {
    auto r = client_.GetAllPages(path);
    if (!r) return core::Fail(Explain(std::move(r).error()));
    return r;
  }

  /// Rewords the server's generic "unauthenticated" for someone at a terminal.
  core::Error Explain(core::Error error) const {
    if (error.api_code == "unauthenticated") {
      error.message = "the server at " + target_.url +
                      " refused the API token (deleted, or mistyped?): run 'gpuwerk login' "
                      "again, or check GPUWERK_TOKEN / --token";
    }
    return error;
  }

 private:
  ApiClient client_;
  Target target_;
};

core::Result<Session> Connect(const Context& ctx) {
  GPUWERK_ASSIGN_OR_RETURN(Target target, ResolveTarget(ctx.opt.target, ctx.io.env));
  return Session(std::move(target));
}

/// Whether the API token `token` is the one listed as `item` (the list shows only a prefix).
bool IsTokenItem(const json& item, std::string_view token) {
  const std::string prefix = Str(item, "prefix");
  return !prefix.empty() && token.starts_with(prefix);
}

// --- login -----------------------------------------------------------------------------------

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

core::Result<std::string> AskLine(Context& ctx, std::string_view prompt) {
  *ctx.io.err << prompt;
  ctx.io.err->flush();
  std::string line;
  if (!std::getline(*ctx.io.in, line)) {
    return core::Fail(ErrorCode::kInvalidArgument, "input_ended",
                      "standard input ended before an answer was given");
  }
  return std::string(Trim(line));
}

core::Result<std::string> ReadPassword(Context& ctx) {
  if (ctx.opt.password_stdin) {
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
    *ctx.io.err << "Password: ";
    ctx.io.err->flush();
    if (!std::getline(*ctx.io.in, password)) {
      return core::Fail(ErrorCode::kInvalidArgument, "input_ended",
                        "standard input ended before the password was given");
    }
  }
  if (password.ends_with('\r')) password.pop_back();
  return password;
}

/// The session token from the `gpuwerk_session` Set-Cookie, "" when there is none.
std::string SessionCookieValue(const std::vector<std::string>& set_cookies) {
  const std::string prefix = std::string(kSessionCookieName) + "=";
  for (const auto& cookie : set_cookies) {
    if (!cookie.starts_with(prefix)) continue;
    std::string value = cookie.substr(prefix.size(), cookie.find(';') - prefix.size());
    if (!value.empty()) return value;
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
core::Result<void> CreateTokenAndSave(Context& ctx, const ApiClient& client,
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
void RevokeOwnToken(Context& ctx, const std::string& url, const std::string& token) {
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

core::Result<void> LoginVerb(Context& ctx) {
  const Options& o = ctx.opt;
  GPUWERK_ASSIGN_OR_RETURN(const fs::path login_path, LoginFilePath(ctx.io.env));

  // The server: --url, GPUWERK_URL, the server of the last login, the local default.
  std::optional<Login> previous;
  if (auto read = ReadLoginFile(login_path); read && *read) previous = **read;
  std::string url = o.target.url;
  if (url.empty()) url = ctx.io.env("GPUWERK_URL").value_or("");
  if (url.empty() && previous) url = previous->url;
  if (url.empty()) url = kDefaultServerUrl;
  ApiClient client(url, "");
  url = client.base_url();

  if (!o.target.token.empty()) {
    ApiClient authed(url, o.target.token);
    auto me = authed.CallOk("GET", "/api/v1/me");
    if (!me && me.error().api_code == "unauthenticated") {
      return core::Fail(ErrorCode::kUnauthenticated, "unauthenticated",
                        "the server at " + url + " does not accept this API token");
    }
    if (!me) return core::Fail(me.error());
    const std::string email = Str(*me, "email");
    GPUWERK_TRY(WriteLoginFile(login_path, Login{url, o.target.token, email}));
    Print(ctx, "Logged in to " + url + " as " + SafeText(email) + ".\n");
    return {};
  }

  if (o.password_stdin && o.email.empty()) {
    return core::Fail(ErrorCode::kInvalidArgument, "email_required",
                      "--password-stdin needs the address too: pass --email EMAIL");
  }
  if (!o.password_stdin && !ctx.io.in_is_terminal) {
    return core::Fail(ErrorCode::kInvalidArgument, "no_terminal",
                      "cannot ask for the password: standard input is not a terminal; pass the "
                      "password on standard input with --password-stdin (and --email EMAIL), or "
                      "log in with --token TOKEN");
  }
  std::string email = o.email;
  if (email.empty()) {
    GPUWERK_ASSIGN_OR_RETURN(email, AskLine(ctx, "Email: "));
    if (email.empty()) return core::InvalidArgument("email_required", "no email address given");
  }
  GPUWERK_ASSIGN_OR_RETURN(const std::string password, ReadPassword(ctx));
  if (password.empty()) return core::InvalidArgument("password_required", "no password given");

  const json credentials = {{"email", email}, {"password", password}};
  GPUWERK_ASSIGN_OR_RETURN(ApiResponse signed_in,
                           client.Call("POST", "/api/v1/auth/login", &credentials));
  if (!signed_in.ok()) return core::Fail(ErrorFromResponse(signed_in));
  const std::string session = SessionCookieValue(signed_in.set_cookies);
  if (session.empty()) {
    return core::Fail(ErrorCode::kInternal, "unexpected_response",
                      "the server at " + url +
                          " accepted the password but started no sign-in session; is it a "
                          "gpuwerk server?");
  }
  if (std::string e = Str(Field(signed_in.body, "person"), "email"); !e.empty()) email = e;

  // The sign-in session only serves to create the API token; end it whatever happens.
  client.SetCookie(std::string(kSessionCookieName) + "=" + session);
  auto saved = CreateTokenAndSave(ctx, client, login_path, email);
  auto ended = client.Call("POST", "/api/v1/auth/logout");
  if (!ended) {
    Warn(ctx, "could not end the temporary sign-in session: " + ended.error().message);
  } else if (!ended->ok()) {
    Warn(ctx, "could not end the temporary sign-in session: " + ErrorFromResponse(*ended).message);
  }
  GPUWERK_TRY(saved);
  // A new login replaces the previous one on the same server: its token would be orphaned.
  if (previous && ApiClient(previous->url, "").base_url() == url && !previous->token.empty()) {
    RevokeOwnToken(ctx, url, previous->token);
  }
  Print(ctx, "Logged in to " + url + " as " + SafeText(email) + ".\n");
  return {};
}

// --- logout, whoami --------------------------------------------------------------------------

core::Result<void> LogoutVerb(Context& ctx) {
  auto resolved = ResolveTarget(ctx.opt.target, ctx.io.env);
  if (!resolved && resolved.error().api_code == "not_logged_in") {
    Print(ctx, "Not logged in.\n");
    return {};
  }
  if (!resolved) return core::Fail(resolved.error());
  Session session(std::move(*resolved));
  const std::string& url = session.target().url;
  const std::string& token = session.target().token;

  bool token_was_valid = true;
  auto tokens = session.client().GetAllPages("/api/v1/tokens");
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
      auto deleted = session.client().CallOk("DELETE", "/api/v1/tokens/" + PathEscape(ids[0]));
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
  Print(ctx, token_was_valid
                 ? "Logged out of " + url + ".\n"
                 : "Logged out of " + url + " (the server no longer accepted the token).\n");
  return {};
}

core::Result<void> WhoamiVerb(Context& ctx) {
  GPUWERK_ASSIGN_OR_RETURN(Session session, Connect(ctx));
  GPUWERK_ASSIGN_OR_RETURN(json me, session.Ok("GET", "/api/v1/me"));
  if (ctx.opt.json) {
    PrintJson(*ctx.io.out, me);
    return {};
  }
  const json& team = Field(me, "team");
  std::string team_text = team.is_object() ? Str(team, "name") : CellText(team);
  if (std::string role = Str(me, "role"); !role.empty()) team_text += " (" + role + ")";
  const json& billing = Field(me, "billing");
  std::string billing_text = billing.is_object() ? Str(billing, "account") : CellText(billing);
  if (Field(billing, "payment_method_on_file").is_boolean()) {
    billing_text += Field(billing, "payment_method_on_file").get<bool>()
                        ? ", payment method on file"
                        : ", no payment method on file";
  }
  const std::vector<std::pair<std::string, std::string>> rows = {
      {"Email:", Str(me, "email")},
      {"Server:", session.target().url},
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

// --- keys ------------------------------------------------------------------------------------

core::Result<void> KeysLsVerb(Context& ctx) {
  GPUWERK_ASSIGN_OR_RETURN(Session session, Connect(ctx));
  GPUWERK_ASSIGN_OR_RETURN(json keys, session.All("/api/v1/ssh-keys"));
  if (ctx.opt.json) {
    PrintJson(*ctx.io.out, keys);
    return {};
  }
  if (keys.empty()) {
    Print(ctx, "No SSH keys yet. Add one with 'gpuwerk keys add NAME ~/.ssh/id_ed25519.pub'.\n");
    return {};
  }
  Table table({"NAME", "TYPE", "FINGERPRINT", "CREATED"});
  for (const auto& k : keys) {
    table.AddRow({CellText(Field(k, "name")), CellText(Field(k, "type")),
                  CellText(Field(k, "fingerprint")), CellText(Field(k, "created_at"))});
  }
  Print(ctx, table.Render());
  return {};
}

core::Result<void> KeysAddVerb(Context& ctx) {
  const std::string& file = ctx.opt.file;
  std::string text;
  if (file.empty() || file == "-") {
    if (ctx.io.in_is_terminal) {
      *ctx.io.err << "Paste the public key (the contents of your .pub file), then press Ctrl-D:\n";
      ctx.io.err->flush();
    }
    GPUWERK_ASSIGN_OR_RETURN(text, ReadAll(*ctx.io.in, kMaxPublicKeyFileBytes, "standard input"));
  } else {
    std::error_code ec;
    if (fs::is_directory(file, ec)) {
      return core::InvalidArgument("file_unreadable",
                                   "cannot read " + file + ": it is a directory");
    }
    std::ifstream in(file, std::ios::binary);
    if (!in) {
      return core::InvalidArgument("file_unreadable",
                                   "cannot read " + file + ": " + std::strerror(errno));
    }
    GPUWERK_ASSIGN_OR_RETURN(text, ReadAll(in, kMaxPublicKeyFileBytes, file));
  }

  // Refuse before sending: a private key must not leave this machine. Never echo it.
  if (auto refused = keys::FindPrivateKey(text)) {
    std::string message = refused->message;
    std::error_code ec;
    if (!file.empty() && file != "-" && !file.ends_with(".pub") && fs::exists(file + ".pub", ec)) {
      const std::string example = ", e.g. ~/.ssh/id_ed25519.pub";
      if (auto at = message.find(example); at != std::string::npos) {
        message.replace(at, example.size(), " (" + file + ".pub)");
      }
    }
    return core::InvalidArgument("private_key_pasted", std::move(message));
  }
  if (text.find('\0') != std::string::npos || !core::IsValidUtf8(text)) {
    return core::InvalidArgument("invalid_encoding",
                                 "the key file is not UTF-8 text (saved as UTF-16?): save it as "
                                 "UTF-8 or ASCII, or pass the .pub file ssh-keygen wrote");
  }
  if (Trim(text).empty()) {
    return core::InvalidArgument("invalid_public_key",
                                 "the public key is empty; pass the .pub file of your key");
  }

  GPUWERK_ASSIGN_OR_RETURN(Session session, Connect(ctx));
  const json body = {{"name", ctx.opt.name}, {"public_key", text}};
  GPUWERK_ASSIGN_OR_RETURN(json key, session.Ok("POST", "/api/v1/ssh-keys", &body));
  if (ctx.opt.json) {
    PrintJson(*ctx.io.out, key);
    return {};
  }
  Print(ctx, "Added key " + SafeText(Str(key, "name")) + " (" + SafeText(Str(key, "fingerprint")) +
                 ").\n");
  return {};
}

core::Result<void> KeysRmVerb(Context& ctx) {
  GPUWERK_ASSIGN_OR_RETURN(Session session, Connect(ctx));
  GPUWERK_ASSIGN_OR_RETURN(json keys, session.All("/api/v1/ssh-keys"));
  const std::string& name = ctx.opt.name;
  const json* found = nullptr;
  for (const auto& k : keys) {
    if (Str(k, "name") == name) found = &k;
  }
  for (const auto& k : keys) {  // an id works too
    if (found == nullptr && Str(k, "id") == name) found = &k;
  }
  if (found == nullptr) {
    return core::Fail(ErrorCode::kNotFound, "not_found",
                      "no key named " + name + "; see 'gpuwerk keys ls'");
  }
  GPUWERK_TRY(session.Ok("DELETE", "/api/v1/ssh-keys/" + PathEscape(Str(*found, "id"))));
  Print(ctx, "Removed key " + SafeText(Str(*found, "name")) + ".\n");
  return {};
}

// --- tokens ----------------------------------------------------------------------------------

core::Result<void> TokensLsVerb(Context& ctx) {
  GPUWERK_ASSIGN_OR_RETURN(Session session, Connect(ctx));
  GPUWERK_ASSIGN_OR_RETURN(json tokens, session.All("/api/v1/tokens"));
  if (ctx.opt.json) {
    PrintJson(*ctx.io.out, tokens);
    return {};
  }
  Table table({"ID", "NAME", "PREFIX", "CREATED", "LAST USED", ""});
  for (const auto& t : tokens) {
    table.AddRow({CellText(Field(t, "id")), CellText(Field(t, "name")),
                  CellText(Field(t, "prefix")), CellText(Field(t, "created_at")),
                  CellText(Field(t, "last_used_at")),
                  IsTokenItem(t, session.target().token) ? "(this CLI)" : ""});
  }
  Print(ctx, table.Render());
  return {};
}

core::Result<void> TokensCreateVerb(Context& ctx) {
  GPUWERK_ASSIGN_OR_RETURN(Session session, Connect(ctx));
  const json body = {{"name", ctx.opt.name}};
  GPUWERK_ASSIGN_OR_RETURN(json created, session.Ok("POST", "/api/v1/tokens", &body));
  if (ctx.opt.json) {
    PrintJson(*ctx.io.out, created);
    return {};
  }
  // The notes go to stderr and the secret alone to stdout, so `$(gpuwerk tokens create x)`
  // captures just the token.
  *ctx.io.err << "Created API token " << SafeText(Str(created, "name")) << " (id "
              << SafeText(Str(created, "id"))
              << "). This is the only time its secret is shown; store it now:\n";
  ctx.io.err->flush();
  Print(ctx, SafeText(Str(created, "token")) + "\n");
  return {};
}

core::Result<void> TokensRmVerb(Context& ctx) {
  GPUWERK_ASSIGN_OR_RETURN(Session session, Connect(ctx));
  GPUWERK_ASSIGN_OR_RETURN(json tokens, session.All("/api/v1/tokens"));
  const std::string& id = ctx.opt.id;
  const json* found = nullptr;
  for (const auto& t : tokens) {
    if (Str(t, "id") == id) found = &t;
  }
  if (found == nullptr) {
    return core::Fail(ErrorCode::kNotFound, "not_found",
                      "no API token with the id " + id + "; see 'gpuwerk tokens ls'");
  }
  const bool is_own = IsTokenItem(*found, session.target().token);
  GPUWERK_TRY(session.Ok("DELETE", "/api/v1/tokens/" + PathEscape(id)));
  Print(ctx, "Deleted API token " + SafeText(Str(*found, "name")) + ".\n");
  if (is_own) {
    Warn(ctx, "that was the token this command used; run 'gpuwerk login' to get a new one");
  }
  return {};
}

// --- instances, ssh, gpu types, admin hosts ---------------------------------------------------

/// A queue entry's position, "-" when it has none.
std::string PositionText(const json& e) {
  const json& pos = Field(e, "position");
  return pos.is_number_integer() ? std::to_string(pos.get<int64_t>()) : std::string("-");
}

/// The caller's live instance named (or with the id) ctx.opt.name.
core::Result<json> FindInstance(Context& ctx, Session& session) {
  GPUWERK_ASSIGN_OR_RETURN(json items, session.All("/api/v1/instances"));
  for (const auto& in : items) {
    if (Str(in, "name") == ctx.opt.name) return in;
  }
  for (const auto& in : items) {
    if (Str(in, "id") == ctx.opt.name) return in;
  }
  return core::Fail(ErrorCode::kNotFound, "not_found",
                    "no instance named " + ctx.opt.name + "; see 'gpuwerk instances ls'");
}

void PrintInstance(Context& ctx, const json& in) {
  std::string out = "name:        " + SafeText(Str(in, "name")) + "\n" +
                    "id:          " + SafeText(Str(in, "id")) + "\n" +
                    "status:      " + SafeText(Str(in, "status"));
  if (!Str(in, "status_reason").empty()) out += " (" + SafeText(Str(in, "status_reason")) + ")";
  out += "\nhostname:    " + SafeText(Str(in, "hostname")) + "\n";
  out += "gpu type:    " + SafeText(Str(in, "gpu_type"));
  if (!Str(in, "gpu").empty()) out += " (" + SafeText(Str(in, "gpu")) + ")";
  out += "\nssh key:     " + SafeText(Str(Field(in, "ssh_key"), "name")) + "\n";
  std::string hosts;
  for (const auto& h : Field(in, "hosts")) {
    if (h.is_string()) hosts += (hosts.empty() ? "" : ", ") + SafeText(h.get<std::string>());
  }
  out += "hosts:       " + hosts + "\n";
  out += "ssh:         " +
         (Str(in, "ssh_command").empty() ? std::string("(not ready yet)")
                                         : SafeText(Str(in, "ssh_command"))) +
         "\n";
  out += "session:     " + SafeText(Str(Field(in, "billing_session"), "id")) + " since " +
         SafeText(Str(Field(in, "billing_session"), "started_at")) + "\n";
  Print(ctx, out);
}

core::Result<void> InstancesLsVerb(Context& ctx) {
  GPUWERK_ASSIGN_OR_RETURN(Session session, Connect(ctx));
  GPUWERK_ASSIGN_OR_RETURN(json items, session.All("/api/v1/instances"));
  if (ctx.opt.json) {
    PrintJson(*ctx.io.out, items);
    return {};
  }
  if (items.empty()) {
    Print(ctx, "No instances. Create one with 'gpuwerk instances create NAME --key KEY'.\n");
    return {};
  }
  Table table({"NAME", "STATUS", "GPU TYPE", "HOSTNAME", "CREATED"});
  for (const auto& in : items) {
    table.AddRow({CellText(Field(in, "name")), CellText(Field(in, "status")),
                  CellText(Field(in, "gpu_type")), CellText(Field(in, "hostname")),
                  CellText(Field(in, "created_at"))});
  }
  Print(ctx, table.Render());
  return {};
}

/// The id of the caller's SSH key named (or with the id) ctx.opt.key.
core::Result<std::string> ResolveKeyId(Context& ctx, Session& session) {
  GPUWERK_ASSIGN_OR_RETURN(json keys, session.All("/api/v1/ssh-keys"));
  std::string key_id;
  for (const auto& k : keys) {
    if (Str(k, "name") == ctx.opt.key) key_id = Str(k, "id");
  }
  for (const auto& k : keys) {
    if (key_id.empty() && Str(k, "id") == ctx.opt.key) key_id = Str(k, "id");
  }
  if (key_id.empty()) {
    return core::Fail(ErrorCode::kNotFound, "not_found",
                      "no key named " + ctx.opt.key + "; see 'gpuwerk keys ls'");
  }
  return key_id;
}

core::Result<void> InstancesCreateVerb(Context& ctx) {
  GPUWERK_ASSIGN_OR_RETURN(Session session, Connect(ctx));
  GPUWERK_ASSIGN_OR_RETURN(std::string key_id, ResolveKeyId(ctx, session));
  const json body = {
      {"name", ctx.opt.name}, {"ssh_key_id", key_id}, {"gpu_type", ctx.opt.gpu_type}};
  auto created = session.Ok("POST", "/api/v1/instances", &body);
  if (!created && created.error().api_code == "no_capacity") {
    core::Error e = created.error();
    e.message = "no " + ctx.opt.gpu_type + " host is free right now; wait in the queue with " +
                "'gpuwerk queue join --gpu-type " + ctx.opt.gpu_type + " " + ctx.opt.name +
                " --key " + ctx.opt.key + "'";
    return core::Fail(std::move(e));
  }
  if (!created) return core::Fail(created.error());
  json in = std::move(*created);
  if (ctx.opt.json) {
    PrintJson(*ctx.io.out, in);
    return {};
  }
  if (Field(in, "queued") == true) {
    // The type is not online: the server put the request in its queue (docs/queue.md).
    Print(ctx, "No " + SafeText(Str(in, "gpu_type")) +
                   " capacity is online: joined its queue at position " + PositionText(in) +
                   " (entry " + SafeText(Str(in, "id")) + "). Instance " +
                   SafeText(Str(in, "name")) +
                   " is launched when capacity comes, and you get a mail.\n");
    return {};
  }
  Print(ctx, "Created instance " + SafeText(Str(in, "name")) + " (" +
                 SafeText(Str(in, "hostname")) + "), status " + SafeText(Str(in, "status")) +
                 ". Connect with 'gpuwerk ssh " + SafeText(Str(in, "name")) + "'.\n");
  return {};
}

core::Result<void> InstancesShowVerb(Context& ctx) {
  GPUWERK_ASSIGN_OR_RETURN(Session session, Connect(ctx));
  GPUWERK_ASSIGN_OR_RETURN(json found, FindInstance(ctx, session));
  GPUWERK_ASSIGN_OR_RETURN(json in,
                           session.Ok("GET", "/api/v1/instances/" + PathEscape(Str(found, "id"))));
  if (ctx.opt.json) {
    PrintJson(*ctx.io.out, in);
    return {};
  }
  PrintInstance(ctx, in);
  return {};
}

core::Result<void> InstancesRestartVerb(Context& ctx) {
  GPUWERK_ASSIGN_OR_RETURN(Session session, Connect(ctx));
  GPUWERK_ASSIGN_OR_RETURN(json found, FindInstance(ctx, session));
  const json body = json::object();
  GPUWERK_TRY(
      session.Ok("POST", "/api/v1/instances/" + PathEscape(Str(found, "id")) + "/restart", &body));
  Print(ctx, "Restarting " + SafeText(Str(found, "name")) + ".\n");
  return {};
}

core::Result<void> InstancesRmVerb(Context& ctx) {
  GPUWERK_ASSIGN_OR_RETURN(Session session, Connect(ctx));
  GPUWERK_ASSIGN_OR_RETURN(json found, FindInstance(ctx, session));
  GPUWERK_TRY(session.Ok("DELETE", "/api/v1/instances/" + PathEscape(Str(found, "id"))));
  Print(ctx, "Deleting " + SafeText(Str(found, "name")) + "; its billing session has ended.\n");
  return {};
}

/// Splits an ssh_command from the API ("ssh -p 40123 root@10.0.0.5") into words.
std::vector<std::string> SplitWords(std::string_view text) {
  std::vector<std::string> words;
  std::string word;
  for (char c : text) {
    if (std::isspace(static_cast<unsigned char>(c))) {
      if (!word.empty()) words.push_back(std::move(word));
      word.clear();
    } else {
      word += c;
    }
  }
  if (!word.empty()) words.push_back(std::move(word));
  return words;
}

core::Result<void> SshVerb(Context& ctx) {
  GPUWERK_ASSIGN_OR_RETURN(Session session, Connect(ctx));
  GPUWERK_ASSIGN_OR_RETURN(json found, FindInstance(ctx, session));
  GPUWERK_ASSIGN_OR_RETURN(json in,
                           session.Ok("GET", "/api/v1/instances/" + PathEscape(Str(found, "id"))));
  std::vector<std::string> words = SplitWords(Str(in, "ssh_command"));
  if (words.size() < 2 || words[0] != "ssh") {
    return core::Fail(ErrorCode::kFailedPrecondition, "not_ready",
                      "instance " + ctx.opt.name + " is " + Str(in, "status") +
                          "; it cannot take SSH connections yet");
  }
  // Known-hosts entries under the instance's hostname, not the address and port: ports are
  // reused by later instances, whose new host keys would otherwise look like an attack. The
  // first connection to an instance records its key (trust on first use, without a prompt that
  // scripts cannot answer); a changed key later is refused as usual.
  const std::string hostname = Str(in, "hostname");
  if (!hostname.empty()) {
    words.insert(words.begin() + 1,
                 {"-o", "HostKeyAlias=" + hostname, "-o", "StrictHostKeyChecking=accept-new"});
  }
  for (const auto& a : ctx.opt.args) words.push_back(a);
  std::vector<char*> argv;
  for (auto& w : words) argv.push_back(w.data());
  argv.push_back(nullptr);
  ctx.io.out->flush();
  ctx.io.err->flush();
  ::execvp("ssh", argv.data());
  return core::Fail(ErrorCode::kUnavailable, "ssh_not_found",
                    std::string("cannot run ssh: ") + std::strerror(errno));
}

/// `{"amount_minor": 65, "currency": "usd"}` as "0.65 usd" (2 minor digits); "" otherwise.
std::string MoneyText(const json& price) {
  const json& amount = Field(price, "amount_minor");
  if (!amount.is_number_integer()) return "";
  const int64_t a = amount.get<int64_t>();
  return std::to_string(a / 100) + "." + (a % 100 < 10 ? "0" : "") + std::to_string(a % 100) + " " +
         Str(price, "currency");
}

core::Result<void> GpuTypesVerb(Context& ctx) {
  GPUWERK_ASSIGN_OR_RETURN(Session session, Connect(ctx));
  GPUWERK_ASSIGN_OR_RETURN(json types, session.Ok("GET", "/api/v1/gpu-types"));
  const json& items = Field(types, "items");
  if (ctx.opt.json) {
    PrintJson(*ctx.io.out, items);
    return {};
  }
  Table table({"NAME", "HOSTS", "PRICE/H", "FREE", "ONLINE", "QUEUED", "DESCRIPTION"});
  for (const auto& t : items) {
    table.AddRow({CellText(Field(t, "name")), CellText(Field(t, "hosts_per_instance")),
                  SafeText(MoneyText(Field(t, "price"))), CellText(Field(t, "free_capacity")),
                  CellText(Field(t, "online")), CellText(Field(t, "queued")),
                  CellText(Field(t, "description"))});
  }
  Print(ctx, table.Render());
  return {};
}

core::Result<void> AdminHostsAddVerb(Context& ctx) {
  GPUWERK_ASSIGN_OR_RETURN(Session session, Connect(ctx));
  const json body = {
      {"name", ctx.opt.name}, {"gpu_type", ctx.opt.gpu_type}, {"gpu_required", !ctx.opt.no_gpu}};
  GPUWERK_ASSIGN_OR_RETURN(json host, session.Ok("POST", "/api/v1/admin/hosts", &body));
  if (ctx.opt.json) {
    PrintJson(*ctx.io.out, host);
    return {};
  }
  Print(ctx, "Registered host " + SafeText(Str(host, "name")) + " (" +
                 SafeText(Str(host, "gpu_type")) + "). Its agent token, shown only now:\n" +
                 SafeText(Str(host, "token")) + "\n");
  return {};
}

core::Result<void> AdminHostsDrainVerb(Context& ctx, bool drain) {
  GPUWERK_ASSIGN_OR_RETURN(Session session, Connect(ctx));
  GPUWERK_ASSIGN_OR_RETURN(json host,
                           session.Ok("POST", "/api/v1/admin/hosts/" + PathEscape(ctx.opt.name) +
                                                  (drain ? "/drain" : "/undrain")));
  if (ctx.opt.json) {
    PrintJson(*ctx.io.out, host);
    return {};
  }
  Print(ctx, drain ? "Drained " + SafeText(Str(host, "name")) +
                         ": it gets no new instances; those on it keep running.\n"
                   : "Undrained " + SafeText(Str(host, "name")) + ": it takes new instances.\n");
  return {};
}

core::Result<void> AdminHostsDrainOnlyVerb(Context& ctx) { return AdminHostsDrainVerb(ctx, true); }
core::Result<void> AdminHostsUndrainVerb(Context& ctx) { return AdminHostsDrainVerb(ctx, false); }

core::Result<void> AdminHostsLsVerb(Context& ctx) {
  GPUWERK_ASSIGN_OR_RETURN(Session session, Connect(ctx));
  GPUWERK_ASSIGN_OR_RETURN(json hosts, session.Ok("GET", "/api/v1/admin/hosts"));
  const json& items = Field(hosts, "items");
  if (ctx.opt.json) {
    PrintJson(*ctx.io.out, items);
    return {};
  }
  Table table({"NAME", "GPU TYPE", "GPU", "DRAINED", "LAST SEEN", "INSTANCE", "PAIR", "PROBLEM"});
  for (const auto& h : items) {
    // The engine being away, else why the host is degraded (C13), else nothing.
    std::string problem = Str(h, "engine_error");
    if (problem.empty()) problem = Str(h, "degraded_reason");
    // "node 0 with b (rail 192.168.100.1, hpr_…)"; "-" when unpaired.
    const json& pair = Field(h, "pair");
    std::string pair_text = "-";
    if (pair.is_object()) {
      pair_text = "node " + CellText(Field(pair, "node_index")) + " with " + Str(pair, "partner") +
                  " (rail " + Str(pair, "rail_address") + ", " + Str(pair, "id") + ")";
    }
    table.AddRow({CellText(Field(h, "name")), CellText(Field(h, "gpu_type")),
                  CellText(Field(h, "gpu_required")), CellText(Field(h, "drained")),
                  CellText(Field(h, "last_seen_at")), CellText(Field(h, "instance_id")),
                  SafeText(pair_text), SafeText(problem)});
  }
  Print(ctx, table.Render());
  return {};
}

core::Result<void> AdminHostsRmVerb(Context& ctx) {
  GPUWERK_ASSIGN_OR_RETURN(Session session, Connect(ctx));
  GPUWERK_TRY(session.Ok("DELETE", "/api/v1/admin/hosts/" + PathEscape(ctx.opt.name)));
  Print(ctx, "Removed host " + SafeText(ctx.opt.name) +
                 "; its agent token no longer works (a pair it was in is unlinked).\n");
  return {};
}

/// `NAME=RAIL_IP` as a pair node of POST /api/v1/admin/host-pairs. Errors: invalid_argument.
core::Result<json> PairNodeArg(std::string_view arg) {
  const size_t eq = arg.find('=');
  if (eq == std::string_view::npos || eq == 0 || eq + 1 == arg.size()) {
    return core::Fail(
        ErrorCode::kInvalidArgument, "invalid_argument",
        "expected HOST=RAIL_ADDRESS (e.g. spark-a=192.168.100.1), got '" + std::string(arg) + "'");
  }
  return json{{"name", std::string(arg.substr(0, eq))},
              {"rail_address", std::string(arg.substr(eq + 1))}};
}

core::Result<void> AdminHostsLinkVerb(Context& ctx) {
  if (ctx.opt.args.size() != 2) {
    return core::Fail(ErrorCode::kInvalidArgument, "invalid_argument",
                      "give two hosts: gpuwerk admin hosts link A=RAIL_IP B=RAIL_IP (A is node 0)");
  }
  GPUWERK_ASSIGN_OR_RETURN(json node0, PairNodeArg(ctx.opt.args[0]));
  GPUWERK_ASSIGN_OR_RETURN(json node1, PairNodeArg(ctx.opt.args[1]));
  GPUWERK_ASSIGN_OR_RETURN(Session session, Connect(ctx));
  const json body = {{"hosts", json::array({node0, node1})}};
  GPUWERK_ASSIGN_OR_RETURN(json pair, session.Ok("POST", "/api/v1/admin/host-pairs", &body));
  if (ctx.opt.json) {
    PrintJson(*ctx.io.out, pair);
    return {};
  }
  std::string members;
  for (const auto& m : Field(pair, "hosts")) {
    members += (members.empty() ? "" : " and ") + Str(m, "name") + " (node " +
               CellText(Field(m, "node_index")) + ", rail " + Str(m, "rail_address") + ")";
  }
  Print(ctx, "Linked " + SafeText(members) + " as pair " + SafeText(Str(pair, "id")) + " for " +
                 SafeText(Str(pair, "gpu_type")) + ".\n");
  return {};
}

core::Result<void> AdminHostsUnlinkVerb(Context& ctx) {
  GPUWERK_ASSIGN_OR_RETURN(Session session, Connect(ctx));
  GPUWERK_ASSIGN_OR_RETURN(json pairs, session.All("/api/v1/admin/host-pairs"));
  std::string id;
  for (const auto& p : pairs) {
    if (Str(p, "id") == ctx.opt.name) id = Str(p, "id");
    for (const auto& m : Field(p, "hosts")) {
      if (Str(m, "name") == ctx.opt.name) id = Str(p, "id");
    }
  }
  if (id.empty()) {
    return core::Fail(ErrorCode::kNotFound, "not_found",
                      "no pair " + ctx.opt.name +
                          " and no paired host by that name; see 'gpuwerk admin hosts ls'");
  }
  GPUWERK_TRY(session.Ok("DELETE", "/api/v1/admin/host-pairs/" + PathEscape(id)));
  Print(ctx, "Unlinked pair " + SafeText(id) + "; both hosts stay registered.\n");
  return {};
}

core::Result<void> AdminGpuTypesLsVerb(Context& ctx) {
  GPUWERK_ASSIGN_OR_RETURN(Session session, Connect(ctx));
  GPUWERK_ASSIGN_OR_RETURN(json items, session.All("/api/v1/admin/gpu-types"));
  if (ctx.opt.json) {
    PrintJson(*ctx.io.out, items);
    return {};
  }
  Table table({"NAME", "HOSTS/INSTANCE", "PRICE/H", "HOSTS", "PAIRS", "ONLINE", "FREE", "QUEUED",
               "DESCRIPTION"});
  for (const auto& t : items) {
    table.AddRow({CellText(Field(t, "name")), CellText(Field(t, "hosts_per_instance")),
                  SafeText(MoneyText(Field(t, "price"))), CellText(Field(t, "hosts")),
                  CellText(Field(t, "pairs")), CellText(Field(t, "online")),
                  CellText(Field(t, "free_capacity")), CellText(Field(t, "queued")),
                  CellText(Field(t, "description"))});
  }
  Print(ctx, table.Render());
  return {};
}

core::Result<void> AdminGpuTypesSetVerb(Context& ctx) {
  json body = json::object();
  if (ctx.opt.price_minor) body["price_minor_per_hour"] = *ctx.opt.price_minor;
  if (ctx.opt.hosts_per_instance) body["hosts_per_instance"] = *ctx.opt.hosts_per_instance;
  if (ctx.opt.description) body["description"] = *ctx.opt.description;
  if (ctx.opt.currency) body["currency"] = *ctx.opt.currency;
  GPUWERK_ASSIGN_OR_RETURN(Session session, Connect(ctx));
  GPUWERK_ASSIGN_OR_RETURN(
      json type, session.Ok("PUT", "/api/v1/admin/gpu-types/" + PathEscape(ctx.opt.name), &body));
  if (ctx.opt.json) {
    PrintJson(*ctx.io.out, type);
    return {};
  }
  Print(ctx, "GPU type " + SafeText(Str(type, "name")) + ": " +
                 CellText(Field(type, "hosts_per_instance")) + " host(s) per instance, " +
                 SafeText(MoneyText(Field(type, "price"))) +
                 " per hour (new billing sessions from now on).\n");
  return {};
}

// --- queue and usage ---------------------------------------------------------------------------

core::Result<void> QueueJoinVerb(Context& ctx) {
  GPUWERK_ASSIGN_OR_RETURN(Session session, Connect(ctx));
  GPUWERK_ASSIGN_OR_RETURN(std::string key_id, ResolveKeyId(ctx, session));
  const json body = {
      {"name", ctx.opt.name}, {"ssh_key_id", key_id}, {"gpu_type", ctx.opt.gpu_type}};
  GPUWERK_ASSIGN_OR_RETURN(json entry, session.Ok("POST", "/api/v1/queue-entries", &body));
  if (ctx.opt.json) {
    PrintJson(*ctx.io.out, entry);
    return {};
  }
  if (Str(entry, "status") == "launched") {
    Print(ctx, "A " + SafeText(Str(entry, "gpu_type")) + " host was free: instance " +
                   SafeText(Str(entry, "name")) + " is starting. Connect with 'gpuwerk ssh " +
                   SafeText(Str(entry, "name")) + "' once it is running.\n");
    return {};
  }
  Print(ctx, "Joined the " + SafeText(Str(entry, "gpu_type")) + " queue at position " +
                 PositionText(entry) + " (entry " + SafeText(Str(entry, "id")) + "). Instance " +
                 SafeText(Str(entry, "name")) +
                 " is launched when your turn comes, and you get a mail.\n");
  return {};
}

core::Result<void> QueueLsVerb(Context& ctx) {
  GPUWERK_ASSIGN_OR_RETURN(Session session, Connect(ctx));
  GPUWERK_ASSIGN_OR_RETURN(json list, session.Ok("GET", "/api/v1/queue-entries"));
  const json& items = Field(list, "items");
  if (ctx.opt.json) {
    PrintJson(*ctx.io.out, items);
    return {};
  }
  if (!items.is_array() || items.empty()) {
    Print(ctx,
          "You are in no queue. Join one with 'gpuwerk queue join --gpu-type TYPE NAME "
          "--key KEY'.\n");
    return {};
  }
  Table table({"ID", "GPU TYPE", "NAME", "POSITION", "ENTERED", "LAST FAILURE"});
  for (const auto& e : items) {
    table.AddRow({CellText(Field(e, "id")), CellText(Field(e, "gpu_type")),
                  CellText(Field(e, "name")), PositionText(e), CellText(Field(e, "entered_at")),
                  CellText(Field(e, "last_failure"))});
  }
  Print(ctx, table.Render());
  return {};
}

core::Result<void> QueueLeaveVerb(Context& ctx) {
  GPUWERK_ASSIGN_OR_RETURN(Session session, Connect(ctx));
  GPUWERK_ASSIGN_OR_RETURN(json list, session.Ok("GET", "/api/v1/queue-entries"));
  const json* found = nullptr;
  for (const auto& e : Field(list, "items")) {
    if (Str(e, "id") == ctx.opt.name) found = &e;
  }
  for (const auto& e : Field(list, "items")) {
    if (found == nullptr && Str(e, "name") == ctx.opt.name) found = &e;
  }
  if (found == nullptr) {
    return core::Fail(ErrorCode::kNotFound, "not_found",
                      "no open queue entry " + ctx.opt.name + "; see 'gpuwerk queue ls'");
  }
  GPUWERK_TRY(session.Ok("DELETE", "/api/v1/queue-entries/" + PathEscape(Str(*found, "id"))));
  Print(ctx, "Left the " + SafeText(Str(*found, "gpu_type")) + " queue (" +
                 SafeText(Str(*found, "name")) + ").\n");
  return {};
}

core::Result<void> UsageQueueVerb(Context& ctx) {
  GPUWERK_ASSIGN_OR_RETURN(Session session, Connect(ctx));
  GPUWERK_ASSIGN_OR_RETURN(json items, session.All("/api/v1/usage/queue"));
  if (ctx.opt.json) {
    PrintJson(*ctx.io.out, items);
    return {};
  }
  if (items.empty()) {
    Print(ctx, "No queue history.\n");
    return {};
  }
  Table table({"NAME", "GPU TYPE", "ENTERED", "LEFT", "WAIT", "OUTCOME", "INSTANCE"});
  for (const auto& h : items) {
    const json& wait = Field(h, "wait_seconds");
    std::string wait_text;
    if (wait.is_number_integer()) {
      const int64_t w = wait.get<int64_t>();
      wait_text = std::to_string(w / 3600) + "h" + (w / 60 % 60 < 10 ? "0" : "") +
                  std::to_string(w / 60 % 60) + "m" + (w % 60 < 10 ? "0" : "") +
                  std::to_string(w % 60) + "s";
    }
    table.AddRow({CellText(Field(h, "name")), CellText(Field(h, "gpu_type")),
                  CellText(Field(h, "entered_at")), CellText(Field(h, "left_at")),
                  SafeText(wait_text), CellText(Field(h, "outcome")),
                  CellText(Field(Field(h, "instance"), "id"))});
  }
  Print(ctx, table.Render());
  return {};
}

// --- relay sessions (R-10) ----------------------------------------------------------------------

/// "1h02m03s" for a number of seconds.
std::string DurationText(const json& seconds) {
  if (!seconds.is_number_integer()) return "";
  const int64_t s = seconds.get<int64_t>();
  return std::to_string(s / 3600) + "h" + (s / 60 % 60 < 10 ? "0" : "") +
         std::to_string(s / 60 % 60) + "m" + (s % 60 < 10 ? "0" : "") + std::to_string(s % 60) +
         "s";
}

/// "512 B", "3.4 KiB", "1.2 MiB", "7.0 GiB".
std::string ByteText(const json& bytes) {
  if (!bytes.is_number_integer()) return "";
  const double b = static_cast<double>(bytes.get<int64_t>());
  if (b < 1024) return std::to_string(bytes.get<int64_t>()) + " B";
  const char* units[] = {"KiB", "MiB", "GiB", "TiB"};
  double v = b / 1024;
  size_t u = 0;
  while (v >= 1024 && u + 1 < std::size(units)) {
    v /= 1024;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f %s", v, units[u]);
  return buf;
}

/// Prints one page of relay sessions (GET …/relay-sessions) as a table, or as JSON.
void PrintRelaySessions(Context& ctx, const json& page, bool with_person) {
  if (ctx.opt.json) {
    PrintJson(*ctx.io.out, page);
    return;
  }
  const json& items = Field(page, "items");
  const int64_t total = Field(page, "total").is_number_integer() ? page["total"].get<int64_t>() : 0;
  const int64_t pages = Field(page, "pages").is_number_integer() ? page["pages"].get<int64_t>() : 1;
  if (!items.is_array() || items.empty()) {
    Print(ctx, total == 0 ? "No relay sessions.\n"
                          : "No relay sessions on page " + std::to_string(ctx.opt.page) + " (" +
                                std::to_string(total) + " relay sessions on " +
                                std::to_string(pages) + (pages == 1 ? " page" : " pages") + ").\n");
    return;
  }
  std::vector<std::string> header = {"STARTED", "DURATION", "FROM", "KEY", "LOGIN"};
  if (with_person) header.insert(header.begin() + 1, {"PERSON", "INSTANCE", "RELAY"});
  for (const char* h : {"UP", "DOWN", "END"}) header.push_back(h);
  Table table(header);
  for (const auto& r : items) {
    std::vector<std::string> row = {
        CellText(Field(r, "started_at")), SafeText(DurationText(Field(r, "duration_seconds"))),
        CellText(Field(r, "source_address")), CellText(Field(r, "key_fingerprint")),
        CellText(Field(r, "login"))};
    if (with_person) {
      row.insert(row.begin() + 1, {Str(r, "email").empty() ? CellText(Field(r, "person_id"))
                                                           : CellText(Field(r, "email")),
                                   CellText(Field(r, "hostname")), CellText(Field(r, "relay"))});
    }
    row.push_back(SafeText(ByteText(Field(r, "bytes_from_client"))));
    row.push_back(SafeText(ByteText(Field(r, "bytes_to_client"))));
    row.push_back(Field(r, "open").is_boolean() && r["open"].get<bool>()
                      ? std::string("(open)")
                      : CellText(Field(r, "end_reason")));
    table.AddRow(row);
  }
  std::string out = table.Render();
  out += "Page " + std::to_string(ctx.opt.page) + " of " + std::to_string(pages) + ", " +
         std::to_string(total) + " relay session" + (total == 1 ? "" : "s") + ", newest first";
  if (ctx.opt.page < pages) out += "; next: --page " + std::to_string(ctx.opt.page + 1);
  Print(ctx, out + ".\n");
}

core::Result<void> CheckPage(const Context& ctx) {
  if (ctx.opt.page < 1) {
    return core::Fail(ErrorCode::kInvalidArgument, "invalid_page",
                      "--page must be a whole number from 1");
  }
  return {};
}

core::Result<void> InstancesRelaySessionsVerb(Context& ctx) {
  GPUWERK_TRY(CheckPage(ctx));
  GPUWERK_ASSIGN_OR_RETURN(Session session, Connect(ctx));
  // A live instance by name or id; else the argument as an id (a deleted instance's history).
  std::string id = ctx.opt.name;
  auto found = FindInstance(ctx, session);
  if (found) {
    id = Str(*found, "id");
  } else if (found.error().api_code != "not_found") {
    return core::Fail(found.error());
  }
  auto page = session.Ok("GET", "/api/v1/instances/" + PathEscape(id) +
                                    "/relay-sessions?page=" + std::to_string(ctx.opt.page));
  if (!page && page.error().api_code == "not_found") {
    return core::Fail(ErrorCode::kNotFound, "not_found",
                      "no instance named " + ctx.opt.name +
                          " (a deleted one is found by its id); see 'gpuwerk instances ls'");
  }
  if (!page) return core::Fail(page.error());
  PrintRelaySessions(ctx, *page, /*with_person=*/false);
  return {};
}

core::Result<void> AdminRelaySessionsVerb(Context& ctx) {
  GPUWERK_TRY(CheckPage(ctx));
  GPUWERK_ASSIGN_OR_RETURN(Session session, Connect(ctx));
  std::string path = "/api/v1/admin/relay-sessions?page=" + std::to_string(ctx.opt.page);
  if (!ctx.opt.instance.empty()) path += "&instance_id=" + PathEscape(ctx.opt.instance);
  if (!ctx.opt.person.empty()) path += "&person_id=" + PathEscape(ctx.opt.person);
  GPUWERK_ASSIGN_OR_RETURN(json page, session.Ok("GET", path));
  PrintRelaySessions(ctx, page, /*with_person=*/true);
  return {};
}

// --- events ----------------------------------------------------------------------------------

/// One line for an event of GET /api/v1/events (docs/api.md "Events"), prefixed with the time
/// it arrived.
std::string EventLine(const ServerSentEvent& event, const json& data) {
  auto instance_text = [](const json& in) {
    std::string s = SafeText(Str(in, "name")) + " " + SafeText(Str(in, "status"));
    if (!Str(in, "status_reason").empty()) s += " (" + SafeText(Str(in, "status_reason")) + ")";
    return s;
  };
  auto entry_text = [](const json& e) {
    std::string s = SafeText(Str(e, "name")) + " in the " + SafeText(Str(e, "gpu_type")) +
                    " queue: " + SafeText(Str(e, "status"));
    if (Str(e, "status") == "open") s += ", position " + PositionText(e);
    if (Str(e, "status") == "launched") s += " as instance " + SafeText(Str(e, "instance_id"));
    if (!Str(e, "last_failure").empty()) {
      s += " (last failure: " + SafeText(Str(e, "last_failure")) + ")";
    }
    return s;
  };
  std::string line = core::FormatRfc3339(std::time(nullptr)) + "  ";
  if (event.type == "snapshot") {
    const json& instances = Field(data, "instances");
    const json& entries = Field(data, "queue_entries");
    const size_t n = instances.is_array() ? instances.size() : 0;
    const size_t m = entries.is_array() ? entries.size() : 0;
    line += "now: " + std::to_string(n) + (n == 1 ? " instance" : " instances");
    for (size_t i = 0; i < n; ++i) line += (i == 0 ? ": " : ", ") + instance_text(instances[i]);
    line += "; " + std::to_string(m) + (m == 1 ? " queue entry" : " queue entries");
    for (size_t i = 0; i < m; ++i) line += (i == 0 ? ": " : ", ") + entry_text(entries[i]);
  } else if (event.type == "instance") {
    line += "instance " + instance_text(data);
  } else if (event.type == "queue_entry") {
    line += "queue entry " + entry_text(data);
  } else {
    line += SafeText(event.type) + " " + SafeText(event.data);
  }
  return line;
}

core::Result<void> EventsVerb(Context& ctx) {
  if (ctx.opt.count < 0) {
    return core::Fail(ErrorCode::kInvalidArgument, "invalid_count",
                      "--count must be a whole number from 1 (or 0 for no limit)");
  }
  GPUWERK_ASSIGN_OR_RETURN(Session session, Connect(ctx));
  int64_t printed = 0;
  int64_t retry_ms = 3000;
  bool connected = false;  // once the server has streamed to us, failures are retried
  while (true) {
    SseParser parser;
    auto sink = [&](std::string_view bytes) {
      for (const auto& event : parser.Feed(bytes)) {
        json data = json::parse(event.data, nullptr, /*allow_exceptions=*/false);
        if (data.is_discarded()) data = event.data;
        if (ctx.opt.json) {
          Print(ctx, json{{"event", event.type}, {"id", event.id}, {"data", data}}.dump(
                         -1, ' ', false, json::error_handler_t::replace) +
                         "\n");
        } else {
          Print(ctx, EventLine(event, data) + "\n");
        }
        if (ctx.opt.count > 0 && ++printed >= ctx.opt.count) return false;
      }
      return true;
    };
    // The server sends a heartbeat every 15 s: 45 s of silence means the connection is gone.
    auto end = session.client().Stream("/api/v1/events", {"Accept: text/event-stream"}, sink,
                                       std::chrono::seconds(45));
    if (parser.retry_ms() >= 0) retry_ms = std::min<int64_t>(parser.retry_ms(), 60'000);
    if (end && end->stopped) return {};  // --count reached
    if (end && !end->response.ok())
      return core::Fail(session.Explain(ErrorFromResponse(end->response)));
    if (end || end.error().api_code == "stream_interrupted") connected = true;
    if (!connected) return core::Fail(session.Explain(std::move(end).error()));
    Warn(ctx,
         (end ? std::string("the server ended the event stream") : std::move(end).error().message) +
             "; reconnecting in " + std::to_string((retry_ms + 999) / 1000) + " s");
    std::this_thread::sleep_for(std::chrono::milliseconds(retry_ms));
  }
}

}  // namespace

ClientIo ClientIo::Process() {
  return ClientIo{.env = ProcessEnvironment(),
                  .in = &std::cin,
                  .out = &std::cout,
                  .err = &std::cerr,
                  .in_is_terminal = ::isatty(STDIN_FILENO) == 1};
}

void AddClientCommands(CLI::App& app, int& exit_code) {
  AddClientCommands(app, exit_code, ClientIo::Process());
}

void AddClientCommands(CLI::App& app, int& exit_code, ClientIo io) {
  auto ctx = std::make_shared<Context>();
  ctx->io = std::move(io);
  ctx->exit_code = &exit_code;
  Options& o = ctx->opt;

  auto runs = [ctx](Verb verb) { return [ctx, verb] { Run(*ctx, verb); }; };
  auto target_options = [&o](CLI::App* cmd) {
    cmd->add_option("--url", o.target.url,
                    "gpuwerk server URL (overrides GPUWERK_URL and the login file)");
    cmd->add_option("--token", o.target.token,
                    "API token (overrides GPUWERK_TOKEN and the login file)");
  };
  auto json_flag = [&o](CLI::App* cmd) {
    cmd->add_flag("--json", o.json, "print JSON for scripts instead of a table");
  };

  CLI::App* login = app.add_subcommand(
      "login", "Sign in to a gpuwerk server and save an API token for the other commands");
  login->add_option("--url", o.target.url,
                    "server URL (default: GPUWERK_URL, the last login's, or " +
                        std::string(kDefaultServerUrl) + ")");
  login->add_option("--email", o.email, "your account's email address (asked if not given)");
  login->add_flag("--password-stdin", o.password_stdin, "read the password from standard input");
  login->add_option("--token", o.target.token,
                    "save this existing API token instead of signing in with a password");
  login->callback(runs(&LoginVerb));

  CLI::App* logout =
      app.add_subcommand("logout", "Delete this CLI's API token and forget the saved login");
  target_options(logout);
  logout->callback(runs(&LogoutVerb));

  CLI::App* whoami = app.add_subcommand("whoami", "Show who the saved login belongs to");
  target_options(whoami);
  json_flag(whoami);
  whoami->callback(runs(&WhoamiVerb));

  CLI::App* keys = app.add_subcommand("keys", "Manage your SSH public keys");
  keys->require_subcommand(1);
  CLI::App* keys_ls = keys->add_subcommand("ls", "List your SSH keys");
  keys_ls->alias("list");
  target_options(keys_ls);
  json_flag(keys_ls);
  keys_ls->callback(runs(&KeysLsVerb));
  CLI::App* keys_add = keys->add_subcommand("add", "Add an SSH public key");
  keys_add->add_option("NAME", o.name, "a name for the key, unique among your keys")->required();
  keys_add->add_option("FILE", o.file,
                       "the public key file (.pub); '-' or nothing reads standard input");
  target_options(keys_add);
  json_flag(keys_add);
  keys_add->callback(runs(&KeysAddVerb));
  CLI::App* keys_rm = keys->add_subcommand("rm", "Remove an SSH key");
  keys_rm->alias("remove");
  keys_rm->add_option("NAME", o.name, "the key's name")->required();
  target_options(keys_rm);
  keys_rm->callback(runs(&KeysRmVerb));

  CLI::App* tokens = app.add_subcommand("tokens", "Manage your personal API tokens");
  tokens->require_subcommand(1);
  CLI::App* tokens_ls = tokens->add_subcommand("ls", "List your API tokens");
  tokens_ls->alias("list");
  target_options(tokens_ls);
  json_flag(tokens_ls);
  tokens_ls->callback(runs(&TokensLsVerb));
  CLI::App* tokens_create =
      tokens->add_subcommand("create", "Create an API token (its secret is shown once)");
  tokens_create->add_option("NAME", o.name, "a name for the token")->required();
  target_options(tokens_create);
  json_flag(tokens_create);
  tokens_create->callback(runs(&TokensCreateVerb));
  CLI::App* tokens_rm = tokens->add_subcommand("rm", "Delete an API token");
  tokens_rm->alias("remove");
  tokens_rm->add_option("ID", o.id, "the token's id (see 'gpuwerk tokens ls')")->required();
  target_options(tokens_rm);
  tokens_rm->callback(runs(&TokensRmVerb));

  CLI::App* instances = app.add_subcommand("instances", "Manage your instances");
  instances->require_subcommand(1);
  CLI::App* ins_ls = instances->add_subcommand("ls", "List your instances");
  ins_ls->alias("list");
  target_options(ins_ls);
  json_flag(ins_ls);
  ins_ls->callback(runs(&InstancesLsVerb));
  CLI::App* ins_create = instances->add_subcommand("create", "Create an instance");
  ins_create->add_option("NAME", o.name, "a DNS label, unique among your instances")->required();
  ins_create->add_option("--key", o.key, "the name of your SSH key to put in it")->required();
  ins_create->add_option("--gpu-type", o.gpu_type, "the GPU type (see 'gpuwerk gpu-types')");
  target_options(ins_create);
  json_flag(ins_create);
  ins_create->callback(runs(&InstancesCreateVerb));
  CLI::App* ins_show = instances->add_subcommand("show", "Show one instance");
  ins_show->add_option("NAME", o.name, "the instance's name")->required();
  target_options(ins_show);
  json_flag(ins_show);
  ins_show->callback(runs(&InstancesShowVerb));
  CLI::App* ins_restart = instances->add_subcommand("restart", "Restart an instance's container");
  ins_restart->add_option("NAME", o.name, "the instance's name")->required();
  target_options(ins_restart);
  ins_restart->callback(runs(&InstancesRestartVerb));
  CLI::App* ins_rm = instances->add_subcommand("rm", "Delete an instance");
  ins_rm->alias("remove");
  ins_rm->alias("delete");
  ins_rm->add_option("NAME", o.name, "the instance's name")->required();
  target_options(ins_rm);
  ins_rm->callback(runs(&InstancesRmVerb));
  CLI::App* ins_relay = instances->add_subcommand(
      "relay-sessions", "List an instance's relay sessions (SSH connections), newest first");
  ins_relay->add_option("NAME", o.name, "the instance's name, or the id of a deleted one")
      ->required();
  ins_relay->add_option("--page", o.page, "the page, 15 relay sessions each (default 1)");
  target_options(ins_relay);
  json_flag(ins_relay);
  ins_relay->callback(runs(&InstancesRelaySessionsVerb));

  CLI::App* ssh = app.add_subcommand("ssh", "Log in to an instance over SSH (runs the system ssh)");
  ssh->add_option("NAME", o.name, "the instance's name")->required();
  ssh->add_option("ARGS", o.args, "arguments passed on to ssh (after --)");
  target_options(ssh);
  ssh->callback(runs(&SshVerb));

  CLI::App* gpu_types = app.add_subcommand("gpu-types", "List GPU types, prices and capacity");
  target_options(gpu_types);
  json_flag(gpu_types);
  gpu_types->callback(runs(&GpuTypesVerb));

  CLI::App* queue = app.add_subcommand("queue", "Wait in a GPU type's queue for a free host");
  queue->require_subcommand(1);
  CLI::App* queue_join = queue->add_subcommand(
      "join", "Join a GPU type's queue; the instance is launched when your turn comes");
  queue_join->add_option("NAME", o.name, "the instance's name (a DNS label)")->required();
  queue_join->add_option("--key", o.key, "the name of your SSH key to put in it")->required();
  queue_join->add_option("--gpu-type", o.gpu_type, "the GPU type (see 'gpuwerk gpu-types')");
  target_options(queue_join);
  json_flag(queue_join);
  queue_join->callback(runs(&QueueJoinVerb));
  CLI::App* queue_ls = queue->add_subcommand("ls", "List your queue entries and positions");
  queue_ls->alias("list");
  target_options(queue_ls);
  json_flag(queue_ls);
  queue_ls->callback(runs(&QueueLsVerb));
  CLI::App* queue_leave = queue->add_subcommand("leave", "Leave a queue (free, immediate)");
  queue_leave->add_option("ENTRY", o.name, "the entry's id or name")->required();
  target_options(queue_leave);
  queue_leave->callback(runs(&QueueLeaveVerb));

  CLI::App* usage = app.add_subcommand("usage", "Your usage history");
  usage->require_subcommand(1);
  CLI::App* usage_queue = usage->add_subcommand("queue", "Your queue history: waits and outcomes");
  target_options(usage_queue);
  json_flag(usage_queue);
  usage_queue->callback(runs(&UsageQueueVerb));

  CLI::App* events = app.add_subcommand(
      "events",
      "Print your instance and queue changes as they happen, one line each (Ctrl-C ends)");
  events->add_option("--count", o.count, "exit after this many events (the first is a snapshot)");
  target_options(events);
  json_flag(events);
  events->callback(runs(&EventsVerb));

  CLI::App* admin = app.add_subcommand("admin", "Operator commands");
  admin->require_subcommand(1);
  CLI::App* admin_relay = admin->add_subcommand(
      "relay-sessions", "List every relay session (SSH connection), newest first");
  admin_relay->add_option("--instance", o.instance, "only this instance's (an instance id)");
  admin_relay->add_option("--person", o.person, "only this person's (a person id)");
  admin_relay->add_option("--page", o.page, "the page, 15 relay sessions each (default 1)");
  target_options(admin_relay);
  json_flag(admin_relay);
  admin_relay->callback(runs(&AdminRelaySessionsVerb));
  CLI::App* admin_hosts = admin->add_subcommand("hosts", "Manage GPU hosts");
  admin_hosts->require_subcommand(1);
  CLI::App* hosts_add =
      admin_hosts->add_subcommand("add", "Register a host (its agent token is shown once)");
  hosts_add->add_option("NAME", o.name, "the host's name (a DNS label)")->required();
  hosts_add->add_option("--gpu-type", o.gpu_type, "the GPU type it serves")->required();
  hosts_add->add_flag("--no-gpu", o.no_gpu, "the host has no GPU (instances say so)");
  target_options(hosts_add);
  json_flag(hosts_add);
  hosts_add->callback(runs(&AdminHostsAddVerb));
  CLI::App* hosts_ls = admin_hosts->add_subcommand("ls", "List hosts");
  hosts_ls->alias("list");
  target_options(hosts_ls);
  json_flag(hosts_ls);
  hosts_ls->callback(runs(&AdminHostsLsVerb));
  for (const bool drain : {true, false}) {
    CLI::App* cmd = admin_hosts->add_subcommand(
        drain ? "drain" : "undrain",
        drain ? "Give a host no new instances (those on it keep running)"
              : "Let a drained or degraded host take new instances again");
    cmd->add_option("NAME", o.name, "the host's name")->required();
    target_options(cmd);
    json_flag(cmd);
    cmd->callback(runs(drain ? &AdminHostsDrainOnlyVerb : &AdminHostsUndrainVerb));
  }
  CLI::App* hosts_rm = admin_hosts->add_subcommand(
      "rm", "Remove a host (refused while an instance is placed on it; unlinks its pair)");
  hosts_rm->alias("remove");
  hosts_rm->add_option("NAME", o.name, "the host's name")->required();
  target_options(hosts_rm);
  hosts_rm->callback(runs(&AdminHostsRmVerb));
  CLI::App* hosts_link = admin_hosts->add_subcommand(
      "link", "Link two hosts of a 2-host GPU type into a pair: link A=RAIL_IP B=RAIL_IP");
  hosts_link->add_option("HOSTS", o.args, "two HOST=RAIL_ADDRESS; the first is node 0")
      ->required()
      ->expected(2);
  target_options(hosts_link);
  json_flag(hosts_link);
  hosts_link->callback(runs(&AdminHostsLinkVerb));
  CLI::App* hosts_unlink = admin_hosts->add_subcommand(
      "unlink", "Unlink a pair (refused while an instance is placed on it)");
  hosts_unlink->add_option("PAIR", o.name, "the pair's id, or the name of either host")->required();
  target_options(hosts_unlink);
  hosts_unlink->callback(runs(&AdminHostsUnlinkVerb));

  CLI::App* admin_types = admin->add_subcommand("gpu-types", "Manage GPU types (R-7)");
  admin_types->require_subcommand(1);
  CLI::App* types_ls = admin_types->add_subcommand("ls", "List GPU types with hosts and capacity");
  types_ls->alias("list");
  target_options(types_ls);
  json_flag(types_ls);
  types_ls->callback(runs(&AdminGpuTypesLsVerb));
  CLI::App* types_set = admin_types->add_subcommand(
      "set", "Create a GPU type or change it (only the options given change)");
  types_set->add_option("NAME", o.name, "the type's name (a DNS label)")->required();
  types_set->add_option("--price-minor", o.price_minor,
                        "price per hour in minor units (cents); new billing sessions only");
  types_set->add_option("--hosts-per-instance", o.hosts_per_instance,
                        "1, or 2 for a linked pair (not while the type has hosts, instances or "
                        "queue entries)");
  types_set->add_option("--description", o.description, "one line shown to people");
  types_set->add_option("--currency", o.currency, "3 lowercase letters (default usd)");
  target_options(types_set);
  json_flag(types_set);
  types_set->callback(runs(&AdminGpuTypesSetVerb));
}

}  // namespace gpuwerk::cli

#pragma once
// What the verb files share (not for use outside src/cli): the context a verb runs in, how a
// verb is registered and run, reading answers, and the server connection with the CLI's wording.

#include <CLI/CLI.hpp>
#include <functional>
#include <initializer_list>
#include <istream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "cli/commands.h"
#include "cli/login_file.h"
#include "core/error.h"
#include "protocol/api_client.h"
#include "protocol/sse_parser.h"

namespace gpuwerk::cli {

// The one API client and the event stream parser live in src/protocol (shared with the agent and
// the relay); the verbs use them by these names.
using protocol::ApiClient;
using protocol::ApiResponse;
using protocol::ErrorFromResponse;
using protocol::PathEscape;
using protocol::ServerSentEvent;
using protocol::SseParser;

}  // namespace gpuwerk::cli

namespace gpuwerk::cli::internal {

/// The options every verb has, whatever its group: where the server is, and `--json`. Only one
/// verb runs per invocation, so all verbs share one copy.
struct CommonOptions {
  TargetFlags target;  ///< --url, --token
  bool json = false;   ///< --json: results and errors as JSON
};

/// What a verb's callback works with.
struct VerbContext {
  ClientIo io;
  CommonOptions common;
  int* exit_code = nullptr;
};

/// A verb: does its work, prints its result to `ctx.io.out`, returns its failure.
using VerbFn = std::function<core::Result<void>(VerbContext&)>;

/// Registers verbs on CLI11 subcommands; owns (through a shared_ptr the callbacks hold) the
/// context they run in, so it may be destroyed once registration is done.
class VerbRegistry {
 public:
  VerbRegistry(ClientIo io, int& exit_code);

  /// Adds the command group `name` under `parent`: a verb of it must follow (`keys ls`).
  static CLI::App* AddGroup(CLI::App& parent, const std::string& name, const std::string& help);

  /// Adds the verb `name` under `parent` with `--url`, `--token` and `--json`, running `verb`.
  /// The caller adds the verb's own options to the answer.
  CLI::App* AddVerb(CLI::App& parent, const std::string& name, const std::string& help,
                    VerbFn verb) const;

  /// As above, for a verb whose options are in `*options` (the group's options struct, shared by
  /// its verbs: one verb runs per invocation).
  template <class Options>
  CLI::App* AddVerb(CLI::App& parent, const std::string& name, const std::string& help,
                    std::shared_ptr<Options> options,
                    core::Result<void> (*verb)(VerbContext&, const Options&)) const {
    return AddVerb(parent, name, help,
                   [options, verb](VerbContext& ctx) { return verb(ctx, *options); });
  }

  /// Adds `--url` and `--token` (overriding GPUWERK_URL / GPUWERK_TOKEN and the login file).
  void AddTargetOptions(CLI::App* cmd) const;
  /// Makes `cmd` run `verb` (see RunVerb); adds `--json` when `cmd` has none yet, so that every
  /// verb answers JSON, its errors included, when asked.
  void OnRun(CLI::App* cmd, VerbFn verb) const;
  /// OnRun for a group that is also a verb on its own (`billing` shows, `billing add-card`
  /// acts): `verb` runs only when none of `group`'s subcommands was given.
  void OnRunAlone(CLI::App* group, VerbFn verb) const;

  /// The storage of the common options, for verbs that declare them with their own help text.
  CommonOptions& common() const { return ctx_->common; }

 private:
  std::shared_ptr<VerbContext> ctx_;
};

/// Runs `verb` and turns its outcome into `*ctx.exit_code`: 0, or 1 after one line on stderr:
/// `gpuwerk: <message> (<code>)`, or under --json the problem object (ProblemJson). An exception
/// is an "internal" failure.
void RunVerb(VerbContext& ctx, const VerbFn& verb);

/// A failure as the CLI prints it under --json, shaped as RFC 9457 problem JSON:
/// `{"type":"about:blank","title":<ErrorCodeName>,"code":<api_code>,"detail":<message>}` plus the
/// error's `details` members (e.g. the `field` of a server's invalid_field).
nlohmann::json ProblemJson(const core::Error& error);

// --- reading answers ---------------------------------------------------------------------------

/// `obj[key]` when `obj` is an object that has it, else null (never throws).
const nlohmann::json& Field(const nlohmann::json& obj, const char* key);

/// `obj[key]` as a string, "" when absent or not a string.
std::string Str(const nlohmann::json& obj, const char* key);

/// Writes `text` to stdout and flushes.
void Print(VerbContext& ctx, std::string_view text);

/// Under --json: prints `value` (RenderJson) and returns true; else returns false.
bool PrintJsonIfAsked(VerbContext& ctx, const nlohmann::json& value);

/// One line `gpuwerk: warning: <text>` on stderr.
void Warn(VerbContext& ctx, std::string_view text);

/// Reads all of `in`. Errors: "read_failed"; kPayloadTooLarge "input_too_large" above `limit`
/// bytes (`what` names the input in the message).
core::Result<std::string> ReadAll(std::istream& in, size_t limit, std::string_view what);

/// A queue entry's position, "-" when it has none.
std::string PositionText(const nlohmann::json& entry);

/// `{"amount_minor": 65, "currency": "usd"}` as "0.65 usd" (2 minor digits); "" otherwise.
std::string MoneyText(const nlohmann::json& price);

/// A number of seconds as "1h02m03s"; "" when not an integer.
std::string DurationText(const nlohmann::json& seconds);

/// The item of the array `items` whose `first_key` is `value`, else the one whose `second_key`
/// is (when given), e.g. a key by name, else by id; nullptr when none. The pointer is into `items`.
const nlohmann::json* FindItem(const nlohmann::json& items, std::string_view value,
                               const char* first_key, const char* second_key = nullptr);

/// Whether the API token `token` is the one listed as `item` (the list shows only a prefix).
bool IsTokenItem(const nlohmann::json& item, std::string_view token);

// --- talking to the server ---------------------------------------------------------------------

/// A resolved target and an API client for it, with the CLI's wording for a refused token.
class ServerConnection {
 public:
  explicit ServerConnection(Target target);

  const Target& target() const { return target_; }
  const ApiClient& client() const { return client_; }

  /// ApiClient::CallOk, with Explain applied to a failure.
  core::Result<nlohmann::json> Ok(std::string_view method, std::string_view path,
                                  const nlohmann::json* body = nullptr) const;
  /// ApiClient::GetAllPages, with Explain applied to a failure.
  core::Result<nlohmann::json> All(std::string_view path) const;
  /// Rewords the server's generic "unauthenticated" for someone at a terminal.
  core::Error Explain(core::Error error) const;

 private:
  ApiClient client_;
  Target target_;
};

/// Resolves the target (ResolveTarget: flags, environment, login file) and connects to it.
/// Errors: "not_logged_in".
core::Result<ServerConnection> Connect(const VerbContext& ctx);

/// The caller's live instance named (or with the id) `name`. Errors: the server's, "not_found".
core::Result<nlohmann::json> FindInstance(const ServerConnection& server, const std::string& name);

/// The id of the caller's SSH key named (or with the id) `key`. Errors: the server's, "not_found".
core::Result<std::string> ResolveKeyId(const ServerConnection& server, const std::string& key);

/// `error` with the API's field names in its message replaced by the flags the person typed
/// (`{{"exp_month", "--exp"}}`): "exp_month must be 1 to 12" → "--exp must be 1 to 12". Each
/// name is replaced where it stands as a whole word (letters, digits and '_' around it end it).
core::Error InFlagWords(core::Error error,
                        std::initializer_list<std::pair<std::string_view, std::string_view>> flags);

/// Asks `question` (ending "(y/N) ") on a terminal and goes on only on a yes; without a terminal
/// goes on only when `yes` (--yes) was given. Errors: confirmation_required (no terminal, no
/// --yes: `refusal` says what was not done), cancelled (any answer but yes: `cancelled`).
core::Result<void> Confirm(VerbContext& ctx, bool yes, const std::string& question,
                           const std::string& refusal, const std::string& cancelled);

/// The check for a positional argument that names something the CLI puts into an API path (a
/// host, an email, an id): refuses an empty or blank value and one with control characters as a
/// usage error (`NAME: must not be empty …`), at parse time, before any request. Without it
/// `admin hosts drain ''` asked for `/api/v1/admin/hosts//drain`.
CLI::Validator NamedArgument();

}  // namespace gpuwerk::cli::internal

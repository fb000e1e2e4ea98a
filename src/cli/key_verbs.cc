// keys ls|add|claim|rm: the person's SSH public keys. `keys add` refuses a private key before
// anything is sent (private keys never leave the person's machine).
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <system_error>
#include <vector>

#include "cli/internal/key_file.h"
#include "cli/internal/verb_groups.h"
#include "cli/output.h"

namespace gpuwerk::cli::internal {
namespace {

using core::ErrorCode;
using nlohmann::json;

/// The options of the keys verbs.
struct KeyOptions {
  std::string name;  ///< add, rm: the key's name (rm: or id)
  std::string file;  ///< add: the .pub file, "" or "-" for standard input
};

core::Result<void> KeysLsVerb(VerbContext& ctx) {
  GPUWERK_ASSIGN_OR_RETURN(ServerConnection server, Connect(ctx));
  GPUWERK_ASSIGN_OR_RETURN(json keys, server.All("/api/v1/ssh-keys"));
  if (PrintJsonIfAsked(ctx, keys)) return {};
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

/// Whether `name` (the NAME of `keys add`) looks like the path of an existing file: it holds a
/// '/' (no key name does) or ends in ".pub", and a regular file is there. Then NAME was forgotten
/// (`gpuwerk keys add ~/.ssh/id_ed25519.pub`), and the file would be taken as the key's name.
bool LooksLikeAKeyFile(const std::string& name) {
  if (name.find('/') == std::string::npos && !name.ends_with(".pub")) return false;
  std::error_code ec;
  return std::filesystem::is_regular_file(name, ec);
}

core::Result<void> KeysAddVerb(VerbContext& ctx, const KeyOptions& opt) {
  // Before prompting for a key on standard input: a forgotten NAME is said at once.
  if (LooksLikeAKeyFile(opt.name)) {
    return core::InvalidArgument(
        "invalid_name", "'" + SafeText(opt.name) +
                            "' is a file, not a key name: give the key a name first, "
                            "`gpuwerk keys add NAME FILE`, e.g. `gpuwerk keys add laptop " +
                            SafeText(opt.name) + "`");
  }
  GPUWERK_ASSIGN_OR_RETURN(std::string text, ReadPublicKeyFile(ctx, opt.file));
  GPUWERK_ASSIGN_OR_RETURN(ServerConnection server, Connect(ctx));
  const json body = {{"name", opt.name}, {"public_key", text}};
  GPUWERK_ASSIGN_OR_RETURN(json key, server.Ok("POST", "/api/v1/ssh-keys", &body));
  if (PrintJsonIfAsked(ctx, key)) return {};
  Print(ctx, "Added key " + SafeText(Str(key, "name")) + " (" + SafeText(Str(key, "fingerprint")) +
                 ").\n");
  return {};
}

/// Runs `ssh-keygen -Y sign -n <namespace> -f <key_file> <message file>` on `message` and returns
/// the armored signature. ssh-keygen finds the private key beside the .pub file or in the agent,
/// and asks for a passphrase on the terminal itself; the private key never reaches gpuwerk.
core::Result<std::string> SignWithSshKeygen(const std::string& key_file,
                                            const std::string& sig_namespace,
                                            const std::string& message) {
  std::error_code ec;
  std::string pattern =
      (std::filesystem::temp_directory_path(ec) / "gpuwerk-claim-XXXXXX").string();
  if (::mkdtemp(pattern.data()) == nullptr) {
    return core::Fail(core::ErrorCode::kUnavailable, "sign_failed",
                      std::string("cannot make a temporary directory: ") + std::strerror(errno));
  }
  const std::filesystem::path dir = pattern;
  struct Cleanup {
    std::filesystem::path dir;
    ~Cleanup() {
      std::error_code ignored;
      std::filesystem::remove_all(dir, ignored);
    }
  } cleanup{dir};
  const std::filesystem::path challenge = dir / "challenge";
  {
    std::ofstream out(challenge, std::ios::binary);
    out << message;
  }
  std::vector<std::string> argv = {
      "ssh-keygen", "-q", "-Y", "sign", "-n", sig_namespace, "-f", key_file, challenge.string()};
  std::vector<char*> args;
  for (std::string& a : argv) args.push_back(a.data());
  args.push_back(nullptr);
  pid_t pid = 0;
  const int rc = ::posix_spawnp(&pid, "ssh-keygen", nullptr, nullptr, args.data(), environ);
  if (rc != 0) {
    return core::Fail(
        core::ErrorCode::kUnavailable, "sign_failed",
        std::string("cannot run ssh-keygen (install openssh-client): ") + std::strerror(rc));
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  std::ifstream in(challenge.string() + ".sig", std::ios::binary);
  std::stringstream signature;
  signature << in.rdbuf();
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || signature.str().empty()) {
    return core::Fail(core::ErrorCode::kInvalidArgument, "sign_failed",
                      "ssh-keygen could not sign with " + SafeText(key_file) +
                          ": its private key must be beside it (the same name without .pub) or "
                          "in your ssh-agent");
  }
  return signature.str();
}

core::Result<void> KeysClaimVerb(VerbContext& ctx, const KeyOptions& opt) {
  if (opt.file.empty() || opt.file == "-") {
    return core::InvalidArgument("invalid_argument",
                                 "keys claim needs the key's .pub file (its private key beside it "
                                 "or in your ssh-agent signs the server's challenge)");
  }
  GPUWERK_ASSIGN_OR_RETURN(std::string text, ReadPublicKeyFile(ctx, opt.file));
  GPUWERK_ASSIGN_OR_RETURN(ServerConnection server, Connect(ctx));
  const json ask = {{"public_key", text}};
  GPUWERK_ASSIGN_OR_RETURN(json issued,
                           server.Ok("POST", "/api/v1/ssh-keys/claim-challenge", &ask));
  GPUWERK_ASSIGN_OR_RETURN(
      std::string signature,
      SignWithSshKeygen(opt.file, Str(issued, "namespace"), Str(issued, "challenge")));
  const json body = {{"name", opt.name},
                     {"public_key", text},
                     {"challenge", Str(issued, "challenge")},
                     {"signature", signature}};
  GPUWERK_ASSIGN_OR_RETURN(json key, server.Ok("POST", "/api/v1/ssh-keys/claim", &body));
  if (PrintJsonIfAsked(ctx, key)) return {};
  const bool taken_over = key.contains("taken_over") && key["taken_over"] == true;
  Print(ctx, std::string(taken_over ? "Claimed" : "Proved") + " key " + SafeText(Str(key, "name")) +
                 " (" + SafeText(Str(key, "fingerprint")) + ")" +
                 (taken_over ? ": it was on another account that never proved it, and is yours "
                               "now.\n"
                             : ": it is yours, and no other account can take it.\n"));
  return {};
}

core::Result<void> KeysRmVerb(VerbContext& ctx, const KeyOptions& opt) {
  GPUWERK_ASSIGN_OR_RETURN(ServerConnection server, Connect(ctx));
  GPUWERK_ASSIGN_OR_RETURN(json keys, server.All("/api/v1/ssh-keys"));
  const std::string& name = opt.name;
  const json* found = FindItem(keys, name, "name", "id");  // an id works too
  if (found == nullptr) {
    return core::Fail(ErrorCode::kNotFound, "not_found",
                      "no key named " + name + "; see 'gpuwerk keys ls'");
  }
  GPUWERK_TRY(server.Ok("DELETE", "/api/v1/ssh-keys/" + PathEscape(Str(*found, "id"))));
  if (PrintJsonIfAsked(ctx, *found)) return {};
  Print(ctx, "Removed key " + SafeText(Str(*found, "name")) + ".\n");
  return {};
}

}  // namespace

void AddKeyVerbs(CLI::App& app, const VerbRegistry& verbs) {
  auto opt = std::make_shared<KeyOptions>();
  CLI::App* keys = VerbRegistry::AddGroup(app, "keys", "Manage your SSH public keys");
  verbs.AddVerb(*keys, "ls", "List your SSH keys", &KeysLsVerb)->alias("list");
  CLI::App* add = verbs.AddVerb(*keys, "add", "Add an SSH public key", opt, &KeysAddVerb);
  add->add_option("NAME", opt->name, "a name for the key, unique among your keys")
      ->required()
      ->check(NamedArgument());
  add->add_option("FILE", opt->file,
                  "the public key file (.pub); '-' or nothing reads standard input");
  CLI::App* claim = verbs.AddVerb(
      *keys, "claim",
      "Prove you hold a key's private key (ssh-keygen signs a server challenge) and take it "
      "over from an account that registered it without proving it",
      opt, &KeysClaimVerb);
  claim->add_option("NAME", opt->name, "a name for the key, unique among your keys")
      ->required()
      ->check(NamedArgument());
  claim->add_option("FILE", opt->file, "the public key file (.pub); its private key signs")
      ->required();
  verbs.AddVerb(*keys, "rm", "Remove an SSH key", opt, &KeysRmVerb)
      ->alias("remove")
      ->add_option("NAME", opt->name, "the key's name")
      ->required()
      ->check(NamedArgument());
}

}  // namespace gpuwerk::cli::internal

// keys ls|add|rm: the person's SSH public keys. `keys add` refuses a private key before anything
// is sent (private keys never leave the person's machine).
#include <filesystem>
#include <system_error>

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
  add->add_option("NAME", opt->name, "a name for the key, unique among your keys")->required();
  add->add_option("FILE", opt->file,
                  "the public key file (.pub); '-' or nothing reads standard input");
  verbs.AddVerb(*keys, "rm", "Remove an SSH key", opt, &KeysRmVerb)
      ->alias("remove")
      ->add_option("NAME", opt->name, "the key's name")
      ->required();
}

}  // namespace gpuwerk::cli::internal

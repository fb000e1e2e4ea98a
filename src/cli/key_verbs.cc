// keys ls|add|rm: the person's SSH public keys. `keys add` refuses a private key before anything
// is sent.
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "cli/internal/verb_groups.h"
#include "cli/output.h"
#include "core/encoding.h"
#include "core/strings.h"
#include "keys/public_key.h"

namespace gpuwerk::cli::internal {
namespace {

namespace fs = std::filesystem;
using core::ErrorCode;
using nlohmann::json;

/// The server accepts public keys of up to 64 KiB; a file larger than that is not one.
constexpr size_t kMaxPublicKeyFileBytes = 64 * 1024;

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

core::Result<void> KeysAddVerb(VerbContext& ctx, const KeyOptions& opt) {
  const std::string& file = opt.file;
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
    // Said outright: someone who just pasted a private key wants to know whether it went out.
    return core::InvalidArgument(
        "private_key_pasted",
        std::move(message) + " Nothing was sent: the key did not leave this machine.");
  }
  if (text.find('\0') != std::string::npos || !core::IsValidUtf8(text)) {
    return core::InvalidArgument("invalid_encoding",
                                 "the key file is not UTF-8 text (saved as UTF-16?): save it as "
                                 "UTF-8 or ASCII, or pass the .pub file ssh-keygen wrote");
  }
  if (core::Trim(text, core::kWhitespace).empty()) {
    return core::InvalidArgument("invalid_public_key",
                                 "the public key is empty; pass the .pub file of your key");
  }

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

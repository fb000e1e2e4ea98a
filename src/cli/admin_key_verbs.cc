// admin release-key FILE: an operator frees a public key that another account registered first,
// so that its real holder can add it (docs/ssh-keys.md "A key someone else registered first").
#include "cli/internal/key_file.h"
#include "cli/internal/verb_groups.h"
#include "cli/output.h"

namespace gpuwerk::cli::internal {
namespace {

using nlohmann::json;

/// The options of `admin release-key`.
struct AdminKeyOptions {
  std::string file;  ///< the public key file, "" or "-" for standard input
};

core::Result<void> AdminReleaseKeyVerb(VerbContext& ctx, const AdminKeyOptions& opt) {
  // Read and checked as `keys add` does: a private key never leaves this machine.
  GPUWERK_ASSIGN_OR_RETURN(std::string text, ReadPublicKeyFile(ctx, opt.file));
  GPUWERK_ASSIGN_OR_RETURN(ServerConnection server, Connect(ctx));
  const json body = {{"public_key", text}};
  GPUWERK_ASSIGN_OR_RETURN(json released,
                           server.Ok("POST", "/api/v1/admin/ssh-keys/release", &body));
  if (PrintJsonIfAsked(ctx, released)) return {};
  Print(ctx, "Released key " + SafeText(Str(released, "fingerprint")) + " from account " +
                 SafeText(Str(released, "former_owner_id")) +
                 ": its holder can add it with 'gpuwerk keys add'.\n");
  return {};
}

}  // namespace

void AddAdminKeyVerbs(CLI::App& admin, const VerbRegistry& verbs) {
  auto opt = std::make_shared<AdminKeyOptions>();
  CLI::App* cmd = verbs.AddVerb(
      admin, "release-key",
      "Remove a public key from whichever account holds it, so its real holder can add it", opt,
      &AdminReleaseKeyVerb);
  cmd->add_option("FILE", opt->file,
                  "the public key file (.pub); '-' or nothing reads standard input");
}

}  // namespace gpuwerk::cli::internal

#include "keys/sshsig.h"

#include <string>

#include "core/encoding.h"
#include "core/run_tool.h"
#include "core/strings.h"

namespace gpuwerk::keys {
namespace {

constexpr std::string_view kBegin = "-----BEGIN SSH SIGNATURE-----";
constexpr std::string_view kEnd = "-----END SSH SIGNATURE-----";

std::unexpected<core::Error> InvalidSignature(std::string why) {
  return core::Fail(
      core::ErrorCode::kInvalidArgument, "invalid_signature",
      "The signature does not prove that you hold this key's private key: " + std::move(why) +
          ". Sign the challenge with ssh-keygen -Y sign -n gpuwerk-key-claim -f "
          "KEYFILE (gpuwerk keys claim does it for you).");
}

std::unexpected<core::Error> Unavailable(std::string why) {
  return core::Fail(core::ErrorCode::kUnavailable, "signature_check_unavailable",
                    "The server cannot check signatures right now (" + std::move(why) +
                        "); try again later or ask the operator.");
}

bool IsBase64Char(char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '+' ||
         c == '/' || c == '=';
}

/// The armor normalised to "BEGIN\nbody lines\nEND\n", or nullopt when it is anything else.
std::optional<std::string> NormaliseArmor(std::string_view text) {
  text = core::Trim(text, core::kWhitespace);
  if (!text.starts_with(kBegin) || !text.ends_with(kEnd)) return std::nullopt;
  std::string_view body = text.substr(kBegin.size(), text.size() - kBegin.size() - kEnd.size());
  std::string out = std::string(kBegin) + "\n";
  size_t chars = 0;
  size_t pos = 0;
  while (pos <= body.size()) {
    size_t end = body.find('\n', pos);
    if (end == std::string_view::npos) end = body.size();
    std::string_view line = core::Trim(body.substr(pos, end - pos), core::kWhitespace);
    pos = end + 1;
    if (line.empty()) continue;
    for (char c : line) {
      if (!IsBase64Char(c)) return std::nullopt;
    }
    chars += line.size();
    out.append(line).push_back('\n');
  }
  if (chars == 0) return std::nullopt;
  out.append(kEnd).push_back('\n');
  return out;
}

}  // namespace

core::Result<void> VerifySshSignature(const PublicKey& key, std::string_view sig_namespace,
                                      std::string_view message, std::string_view armored_signature,
                                      std::chrono::milliseconds timeout,
                                      const std::string& ssh_keygen) {
  if (armored_signature.size() > kMaxArmoredSignature) {
    return InvalidSignature("it is larger than any SSH signature");
  }
  const std::optional<std::string> armor = NormaliseArmor(armored_signature);
  if (!armor) return InvalidSignature("it is not an armored SSH signature (BEGIN SSH SIGNATURE)");
  // Only `key` may have made it, for `sig_namespace` only. The list holds the key's type and
  // blob, never its comment.
  const std::string allowed = "claimant namespaces=\"" + std::string(sig_namespace) + "\" " +
                              key.type + " " + core::Base64Encode(key.blob) + "\n";
  core::ToolRun run;
  run.argv = {ssh_keygen, "-Y",        "verify",
              "-f",       "/dev/fd/3", "-I",
              "claimant", "-n",        std::string(sig_namespace),
              "-s",       "/dev/fd/4"};
  run.stdin_data = std::string(message);
  run.input_files = {allowed, *armor};  // descriptors 3 and 4
  run.capture_output = false;
  run.stderr_mode = core::ToolRun::Stderr::kDiscard;
  run.timeout = timeout;
  auto outcome = core::RunTool(std::move(run));
  if (!outcome) return Unavailable(outcome.error().message);
  switch (outcome->end) {
    case core::ToolOutcome::End::kTimedOut:
      return Unavailable("the signature check did not finish in time");
    case core::ToolOutcome::End::kSignalled:
      return Unavailable("the signature check was killed");
    case core::ToolOutcome::End::kExited:
      break;
  }
  if (outcome->exit_code == 0) return {};
  if (outcome->exit_code == 127) return Unavailable("cannot run " + ssh_keygen);
  return InvalidSignature("it is not this key's signature over this challenge in namespace " +
                          std::string(sig_namespace));
}

}  // namespace gpuwerk::keys

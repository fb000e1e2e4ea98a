#include "cli/internal/key_file.h"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "core/encoding.h"
#include "core/strings.h"
#include "keys/public_key.h"

namespace gpuwerk::cli::internal {
namespace {

namespace fs = std::filesystem;

/// The server accepts public keys of up to 64 KiB; a file larger than that is not one.
constexpr size_t kMaxPublicKeyFileBytes = 64 * 1024;

}  // namespace

core::Result<std::string> ReadPublicKeyFile(VerbContext& ctx, const std::string& file) {
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

  // Refuse before sending: a private key must not leave this machine (the project's design
  // rules: private keys never leave the person's machine). Never echo it. The server's message
  // for a key pasted over the API says to treat it as exposed; here it was not sent, so the
  // message says so and only asks for the matching .pub file.
  if (keys::FindPrivateKey(text)) {
    const bool from_file = !file.empty() && file != "-";
    std::error_code ec;
    std::string instead = ", e.g. ~/.ssh/id_ed25519.pub.";
    if (from_file && !file.ends_with(".pub") && fs::exists(file + ".pub", ec)) {
      instead = " (" + file + ".pub).";
    }
    return core::InvalidArgument(
        "private_key_pasted",
        "This is a PRIVATE key. Nothing was sent: the key did not leave this machine. " +
            std::string(from_file ? "Pass the matching .pub file instead"
                                  : "Paste the contents of the matching .pub file instead") +
            instead);
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
  return text;
}

}  // namespace gpuwerk::cli::internal

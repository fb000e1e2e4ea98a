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
  return text;
}

}  // namespace gpuwerk::cli::internal

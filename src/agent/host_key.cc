#include "agent/host_key.h"

#include <archive.h>
#include <archive_entry.h>
#include <sys/stat.h>

#include <memory>

namespace gpuwerk::agent {
namespace {

struct ReadDeleter {
  void operator()(archive* a) const { archive_read_free(a); }
};

core::Error BadArchive(const std::string& why) {
  return core::Error(core::ErrorCode::kInvalidArgument, "bad_archive",
                     "the engine's archive of the host key " + why);
}

bool IsBlank(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; }

}  // namespace

core::Result<std::string> SingleFileFromTar(std::string_view tar, size_t max_bytes) {
  std::unique_ptr<archive, ReadDeleter> a(archive_read_new());
  if (a == nullptr) return core::Internal("archive_read_new failed");
  archive_read_support_format_tar(a.get());
  if (archive_read_open_memory(a.get(), tar.data(), tar.size()) != ARCHIVE_OK) {
    return core::Fail(BadArchive("is not a tar archive"));
  }
  archive_entry* entry = nullptr;
  if (archive_read_next_header(a.get(), &entry) != ARCHIVE_OK || entry == nullptr) {
    return core::Fail(BadArchive("has no entry"));
  }
  if (archive_entry_filetype(entry) != AE_IFREG) {
    return core::Fail(BadArchive("is not a regular file (a link, directory or device)"));
  }
  if (archive_entry_size(entry) < 0 || static_cast<size_t>(archive_entry_size(entry)) > max_bytes) {
    return core::Fail(BadArchive("is larger than " + std::to_string(max_bytes) + " bytes"));
  }
  std::string out(static_cast<size_t>(archive_entry_size(entry)), '\0');
  size_t got = 0;
  while (got < out.size()) {
    const la_ssize_t n = archive_read_data(a.get(), out.data() + got, out.size() - got);
    if (n <= 0) return core::Fail(BadArchive("ends early"));
    got += static_cast<size_t>(n);
  }
  return out;
}

core::Result<std::string> Ed25519KeyLine(std::string_view text) {
  auto bad = [](const std::string& why) {
    return core::Fail(core::ErrorCode::kInvalidArgument, "bad_host_key",
                      "the container's sshd host key " + why);
  };
  while (!text.empty() && IsBlank(text.front())) text.remove_prefix(1);
  while (!text.empty() && IsBlank(text.back())) text.remove_suffix(1);
  if (text.find('\n') != std::string_view::npos) return bad("file has more than one line");
  constexpr std::string_view kType = "ssh-ed25519";
  if (!text.starts_with(kType) || text.size() == kType.size() ||
      (text[kType.size()] != ' ' && text[kType.size()] != '\t')) {
    return bad("is not an ssh-ed25519 key");
  }
  text.remove_prefix(kType.size());
  while (!text.empty() && IsBlank(text.front())) text.remove_prefix(1);
  std::string_view blob = text.substr(0, text.find_first_of(" \t"));
  if (blob.empty() || blob.size() > 128) return bad("has no key or too long a key");
  for (char c : blob) {
    const bool ok = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
                    c == '+' || c == '/' || c == '=';
    if (!ok) return bad("is not base64");
  }
  return std::string(kType) + " " + std::string(blob);
}

core::Result<std::string> ReadSshHostKey(ContainerEngine& engine, std::string_view id,
                                         ContainerEngine::Timeout timeout) {
  GPUWERK_ASSIGN_OR_RETURN(std::string tar, engine.GetArchive(id, kSshHostKeyPath, timeout));
  GPUWERK_ASSIGN_OR_RETURN(std::string text, SingleFileFromTar(tar, 4096));
  return Ed25519KeyLine(text);
}

}  // namespace gpuwerk::agent

#include "agent/authorized_keys.h"

#include <archive.h>
#include <archive_entry.h>
#include <sys/stat.h>

#include <memory>

#include "core/check.h"

namespace gpuwerk::agent {
namespace {

struct ArchiveDeleter {
  void operator()(archive* a) const { archive_write_free(a); }
};
struct EntryDeleter {
  void operator()(archive_entry* e) const { archive_entry_free(e); }
};

la_ssize_t AppendCallback(archive*, void* client_data, const void* buffer, size_t length) {
  static_cast<std::string*>(client_data)->append(static_cast<const char*>(buffer), length);
  return static_cast<la_ssize_t>(length);
}

/// Writes one root-owned entry (a directory when `contents` is null).
void WriteEntry(archive* a, const char* path, mode_t type, mode_t perm, const std::string* contents,
                int64_t mtime) {
  std::unique_ptr<archive_entry, EntryDeleter> entry(archive_entry_new());
  GPUWERK_CHECK(entry != nullptr);
  archive_entry_set_pathname(entry.get(), path);
  archive_entry_set_filetype(entry.get(), type);
  archive_entry_set_perm(entry.get(), perm);
  archive_entry_set_uid(entry.get(), 0);
  archive_entry_set_gid(entry.get(), 0);
  archive_entry_set_uname(entry.get(), "root");
  archive_entry_set_gname(entry.get(), "root");
  archive_entry_set_mtime(entry.get(), mtime, 0);
  archive_entry_set_size(entry.get(), contents ? static_cast<la_int64_t>(contents->size()) : 0);
  GPUWERK_CHECK(archive_write_header(a, entry.get()) == ARCHIVE_OK);
  if (contents != nullptr && !contents->empty()) {
    GPUWERK_CHECK(archive_write_data(a, contents->data(), contents->size()) ==
                  static_cast<la_ssize_t>(contents->size()));
  }
}

bool IsBlank(char c) { return c == ' ' || c == '\t' || c == '\f' || c == '\v'; }

}  // namespace

std::string AuthorizedKeysFile(const std::vector<std::string>& key_lines) {
  std::string out;
  for (const std::string& element : key_lines) {
    std::string_view rest = element;
    while (!rest.empty()) {
      const size_t end = rest.find_first_of("\r\n");
      std::string_view line = rest.substr(0, end);
      rest = end == std::string_view::npos ? std::string_view() : rest.substr(end + 1);
      while (!line.empty() && IsBlank(line.front())) line.remove_prefix(1);
      while (!line.empty() && IsBlank(line.back())) line.remove_suffix(1);
      if (line.empty()) continue;
      out.append(line);
      out += '\n';
    }
  }
  return out;
}

std::string AuthorizedKeysTar(const std::vector<std::string>& key_lines,
                              int64_t mtime_unix_seconds) {
  const std::string file = AuthorizedKeysFile(key_lines);
  std::string out;
  std::unique_ptr<archive, ArchiveDeleter> a(archive_write_new());
  GPUWERK_CHECK(a != nullptr);
  GPUWERK_CHECK(archive_write_set_format_ustar(a.get()) == ARCHIVE_OK);
  GPUWERK_CHECK(archive_write_add_filter_none(a.get()) == ARCHIVE_OK);
  // No padding after the end-of-archive blocks: podman 4.3 answers such an upload with
  // 500 "passing bulk input to subprocess: write |1: broken pipe" now and then
  // (containers/buildah#6573). The default pads to a 10240-byte block.
  GPUWERK_CHECK(archive_write_set_bytes_in_last_block(a.get(), 1) == ARCHIVE_OK);
  GPUWERK_CHECK(archive_write_open2(a.get(), &out, nullptr, AppendCallback, nullptr, nullptr) ==
                ARCHIVE_OK);
  WriteEntry(a.get(), "root/.ssh/", AE_IFDIR, 0700, nullptr, mtime_unix_seconds);
  WriteEntry(a.get(), "root/.ssh/authorized_keys", AE_IFREG, 0600, &file, mtime_unix_seconds);
  GPUWERK_CHECK(archive_write_close(a.get()) == ARCHIVE_OK);
  return out;
}

}  // namespace gpuwerk::agent

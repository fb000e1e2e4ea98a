#pragma once

// Test-only: a tar archive of one entry, as an engine's archive download answers it for a file
// (ContainerEngine::GetArchive). Header-only; libarchive.

#include <archive.h>
#include <archive_entry.h>
#include <sys/stat.h>

#include <string>

namespace gpuwerk::agent::testing {

/// A ustar archive of one entry `name` of `type` (AE_IFREG, AE_IFLNK with `link`, AE_IFDIR)
/// holding `data` (regular files only).
inline std::string OneEntryTar(const std::string& name, mode_t type, const std::string& data,
                               const std::string& link = "") {
  std::string out;
  auto append = [](archive*, void* sink, const void* buffer, size_t length) -> la_ssize_t {
    static_cast<std::string*>(sink)->append(static_cast<const char*>(buffer), length);
    return static_cast<la_ssize_t>(length);
  };
  archive* a = archive_write_new();
  archive_write_set_format_ustar(a);
  archive_write_open(a, &out, nullptr, append, nullptr);
  archive_entry* e = archive_entry_new();
  archive_entry_set_pathname(e, name.c_str());
  archive_entry_set_filetype(e, type);
  archive_entry_set_perm(e, 0644);
  if (!link.empty()) archive_entry_set_symlink(e, link.c_str());
  archive_entry_set_size(e, type == AE_IFREG ? static_cast<la_int64_t>(data.size()) : 0);
  archive_write_header(a, e);
  if (type == AE_IFREG) archive_write_data(a, data.data(), data.size());
  archive_entry_free(e);
  archive_write_close(a);
  archive_write_free(a);
  return out;
}

}  // namespace gpuwerk::agent::testing

#include "relay/ssh_key_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

#include "relay/internal/libssh_calls.h"
#include "relay/internal/ssh_handles.h"

namespace gpuwerk::relay {
namespace {

using core::ErrorCode;
using core::Fail;

std::unexpected<core::Error> Io(const std::filesystem::path& p, const std::string& what) {
  return Fail(ErrorCode::kUnavailable, "key_file_io",
              what + " " + p.string() + ": " + std::strerror(errno));
}

/// Derives the public line and fingerprint from a private key text.
core::Result<SshKeyFile> FromText(const std::filesystem::path& path, std::string text,
                                  const std::string& comment) {
  ssh_key raw_key = nullptr;
  const int rc = ssh_pki_import_privkey_base64(text.c_str(), nullptr, nullptr, nullptr, &raw_key);
  internal::SshKeyPtr key(raw_key);
  if (rc != SSH_OK || key == nullptr) {
    return Fail(ErrorCode::kInvalidArgument, "key_file_invalid",
                path.string() + " is not an unencrypted OpenSSH private key");
  }
  if (ssh_key_type(key.get()) != SSH_KEYTYPE_ED25519) {
    return Fail(ErrorCode::kInvalidArgument, "key_file_invalid",
                path.string() + " is not an ed25519 key");
  }
  SshKeyFile out;
  out.path = path;
  out.private_openssh = std::move(text);
  const std::string b64 = internal::PublicKeyBase64(key.get());
  if (b64.empty()) return core::Internal("cannot export the public half of " + path.string());
  out.public_line = "ssh-ed25519 " + b64 + " " + comment + "\n";
  out.fingerprint = internal::Sha256Fingerprint(key.get());
  return out;
}

std::string ToOctal(unsigned mode) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "%04o", mode);
  return buf;
}

core::Result<SshKeyFile> Load(const std::filesystem::path& path, const std::string& comment) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return Io(path, "cannot read");
  if ((st.st_mode & 077) != 0) {
    return Fail(ErrorCode::kFailedPrecondition, "key_file_mode",
                path.string() + " is readable by others (mode " + ToOctal(st.st_mode & 0777) +
                    "); run chmod 600 on it");
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) return Io(path, "cannot open");
  std::stringstream ss;
  ss << in.rdbuf();
  return FromText(path, ss.str(), comment);
}

}  // namespace

core::Result<SshKeyFile> LoadOrCreateEd25519Key(const std::filesystem::path& path,
                                                const std::string& comment) {
  std::error_code ec;
  if (std::filesystem::exists(path, ec)) return Load(path, comment);
  if (path.has_parent_path()) {
    std::filesystem::create_directories(path.parent_path(), ec);
    if (ec) {
      errno = ec.value();
      return Io(path.parent_path(), "cannot create the folder");
    }
  }
  ssh_key raw_key = nullptr;
  const int generated = ssh_pki_generate(SSH_KEYTYPE_ED25519, 0, &raw_key);
  internal::SshKeyPtr key(raw_key);
  if (generated != SSH_OK || key == nullptr)
    return core::Internal("cannot generate an ed25519 key");
  // Write a temporary file (0600 from the start), then link it into place: link(2) never
  // replaces an existing file, so a key another process created meanwhile wins and is loaded.
  // (ssh_pki_export_privkey_file, not …_base64: the latter reads past its buffer in libssh 0.10,
  // which AddressSanitizer's strict string checks report.)
  std::string tmp = path.string() + ".tmp-XXXXXX";
  int fd = ::mkstemp(tmp.data());
  if (fd < 0) return Io(path, "cannot create a temporary file beside");
  ::fchmod(fd, 0600);
  const int rc = ssh_pki_export_privkey_file(key.get(), nullptr, nullptr, nullptr, tmp.c_str());
  key.reset();  // the private key leaves memory as soon as it is on disk
  if (rc != SSH_OK) {
    ::close(fd);
    ::unlink(tmp.c_str());
    return core::Internal("cannot write the new key to " + tmp);
  }
  ::fsync(fd);
  ::close(fd);
  const bool linked = ::link(tmp.c_str(), path.c_str()) == 0;
  const int link_errno = errno;
  ::unlink(tmp.c_str());
  if (!linked) {
    if (link_errno == EEXIST) return Load(path, comment);
    errno = link_errno;
    return Io(path, "cannot create");
  }
  auto out = Load(path, comment);
  if (out) out->created = true;
  return out;
}

}  // namespace gpuwerk::relay

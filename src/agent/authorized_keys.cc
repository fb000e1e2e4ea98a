#include "agent/authorized_keys.h"

#include <archive.h>
#include <archive_entry.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <iterator>
#include <memory>
#include <optional>
#include <set>

#include "core/check.h"
#include "core/encoding.h"
#include "core/strings.h"
#include "protocol/relay_principal.h"

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

namespace {

std::string Snippet(std::string_view text) {
  std::string out;
  for (char c : text.substr(0, 300)) {
    out += (static_cast<unsigned char>(c) >= 0x20 && c != 0x7f) ? c : ' ';
  }
  out.resize(core::TrimEnd(out, " ").size());
  return out;
}

bool StartsWithKeyType(std::string_view line) {
  return line.starts_with("ssh-") || line.starts_with("ecdsa-") || line.starts_with("sk-");
}

bool IsPatternChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
         c == ':' || c == '-' || c == '_' || c == '*' || c == '?' || c == '!' || c == '/' ||
         c == '%';
}

std::string DescribeChar(char c) {
  switch (c) {
    case '"':
      return "a double quote";
    case ' ':
      return "a blank";
    case '\t':
      return "a tab";
    case '\n':
      return "a newline";
    case '\r':
      return "a carriage return";
    default:
      break;
  }
  const auto u = static_cast<unsigned char>(c);
  if (u < 0x20 || u == 0x7f) return fmt::format("the control character 0x{:02x}", u);
  if (u >= 0x80) return fmt::format("the non-ASCII byte 0x{:02x}", u);
  return fmt::format("'{}'", c);
}

}  // namespace

namespace {

core::Error WriteFailed(const std::filesystem::path& path, int error) {
  return core::Error(core::ErrorCode::kUnavailable, "authorized_keys_write_failed",
                     fmt::format("cannot write {}: {}", path.string(), std::strerror(error)));
}

/// Replaces `path` with `text` (mode `mode`) atomically: a new file beside it (O_EXCL,
/// O_NOFOLLOW), fsync'd, renamed over it.
core::Result<void> ReplaceFile(const std::filesystem::path& path, std::string_view text,
                               mode_t mode) {
  const std::filesystem::path tmp =
      path.parent_path() / ("." + path.filename().string() + ".tmp." + std::to_string(::getpid()));
  ::unlink(tmp.c_str());  // left by a write that died (this pid's, or a reused one)
  const int fd =
      ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode & 0777);
  if (fd < 0) return core::Fail(WriteFailed(tmp, errno));
  auto fail = [&](int error) {
    ::close(fd);
    ::unlink(tmp.c_str());
    return core::Fail(WriteFailed(path, error));
  };
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return fail(n < 0 ? errno : EIO);
    done += static_cast<size_t>(n);
  }
  if (::fchmod(fd, mode & 0777) != 0 || ::fsync(fd) != 0) return fail(errno);
  if (::close(fd) != 0) {
    ::unlink(tmp.c_str());
    return core::Fail(WriteFailed(path, errno));
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const int error = errno;
    ::unlink(tmp.c_str());
    return core::Fail(WriteFailed(path, error));
  }
  return {};
}

/// Creates `dir` (mode 0700) when missing; an existing one must be a directory, not a symlink,
/// and gets mode 0700.
core::Result<void> EnsurePrivateDir(const std::filesystem::path& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir.parent_path(), ec);
  if (ec) return core::Fail(WriteFailed(dir.parent_path(), ec.value()));
  if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST)
    return core::Fail(WriteFailed(dir, errno));
  struct stat st {};
  if (::lstat(dir.c_str(), &st) != 0) return core::Fail(WriteFailed(dir, errno));
  if (!S_ISDIR(st.st_mode)) return core::Fail(WriteFailed(dir, ENOTDIR));
  if ((st.st_mode & 07777) != 0700 && ::chmod(dir.c_str(), 0700) != 0) {
    return core::Fail(WriteFailed(dir, errno));
  }
  return {};
}

bool IsContainerNameChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '.' || c == '-';
}

}  // namespace

std::string SshdKeysDropIn() {
  return "# Written by the gpuwerk agent and mounted read-only: sshd reads the keys gpuwerk "
         "manages first,\n# then root's own ~/.ssh/authorized_keys.\n"
         "AuthorizedKeysFile " +
         std::string(kAgentKeysFileInContainer) + " .ssh/authorized_keys\n";
}

core::Result<AgentKeysPaths> AgentKeysPathsFor(const std::filesystem::path& keys_root,
                                               std::string_view container_name) {
  if (!keys_root.is_absolute()) {
    return core::InvalidArgument("invalid_keys_dir",
                                 fmt::format("the agent's keys directory \"{}\" is not absolute",
                                             Snippet(keys_root.string())));
  }
  if (container_name.empty() || container_name.size() > 128 || container_name.front() == '.' ||
      container_name.front() == '-' ||
      !std::all_of(container_name.begin(), container_name.end(), IsContainerNameChar)) {
    return core::InvalidArgument(
        "invalid_container_name",
        fmt::format("\"{}\" is not a container name the agent makes a keys directory for",
                    Snippet(container_name)));
  }
  return AgentKeysPaths{.dir = keys_root / "containers" / std::string(container_name),
                        .drop_in = keys_root / "sshd-keys.conf"};
}

std::vector<BindMount> AgentKeysBinds(const AgentKeysPaths& paths) {
  return {
      {.source = paths.dir.string(), .target = std::string(kAgentKeysMount), .read_only = true},
      {.source = paths.drop_in.string(),
       .target = std::string(kSshdKeysDropInInContainer),
       .read_only = true},
  };
}

core::Result<void> WriteAgentKeys(const AgentKeysPaths& paths,
                                  const std::vector<std::string>& key_lines) {
  GPUWERK_TRY(EnsurePrivateDir(paths.dir));
  GPUWERK_TRY(ReplaceFile(paths.dir / "authorized_keys", AuthorizedKeysFile(key_lines), 0600));
  const std::string drop_in = SshdKeysDropIn();
  std::ifstream in(paths.drop_in, std::ios::binary);
  const std::string have{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  if (have != drop_in) {
    GPUWERK_TRY(ReplaceFile(paths.drop_in, drop_in, 0644));
  }
  return {};
}

core::Result<bool> AgentKeysHold(const AgentKeysPaths& paths,
                                 const std::vector<std::string>& key_lines) {
  const std::filesystem::path file = paths.dir / "authorized_keys";
  const int fd = ::open(file.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT || errno == ENOTDIR) return false;
    return core::Fail(core::ErrorCode::kUnavailable, "authorized_keys_read_failed",
                      fmt::format("cannot read {}: {}", file.string(), std::strerror(errno)));
  }
  std::string text;
  char buf[4096];
  ssize_t n = 0;
  while ((n = ::read(fd, buf, sizeof buf)) > 0 || (n < 0 && errno == EINTR)) {
    if (n > 0) text.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  std::set<std::string> have;
  std::string_view all = text;
  while (!all.empty()) {
    const size_t end = all.find('\n');
    have.insert(std::string(all.substr(0, end)));
    all = end == std::string_view::npos ? std::string_view() : all.substr(end + 1);
  }
  const std::string want = AuthorizedKeysFile(key_lines);
  std::string_view rest = want;
  while (!rest.empty()) {
    const size_t end = rest.find('\n');
    if (!have.contains(std::string(rest.substr(0, end)))) return false;
    rest.remove_prefix(end + 1);
  }
  return true;
}

void RemoveAgentKeys(const AgentKeysPaths& paths) {
  std::error_code ec;
  std::filesystem::remove_all(paths.dir, ec);
}

core::Result<void> WriteAuthorizedKeysByArchive(ContainerEngine& engine, std::string_view id,
                                                const std::vector<std::string>& key_lines,
                                                std::chrono::milliseconds timeout) {
  return engine.PutArchive(id, kAuthorizedKeysArchiveRoot, AuthorizedKeysTar(key_lines), timeout);
}

AuthorizedKeyLine SplitAuthorizedKeyLine(std::string_view line) {
  while (!line.empty() && (IsBlank(line.front()) || line.front() == '\r' || line.front() == '\n')) {
    line.remove_prefix(1);
  }
  while (!line.empty() && (IsBlank(line.back()) || line.back() == '\r' || line.back() == '\n')) {
    line.remove_suffix(1);
  }
  if (line.empty() || StartsWithKeyType(line)) return {.options = "", .key = std::string(line)};
  bool quoted = false;
  size_t i = 0;
  for (; i < line.size(); ++i) {
    const char c = line[i];
    if (quoted && c == '\\' && i + 1 < line.size() && line[i + 1] == '"') {
      ++i;
    } else if (c == '"') {
      quoted = !quoted;
    } else if (!quoted && IsBlank(c)) {
      break;
    }
  }
  std::string_view key = line.substr(i);
  while (!key.empty() && IsBlank(key.front())) key.remove_prefix(1);
  return {.options = std::string(line.substr(0, i)), .key = std::string(key)};
}

core::Result<void> ValidateFromPatterns(std::string_view patterns) {
  if (patterns.empty()) {
    return core::InvalidArgument("invalid_relay_from", "the relay's from= pattern list is empty");
  }
  for (char c : patterns) {
    if (c != ',' && !IsPatternChar(c)) {
      return core::InvalidArgument(
          "invalid_relay_from",
          fmt::format("the relay's from= patterns may hold only addresses, host names, CIDR "
                      "ranges, '*', '?' and a leading '!', separated by commas; \"{}\" has {}",
                      Snippet(patterns), DescribeChar(c)));
    }
  }
  size_t start = 0;
  while (start <= patterns.size()) {
    const size_t end = std::min(patterns.find(',', start), patterns.size());
    std::string_view element = patterns.substr(start, end - start);
    if (element.starts_with('!')) element.remove_prefix(1);
    if (element.empty() || element.find('!') != std::string_view::npos) {
      return core::InvalidArgument(
          "invalid_relay_from",
          fmt::format("the relay's from= patterns \"{}\" have an empty element or a '!' that is "
                      "not at the start of one",
                      Snippet(patterns)));
    }
    start = end + 1;
  }
  return {};
}

core::Result<std::string> RestrictRelayKeyLine(std::string_view line, std::string_view patterns) {
  const AuthorizedKeyLine parts = SplitAuthorizedKeyLine(line);
  if (parts.key.empty()) {
    return core::InvalidArgument("invalid_relay_key",
                                 fmt::format("\"{}\" has no public key", Snippet(line)));
  }
  if (patterns.empty()) {
    return parts.options.empty() ? parts.key : parts.options + " " + parts.key;
  }
  GPUWERK_TRY(ValidateFromPatterns(patterns));
  std::string lower = parts.options;
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (lower.starts_with("from=") || lower.find(",from=") != std::string::npos) {
    return core::InvalidArgument(
        "invalid_relay_from",
        "the relay key line has a from= option of its own; give the addresses either there or "
        "with --relay-from, not both");
  }
  std::string out = "from=\"" + std::string(patterns) + "\"";
  if (!parts.options.empty()) out += "," + parts.options;
  return out + " " + parts.key;
}

namespace {

/// "TYPE BASE64" of a public key line without options whose blob decodes and starts with the
/// SSH string TYPE (RFC 4253 §6.6); nullopt otherwise.
std::optional<std::string> KeyOfType(std::string_view line, std::string_view type,
                                     size_t exact_blob_size) {
  const AuthorizedKeyLine parts = SplitAuthorizedKeyLine(line);
  if (!parts.options.empty() || parts.key.empty()) return std::nullopt;
  std::string_view key = parts.key;
  const size_t blank = key.find_first_of(" \t");
  if (key.substr(0, blank) != type || blank == std::string_view::npos) return std::nullopt;
  std::string_view b64 = key.substr(blank + 1);
  while (!b64.empty() && IsBlank(b64.front())) b64.remove_prefix(1);
  b64 = b64.substr(0, b64.find_first_of(" \t"));
  const auto blob = core::Base64Decode(b64);
  if (!blob || blob->size() < 4 + type.size()) return std::nullopt;
  const std::string& raw = *blob;
  const uint32_t n = (uint32_t{static_cast<unsigned char>(raw[0])} << 24) |
                     (uint32_t{static_cast<unsigned char>(raw[1])} << 16) |
                     (uint32_t{static_cast<unsigned char>(raw[2])} << 8) |
                     uint32_t{static_cast<unsigned char>(raw[3])};
  if (n != type.size() || raw.compare(4, n, type) != 0) return std::nullopt;
  if (exact_blob_size != 0 && raw.size() != exact_blob_size) return std::nullopt;
  return std::string(type) + " " + std::string(b64);
}

}  // namespace

core::Result<std::string> ParseRelayCaLine(std::string_view line) {
  // An ed25519 public key blob: string "ssh-ed25519" (4 + 11) and string of 32 bytes (4 + 32).
  auto key = KeyOfType(line, "ssh-ed25519", 4 + 11 + 4 + 32);
  if (!key) {
    return core::InvalidArgument(
        "invalid_relay_ca",
        fmt::format("the relay CA must be given as the public line `gpuwerk relay` prints "
                    "(\"ssh-ed25519 AAAA… gpuwerk-relay-ca\"), without options; got \"{}\"",
                    Snippet(line)));
  }
  return *key;
}

core::Result<std::string> ParseRelayProbeCertificate(std::string_view line) {
  auto key = KeyOfType(line, "ssh-ed25519-cert-v01@openssh.com", 0);
  if (!key) {
    return core::InvalidArgument(
        "invalid_relay_ca_probe",
        fmt::format("the relay's probe certificate must be given as `gpuwerk relay` prints it "
                    "(\"ssh-ed25519-cert-v01@openssh.com AAAA…\"); got \"{}\"",
                    Snippet(line)));
  }
  return *key;
}

core::Result<std::string> RelayCaKeyLine(std::string_view ca_key, std::string_view instance_id,
                                         std::string_view from_patterns) {
  GPUWERK_ASSIGN_OR_RETURN(const std::string key, ParseRelayCaLine(ca_key));
  const auto principal = protocol::RelayInstancePrincipal(instance_id);
  if (!principal) {
    return core::InvalidArgument(
        "invalid_instance_id",
        fmt::format("the instance id \"{}\" makes no certificate principal (letters, digits, "
                    "'_', '.', '-', at most 64)",
                    Snippet(instance_id)));
  }
  std::string options = "cert-authority,principals=\"" + *principal + "\"";
  if (!from_patterns.empty()) {
    GPUWERK_TRY(ValidateFromPatterns(from_patterns));
    options += ",from=\"" + std::string(from_patterns) + "\"";
  }
  return options + " " + key + " " + std::string(kRelayCaComment);
}

std::string RelayCaProbeLine(std::string_view ca_key) {
  return "cert-authority,principals=\"" + std::string(protocol::kRelayProbePrincipal) +
         "\",restrict,command=\"/bin/false\" " + std::string(ca_key) + " " +
         std::string(kRelayCaProbeComment);
}

core::Result<void> ReplaceHostFile(const std::filesystem::path& path, std::string_view text,
                                   mode_t mode) {
  return ReplaceFile(path, text, mode);
}

core::Result<void> EnsurePrivateHostDir(const std::filesystem::path& dir) {
  return EnsurePrivateDir(dir);
}

}  // namespace gpuwerk::agent

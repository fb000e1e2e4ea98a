#include "agent/authorized_keys.h"

#include <archive.h>
#include <archive_entry.h>
#include <fmt/format.h>
#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <memory>

#include "core/check.h"
#include "core/strings.h"

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

/// The shell text AuthorizedKeysExec runs; the file's contents come from kAuthorizedKeysEnv.
/// `$$` keeps two writers' temporary files apart; the trap removes ours when anything fails.
/// Exits 97 unless the exec runs inside the container whose hostname is
/// $GPUWERK_CONTAINER_HOSTNAME (its /etc/hostname, which Docker and podman write for each
/// container): an engine that runs execs in the wrong mount namespace (seen in CI roots whose
/// /proc does not match the engine's PID namespace) would otherwise write the HOST's files.
constexpr const char* kInContainerGuard =
    "if [ -n \"$GPUWERK_CONTAINER_HOSTNAME\" ] && ! grep -qxF -e "
    "\"$GPUWERK_CONTAINER_HOSTNAME\" /etc/hostname 2>/dev/null; then "
    "echo 'this exec does not run inside the container' >&2; exit 97; fi; ";

/// The exit status of kInContainerGuard.
constexpr int kOutsideContainerStatus = 97;

constexpr const char* kWriteScript =
    "set -e; umask 077; "
    "mkdir -p /root/.ssh; chown 0:0 /root/.ssh; chmod 700 /root/.ssh; "
    "tmp=/root/.ssh/.authorized_keys.gpuwerk.$$; trap 'rm -f \"$tmp\"' EXIT; "
    "printf '%s' \"$GPUWERK_AUTHORIZED_KEYS\" > \"$tmp\"; "
    "chown 0:0 \"$tmp\"; chmod 600 \"$tmp\"; "
    "mv -f \"$tmp\" /root/.ssh/authorized_keys";

/// Exits 0 when every line of kAuthorizedKeysEnv is a whole line of the file, 1 when one is not
/// (or the file is missing).
constexpr const char* kHoldScript =
    "printf '%s' \"$GPUWERK_AUTHORIZED_KEYS\" | while IFS= read -r line; do "
    "grep -qxF -e \"$line\" /root/.ssh/authorized_keys 2>/dev/null || exit 1; done";

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

/// An exec of `script` as root with the keys in kAuthorizedKeysEnv, guarded by
/// kInContainerGuard when `container_hostname` is given.
ExecSpec GuardedExec(const char* script, const std::vector<std::string>& key_lines,
                     std::string_view container_hostname) {
  ExecSpec spec{
      .cmd = {"/bin/sh", "-c", std::string(kInContainerGuard) + script},
      .env = {std::string(kAuthorizedKeysEnv) + "=" + AuthorizedKeysFile(key_lines)},
      .user = "0",
  };
  if (!container_hostname.empty()) {
    spec.env.push_back("GPUWERK_CONTAINER_HOSTNAME=" + std::string(container_hostname));
  }
  return spec;
}

core::Error OutsideContainer(std::string_view id, const ExecResult& ran) {
  return core::Error(core::ErrorCode::kFailedPrecondition, "exec_outside_container",
                     fmt::format("the engine ran an exec for container {} outside it (its "
                                 "/etc/hostname is not the container's): nothing written; {}",
                                 Snippet(id), Snippet(ran.err + ran.out)));
}

}  // namespace

ExecSpec AuthorizedKeysExec(const std::vector<std::string>& key_lines,
                            std::string_view container_hostname) {
  return GuardedExec(kWriteScript, key_lines, container_hostname);
}

core::Result<void> WriteAuthorizedKeys(ContainerEngine& engine, std::string_view id,
                                       ContainerState state,
                                       const std::vector<std::string>& key_lines,
                                       std::chrono::milliseconds timeout,
                                       std::string_view container_hostname) {
  if (state == ContainerState::kRunning) {
    auto ran = engine.RunExec(id, AuthorizedKeysExec(key_lines, container_hostname), timeout);
    if (ran) {
      if (ran->exit_code == 0) return {};
      if (ran->exit_code == kOutsideContainerStatus) return core::Fail(OutsideContainer(id, *ran));
      return core::Fail(core::ErrorCode::kUnavailable, "authorized_keys_write_failed",
                        fmt::format("writing /root/.ssh/authorized_keys in container {} exited "
                                    "with status {}: {}",
                                    Snippet(id), ran->exit_code, Snippet(ran->err + ran->out)));
    }
    if (ran.error().api_code != "container_not_running") return core::Fail(ran.error());
    // Stopped between the caller's look and the exec: a stopped container takes the archive.
  }
  return engine.PutArchive(id, kAuthorizedKeysArchiveRoot, AuthorizedKeysTar(key_lines), timeout);
}

core::Result<bool> AuthorizedKeysHold(ContainerEngine& engine, std::string_view id,
                                      const std::vector<std::string>& key_lines,
                                      std::chrono::milliseconds timeout,
                                      std::string_view container_hostname) {
  GPUWERK_ASSIGN_OR_RETURN(
      ExecResult ran,
      engine.RunExec(id, GuardedExec(kHoldScript, key_lines, container_hostname), timeout));
  if (ran.exit_code == 0) return true;
  if (ran.exit_code == 1) return false;
  if (ran.exit_code == kOutsideContainerStatus) return core::Fail(OutsideContainer(id, ran));
  return core::Fail(core::ErrorCode::kUnavailable, "authorized_keys_read_failed",
                    fmt::format("reading /root/.ssh/authorized_keys in container {} exited with "
                                "status {}: {}",
                                Snippet(id), ran.exit_code, Snippet(ran.err + ran.out)));
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

}  // namespace gpuwerk::agent

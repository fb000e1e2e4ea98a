#include "cli/login_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

namespace gpuwerk::cli {
namespace {

namespace fs = std::filesystem;
using core::ErrorCode;

std::string ErrnoText(int err) { return std::strerror(err); }

std::unexpected<core::Error> WriteFailed(const fs::path& path, std::string_view what, int err) {
  return core::Fail(ErrorCode::kInternal, "login_file_write_failed",
                    "cannot save the login file " + path.string() + ": " + std::string(what) +
                        ": " + ErrnoText(err));
}

std::unexpected<core::Error> InvalidFile(const fs::path& path, std::string_view why) {
  return core::Fail(
      ErrorCode::kFailedPrecondition, "invalid_login_file",
      "the login file " + path.string() + " " + std::string(why) + "; run 'gpuwerk login' again");
}

/// Creates the missing directories of `dir`, each with mode 0700 (existing ones are left alone).
core::Result<void> MakeDirectories(const fs::path& dir) {
  fs::path current;
  for (const auto& part : dir) {
    current /= part;
    if (current.empty() || current == current.root_path()) continue;
    if (::mkdir(current.c_str(), 0700) == 0) continue;
    const int err = errno;
    struct stat st {};
    if (err == EEXIST && ::stat(current.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) continue;
    return WriteFailed(current, "cannot create the directory", err == EEXIST ? ENOTDIR : err);
  }
  return {};
}

/// Writes all of `data` to `fd`, retrying on EINTR and short writes; false with errno set.
bool WriteAll(int fd, std::string_view data) {
  while (!data.empty()) {
    const ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    data.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

}  // namespace

EnvLookup ProcessEnvironment() {
  return [](std::string_view name) -> std::optional<std::string> {
    const char* value = std::getenv(std::string(name).c_str());
    if (value == nullptr || *value == '\0') return std::nullopt;
    return std::string(value);
  };
}

core::Result<fs::path> LoginFilePath(const EnvLookup& env) {
  if (auto dir = env("GPUWERK_CONFIG_DIR")) return fs::path(*dir) / "login.json";
  if (auto xdg = env("XDG_CONFIG_HOME")) return fs::path(*xdg) / "gpuwerk" / "login.json";
  if (auto home = env("HOME")) return fs::path(*home) / ".config" / "gpuwerk" / "login.json";
  return core::Fail(ErrorCode::kFailedPrecondition, "no_config_dir",
                    "cannot tell where to keep the login file: set GPUWERK_CONFIG_DIR or HOME");
}

core::Result<std::optional<Login>> ReadLoginFile(const fs::path& path) {
  constexpr std::streamsize kMaxBytes = 1024 * 1024;
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    const int err = errno;
    std::error_code ec;
    if (!fs::exists(path, ec) && !ec) return std::optional<Login>();
    return InvalidFile(path, "cannot be read (" + ErrnoText(err) + ")");
  }
  std::string text(static_cast<size_t>(kMaxBytes) + 1, '\0');
  in.read(text.data(), kMaxBytes + 1);
  if (in.bad()) return InvalidFile(path, "cannot be read");
  text.resize(static_cast<size_t>(in.gcount()));
  if (text.size() > static_cast<size_t>(kMaxBytes)) return InvalidFile(path, "is too large");

  const auto json = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (json.is_discarded() || !json.is_object()) return InvalidFile(path, "is not a JSON object");
  Login login;
  for (auto [field, target] : {std::pair{"url", &login.url}, std::pair{"token", &login.token},
                               std::pair{"email", &login.email}}) {
    auto it = json.find(field);
    if (it == json.end() || it->is_null()) continue;
    if (!it->is_string()) {
      return InvalidFile(path, "has a '" + std::string(field) + "' that is not a string");
    }
    *target = it->get<std::string>();
  }
  if (login.url.empty() || login.token.empty()) {
    return InvalidFile(path, "lacks the server 'url' or the API 'token'");
  }
  return std::optional<Login>(std::move(login));
}

core::Result<void> WriteLoginFile(const fs::path& path, const Login& login) {
  if (path.has_parent_path()) GPUWERK_TRY(MakeDirectories(path.parent_path()));
  const std::string data =
      nlohmann::json{{"url", login.url}, {"token", login.token}, {"email", login.email}}.dump(2) +
      "\n";

  // A fresh temporary file that nobody else can have opened: O_EXCL with mode 0600 from the
  // start, so the token is never readable by others, not even for a moment.
  std::string tmp;
  int fd = -1;
  for (int attempt = 0; attempt < 100 && fd < 0; ++attempt) {
    tmp = path.string() + ".tmp-" + std::to_string(::getpid()) + "-" + std::to_string(attempt);
    fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0 && errno != EEXIST) return WriteFailed(tmp, "cannot create", errno);
  }
  if (fd < 0) return WriteFailed(tmp, "cannot create", EEXIST);

  const bool written = WriteAll(fd, data) && ::fsync(fd) == 0;
  const int write_err = errno;
  if (::close(fd) != 0 && written) {
    const int err = errno;
    ::unlink(tmp.c_str());
    return WriteFailed(tmp, "cannot write", err);
  }
  if (!written) {
    ::unlink(tmp.c_str());
    return WriteFailed(tmp, "cannot write", write_err);
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    return WriteFailed(path, "cannot replace", err);
  }
  // Make the rename itself durable; failing here loses nothing that matters, so it is ignored.
  const std::string dir = path.has_parent_path() ? path.parent_path().string() : ".";
  if (int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC); dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
  return {};
}

core::Result<bool> RemoveLoginFile(const fs::path& path) {
  if (::unlink(path.c_str()) == 0) return true;
  if (errno == ENOENT) return false;
  return core::Fail(ErrorCode::kInternal, "login_file_remove_failed",
                    "cannot remove the login file " + path.string() + ": " + ErrnoText(errno));
}

core::Result<Target> ResolveTarget(const TargetFlags& flags, const EnvLookup& env) {
  Target target;
  target.url = !flags.url.empty() ? flags.url : env("GPUWERK_URL").value_or("");
  target.token = !flags.token.empty() ? flags.token : env("GPUWERK_TOKEN").value_or("");

  if (target.url.empty() || target.token.empty()) {
    auto path = LoginFilePath(env);
    if (!path && !target.token.empty()) {
      target.url = kDefaultServerUrl;  // no config dir, but nothing needed from it
      return target;
    }
    if (!path) return core::Fail(std::move(path).error());
    GPUWERK_ASSIGN_OR_RETURN(std::optional<Login> login, ReadLoginFile(*path));
    if (login) {
      if (target.url.empty()) target.url = login->url;
      if (target.token.empty()) {
        target.token = login->token;
        target.email = login->email;
      }
    }
  }
  if (target.token.empty()) {
    return core::Fail(ErrorCode::kUnauthenticated, "not_logged_in",
                      "not logged in: run 'gpuwerk login' or set GPUWERK_URL and GPUWERK_TOKEN");
  }
  if (target.url.empty()) target.url = kDefaultServerUrl;
  return target;
}

}  // namespace gpuwerk::cli

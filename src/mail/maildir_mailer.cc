#include "mail/maildir_mailer.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <system_error>

#include "core/encoding.h"
#include "core/logging.h"
#include "core/random.h"
#include "mail/message.h"

namespace gpuwerk::mail {
namespace {

core::Result<void> Unavailable(std::string message) {
  return core::Fail(core::ErrorCode::kUnavailable, "mail_unavailable", std::move(message));
}

std::string ErrnoText(int err) { return std::error_code(err, std::generic_category()).message(); }

/// mkdir with mode 0700; an existing directory is fine.
core::Result<void> MakeDir(const std::filesystem::path& path) {
  if (::mkdir(path.c_str(), 0700) == 0 || errno == EEXIST) return {};
  return Unavailable(
      fmt::format("cannot create Maildir directory {}: {}", path.string(), ErrnoText(errno)));
}

/// The host name with '/' and ':' written as \057 and \072, as the Maildir spec asks.
std::string MaildirHost() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof buf - 1) != 0 || buf[0] == '\0') return "localhost";
  std::string out;
  for (const char* p = buf; *p != '\0'; ++p) {
    if (*p == '/') {
      out += "\\057";
    } else if (*p == ':') {
      out += "\\072";
    } else {
      out += *p;
    }
  }
  return out;
}

std::string WithLfLineEndings(std::string_view crlf_text) {
  std::string out;
  out.reserve(crlf_text.size());
  for (size_t i = 0; i < crlf_text.size(); ++i) {
    if (crlf_text[i] == '\r' && i + 1 < crlf_text.size() && crlf_text[i + 1] == '\n') continue;
    out += crlf_text[i];
  }
  return out;
}

core::Result<void> WriteFileSynced(const std::filesystem::path& path, std::string_view data) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) {
    return Unavailable(fmt::format("cannot create {}: {}", path.string(), ErrnoText(errno)));
  }
  size_t done = 0;
  while (done < data.size()) {
    const ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int err = errno;
      ::close(fd);
      ::unlink(path.c_str());
      return Unavailable(fmt::format("cannot write {}: {}", path.string(), ErrnoText(err)));
    }
    done += static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    const int err = errno;
    ::unlink(path.c_str());
    return Unavailable(fmt::format("cannot write {}: {}", path.string(), ErrnoText(err)));
  }
  return {};
}

}  // namespace

std::vector<std::string> FindLinks(std::string_view text) {
  std::vector<std::string> links;
  size_t pos = 0;
  while (true) {
    const size_t http = text.find("http://", pos);
    const size_t https = text.find("https://", pos);
    const size_t start = std::min(http, https);
    if (start == std::string_view::npos) break;
    size_t end = start;
    while (end < text.size()) {
      const unsigned char c = static_cast<unsigned char>(text[end]);
      if (c <= 0x20 || c == 0x7f || c == '<' || c == '>' || c == '"' || c == '\'') break;
      ++end;
    }
    pos = end;
    while (end > start &&
           std::string_view(".,;:!?)]}").find(text[end - 1]) != std::string_view::npos) {
      --end;
    }
    std::string link(text.substr(start, end - start));
    const bool has_host = link.find("://") + 3 < link.size();
    if (has_host && std::find(links.begin(), links.end(), link) == links.end()) {
      links.push_back(std::move(link));
    }
  }
  return links;
}

MaildirMailer::MaildirMailer(std::filesystem::path dir, std::string from)
    : dir_(std::move(dir)), from_(std::move(from)) {}

core::Result<void> MaildirMailer::Send(const Mail& mail) {
  GPUWERK_TRY(ValidateMail(mail));
  std::error_code ec;
  if (dir_.has_parent_path()) std::filesystem::create_directories(dir_.parent_path(), ec);
  GPUWERK_TRY(MakeDir(dir_));
  GPUWERK_TRY(MakeDir(dir_ / "tmp"));
  GPUWERK_TRY(MakeDir(dir_ / "new"));
  GPUWERK_TRY(MakeDir(dir_ / "cur"));

  const auto now = std::chrono::system_clock::now().time_since_epoch();
  const int64_t seconds = std::chrono::duration_cast<std::chrono::seconds>(now).count();
  const int64_t micros =
      std::chrono::duration_cast<std::chrono::microseconds>(now).count() % 1'000'000;
  static const bool crypto_ready = (core::InitCrypto(), true);
  (void)crypto_ready;
  core::SodiumRng rng;
  unsigned char random[8];
  rng.Fill(random, sizeof random);
  const std::string unique = fmt::format(
      "{}.M{}P{}Q{}R{}.{}", seconds, micros, static_cast<long>(::getpid()), ++deliveries_,
      core::HexEncode(std::string_view(reinterpret_cast<const char*>(random), sizeof random)),
      MaildirHost());

  const std::string message =
      WithLfLineEndings(RenderMessage(mail, from_, FromDomain(from_), seconds));
  const std::filesystem::path tmp = dir_ / "tmp" / unique;
  const std::filesystem::path target = dir_ / "new" / unique;
  GPUWERK_TRY(WriteFileSynced(tmp, message));
  if (::rename(tmp.c_str(), target.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    return Unavailable(
        fmt::format("cannot move mail into {}: {}", target.string(), ErrnoText(err)));
  }

  spdlog::info("mail to={} subject={} file={}", mail.to, mail.subject, target.string());
  for (const std::string& link : FindLinks(mail.text_body)) spdlog::info("mail link: {}", link);
  return {};
}

}  // namespace gpuwerk::mail

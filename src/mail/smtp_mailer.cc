#include "mail/smtp_mailer.h"

#include <curl/curl.h>
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstring>
#include <memory>
#include <mutex>
#include <string_view>

#include "core/curl_handles.h"
#include "core/strings.h"
#include "mail/message.h"

namespace gpuwerk::mail {
namespace {

/// The message being uploaded as DATA.
struct Upload {
  std::string_view data;
  size_t pos = 0;
};

size_t ReadCallback(char* buffer, size_t size, size_t nitems, void* userp) {
  auto* upload = static_cast<Upload*>(userp);
  const size_t n = std::min(size * nitems, upload->data.size() - upload->pos);
  std::memcpy(buffer, upload->data.data() + upload->pos, n);
  upload->pos += n;
  return n;
}

/// What the SMTP dialogue showed: the last command verb we sent and the server's last reply
/// line before QUIT. Only fixed verbs are kept from our side, so AUTH credentials never land
/// here.
struct Dialogue {
  std::string last_command;  // before QUIT
  std::string last_reply;    // before QUIT
  bool quitting = false;
};

int DebugCallback(CURL*, curl_infotype type, char* data, size_t size, void* userp) {
  auto* dialogue = static_cast<Dialogue*>(userp);
  std::string_view text(data, size);
  if (type == CURLINFO_HEADER_OUT) {
    static constexpr std::array<std::string_view, 8> kVerbs = {"EHLO", "HELO", "STARTTLS", "AUTH",
                                                               "MAIL", "RCPT", "DATA",     "QUIT"};
    for (std::string_view verb : kVerbs) {
      if (dialogue->quitting || !text.starts_with(verb)) continue;
      if (text.size() == verb.size() || text[verb.size()] == ' ' || text[verb.size()] == '\r') {
        if (verb == "QUIT") {
          dialogue->quitting = true;
        } else {
          dialogue->last_command = std::string(verb);
        }
      }
    }
  } else if (type == CURLINFO_HEADER_IN && !dialogue->quitting) {
    text = core::TrimEnd(text, "\r\n");
    std::string line;
    for (char c : text.substr(0, 200)) line += (c >= 0x20 && c < 0x7f) ? c : '?';
    if (!line.empty()) dialogue->last_reply = std::move(line);
  }
  return 0;
}

long UseSsl(StartTls mode) {
  switch (mode) {
    case StartTls::kNever:
      return CURLUSESSL_NONE;
    case StartTls::kIfOffered:
      return CURLUSESSL_TRY;
    case StartTls::kRequired:
      return CURLUSESSL_ALL;
  }
  return CURLUSESSL_TRY;
}

/// Whether a failed dialogue ended with a permanent refusal of this recipient or message.
bool IsPermanentRejection(long code, std::string_view last_command) {
  if (code < 500 || code > 599) return false;
  if (code == 500 || code == 502 || code == 503 || code == 504) return false;
  return last_command == "RCPT" || last_command == "DATA";
}

core::Result<void> BadConfig(std::string message) {
  return core::InvalidArgument("invalid_mail_config", std::move(message));
}

}  // namespace

core::Result<StartTls> ParseStartTls(std::string_view text) {
  if (text == "never") return StartTls::kNever;
  if (text == "if-offered") return StartTls::kIfOffered;
  if (text == "required") return StartTls::kRequired;
  return core::InvalidArgument("invalid_config",
                               "smtp_starttls must be never, if-offered or required");
}

core::Result<void> ValidateSmtpMailerOptions(const SmtpMailerOptions& options) {
  std::string_view url = options.url;
  if (url.starts_with("smtp://")) {
    url.remove_prefix(7);
  } else if (url.starts_with("smtps://")) {
    url.remove_prefix(8);
  } else {
    return BadConfig("SMTP URL must start with smtp:// or smtps://");
  }
  const std::string_view authority = url.substr(0, url.find('/'));
  if (authority.empty() || authority.front() == ':') return BadConfig("SMTP URL has no host");
  if (authority.find('@') != std::string_view::npos) {
    return BadConfig("SMTP URL must not contain credentials; set the username and password");
  }
  for (unsigned char c : options.url) {
    if (c <= 0x20 || c >= 0x7f) return BadConfig("SMTP URL contains blanks or control characters");
  }
  GPUWERK_TRY(ValidateFrom(options.from));
  if (options.username.empty() && !options.password.empty()) {
    return BadConfig("SMTP password is set without a username");
  }
  if (options.timeout_seconds <= 0) return BadConfig("SMTP timeout must be positive");
  return {};
}

SmtpMailer::SmtpMailer(SmtpMailerOptions options) : options_(std::move(options)) {
  core::CurlGlobalInitOnce();
}

SmtpMailer::~SmtpMailer() = default;

core::Result<void> SmtpMailer::Send(const Mail& mail) {
  GPUWERK_TRY(ValidateMail(mail));
  const int64_t now = std::chrono::duration_cast<std::chrono::seconds>(
                          std::chrono::system_clock::now().time_since_epoch())
                          .count();
  const std::string message = RenderMessage(mail, options_.from, FromDomain(options_.from), now);

  // Everything the handle points at is declared before it, so it outlives the handle: curl may
  // still talk (QUIT) and call back from curl_easy_cleanup.
  core::CurlList rcpt(curl_slist_append(nullptr, fmt::format("<{}>", mail.to).c_str()));
  if (!rcpt) return core::Internal("curl_slist_append failed");
  const std::string mail_from = fmt::format("<{}>", FromAddress(options_.from));
  Upload upload{message};
  Dialogue dialogue;
  char error_buffer[CURL_ERROR_SIZE] = {};
  core::CurlEasy easy(curl_easy_init());
  if (!easy) return core::Internal("curl_easy_init failed");
  CURL* h = easy.get();

  // curl_easy_setopt only fails on out-of-memory or options this libcurl lacks; the transfer
  // reports those too, so the individual results are not checked.
  curl_easy_setopt(h, CURLOPT_URL, options_.url.c_str());
  curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "smtp,smtps");
  curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(h, CURLOPT_TIMEOUT, static_cast<long>(options_.timeout_seconds));
  curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT,
                   static_cast<long>(std::min(options_.timeout_seconds, 15)));
  curl_easy_setopt(h, CURLOPT_USE_SSL, UseSsl(options_.starttls));
  curl_easy_setopt(h, CURLOPT_SSL_VERIFYPEER, 1L);
  curl_easy_setopt(h, CURLOPT_SSL_VERIFYHOST, 2L);
  if (options_.ca_file) curl_easy_setopt(h, CURLOPT_CAINFO, options_.ca_file->c_str());
  if (!options_.username.empty()) {
    curl_easy_setopt(h, CURLOPT_USERNAME, options_.username.c_str());
    curl_easy_setopt(h, CURLOPT_PASSWORD, options_.password.c_str());
  }
  curl_easy_setopt(h, CURLOPT_MAIL_FROM, mail_from.c_str());
  curl_easy_setopt(h, CURLOPT_MAIL_RCPT, rcpt.get());
  curl_easy_setopt(h, CURLOPT_UPLOAD, 1L);
  curl_easy_setopt(h, CURLOPT_READFUNCTION, &ReadCallback);
  curl_easy_setopt(h, CURLOPT_READDATA, &upload);
  curl_easy_setopt(h, CURLOPT_INFILESIZE_LARGE, static_cast<curl_off_t>(message.size()));
  curl_easy_setopt(h, CURLOPT_ERRORBUFFER, error_buffer);
  // The debug callback sees the dialogue; it keeps only verbs and reply lines (see Dialogue).
  curl_easy_setopt(h, CURLOPT_DEBUGFUNCTION, &DebugCallback);
  curl_easy_setopt(h, CURLOPT_DEBUGDATA, &dialogue);
  curl_easy_setopt(h, CURLOPT_VERBOSE, 1L);

  const CURLcode rc = curl_easy_perform(h);
  if (rc == CURLE_OK) return {};

  long code = 0;
  curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &code);
  std::string reason = error_buffer[0] != '\0' ? error_buffer : curl_easy_strerror(rc);
  if (rc == CURLE_OPERATION_TIMEDOUT) {
    reason = fmt::format("no answer within {} s ({})", options_.timeout_seconds, reason);
  }
  if (!dialogue.last_reply.empty()) reason += fmt::format("; server said: {}", dialogue.last_reply);
  if (IsPermanentRejection(code, dialogue.last_command)) {
    return core::Fail(core::ErrorCode::kInvalidArgument, "mail_rejected",
                      fmt::format("SMTP server rejected the mail: {}", reason));
  }
  return core::Fail(core::ErrorCode::kUnavailable, "mail_unavailable",
                    fmt::format("SMTP delivery failed: {}", reason));
}

}  // namespace gpuwerk::mail

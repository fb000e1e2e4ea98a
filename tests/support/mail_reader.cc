#include "tests/support/mail_reader.h"

#include <algorithm>
#include <fstream>
#include <regex>
#include <sstream>

#include "core/encoding.h"

namespace gpuwerk::testing {
namespace {

std::string Lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), ::tolower);
  return s;
}

std::string HeaderValue(const std::string& raw, const std::string& name) {
  std::istringstream in(raw);
  std::string line;
  const std::string prefix = Lower(name) + ":";
  while (std::getline(in, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty()) break;  // end of the header block
    if (Lower(line).rfind(prefix, 0) == 0) {
      std::string v = line.substr(prefix.size());
      while (!v.empty() && v.front() == ' ') v.erase(0, 1);
      return v;
    }
  }
  return "";
}

/// Decodes the first text/plain part (base64 or 7bit).
std::string TextPart(const std::string& raw) {
  size_t at = Lower(raw).find("content-type: text/plain");
  if (at == std::string::npos) return "";
  size_t body = raw.find("\r\n\r\n", at);
  size_t skip = 4;
  if (body == std::string::npos) {
    body = raw.find("\n\n", at);
    skip = 2;
  }
  if (body == std::string::npos) return "";
  std::string part_headers = Lower(raw.substr(at, body - at));
  size_t end = raw.find("\n--", body + skip);
  std::string content =
      raw.substr(body + skip, end == std::string::npos ? std::string::npos : end - body - skip);
  if (part_headers.find("base64") != std::string::npos) {
    std::string compact;
    for (char c : content) {
      if (!std::isspace(static_cast<unsigned char>(c))) compact += c;
    }
    return core::Base64Decode(compact).value_or("");
  }
  return content;
}

}  // namespace

std::vector<std::string> ReceivedMail::Links() const {
  std::vector<std::string> out;
  static const std::regex kUrl(R"(https?://[^\s<>"]+)");
  for (std::sregex_iterator it(text_body.begin(), text_body.end(), kUrl), end; it != end; ++it) {
    out.push_back(it->str());
  }
  return out;
}

std::string ReceivedMail::TokenFromLink(const std::string& path) const {
  for (const auto& link : Links()) {
    if (link.find(path) == std::string::npos) continue;
    auto at = link.find("token=");
    if (at == std::string::npos) continue;
    std::string token = link.substr(at + 6);
    auto amp = token.find('&');
    return amp == std::string::npos ? token : token.substr(0, amp);
  }
  return "";
}

std::vector<ReceivedMail> ReadMails(const std::filesystem::path& dir) {
  std::vector<std::pair<std::filesystem::file_time_type, std::filesystem::path>> files;
  std::error_code ec;
  for (auto it = std::filesystem::recursive_directory_iterator(dir, ec);
       !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
    // The SMTP sink writes each file as NAME.tmp and renames it (smtp_sink.py): a .tmp file may
    // be gone by the time it is looked at, so it is skipped, and so is any file that vanishes
    // between the listing and its time being read.
    std::error_code gone;
    if (!it->is_regular_file(gone) || it->path().parent_path().filename() == "tmp" ||
        it->path().extension() == ".json" || it->path().extension() == ".tmp") {
      continue;
    }
    const auto written = it->last_write_time(gone);
    if (!gone) files.emplace_back(written, it->path());
  }
  std::sort(files.begin(), files.end());
  std::vector<ReceivedMail> out;
  for (const auto& [time, path] : files) {
    std::ifstream in(path, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    ReceivedMail m;
    m.raw = ss.str();
    m.file = path;
    m.to = HeaderValue(m.raw, "To");
    m.subject = HeaderValue(m.raw, "Subject");
    m.message_id = HeaderValue(m.raw, "Message-ID");
    m.text_body = TextPart(m.raw);
    out.push_back(std::move(m));
  }
  return out;
}

std::vector<ReceivedMail> MailsTo(const std::filesystem::path& dir, const std::string& to) {
  std::vector<ReceivedMail> out;
  std::vector<std::string> seen;
  for (auto& m : ReadMails(dir)) {
    if (Lower(m.to).find(Lower(to)) == std::string::npos) continue;
    if (!m.message_id.empty()) {
      if (std::find(seen.begin(), seen.end(), m.message_id) != seen.end()) continue;
      seen.push_back(m.message_id);
    }
    out.push_back(std::move(m));
  }
  return out;
}

}  // namespace gpuwerk::testing

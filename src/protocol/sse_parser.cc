#include "protocol/sse_parser.h"

#include <algorithm>

namespace gpuwerk::protocol {

std::vector<ServerSentEvent> SseParser::Feed(std::string_view bytes) {
  std::vector<ServerSentEvent> out;
  buffer_.append(bytes);
  if (!started_) {
    static constexpr std::string_view kBom = "\xEF\xBB\xBF";
    if (buffer_.size() < kBom.size() && kBom.starts_with(buffer_)) return out;  // wait
    if (buffer_.starts_with(kBom)) buffer_.erase(0, kBom.size());
    started_ = true;
  }
  size_t pos = 0;
  while (true) {
    const size_t end = buffer_.find_first_of("\r\n", pos);
    if (end == std::string::npos) break;
    size_t next = end + 1;
    if (buffer_[end] == '\r') {
      if (end + 1 == buffer_.size()) break;  // a LF may follow in the next bytes
      if (buffer_[end + 1] == '\n') next = end + 2;
    }
    Line(std::string_view(buffer_).substr(pos, end - pos), out);
    pos = next;
  }
  buffer_.erase(0, pos);
  return out;
}

void SseParser::Line(std::string_view line, std::vector<ServerSentEvent>& out) {
  if (line.empty()) {  // dispatch
    if (!data_.empty()) {
      data_.pop_back();  // the last "\n"
      ServerSentEvent event;
      if (!type_.empty()) event.type = type_;
      event.data = std::move(data_);
      event.id = last_id_;
      out.push_back(std::move(event));
    }
    data_.clear();
    type_.clear();
    return;
  }
  if (line.front() == ':') {
    ++comments_;
    return;
  }
  std::string_view field = line, value;
  if (size_t colon = line.find(':'); colon != std::string_view::npos) {
    field = line.substr(0, colon);
    value = line.substr(colon + 1);
    if (value.starts_with(' ')) value.remove_prefix(1);
  }
  if (field == "event") {
    type_ = std::string(value);
  } else if (field == "data") {
    data_.append(value);
    data_ += '\n';
  } else if (field == "id") {
    if (value.find('\0') == std::string_view::npos) last_id_ = std::string(value);
  } else if (field == "retry") {
    if (!value.empty() && value.size() <= 18 &&
        std::all_of(value.begin(), value.end(), [](char ch) { return ch >= '0' && ch <= '9'; })) {
      retry_ms_ = std::stoll(std::string(value));
    }
  }
}

}  // namespace gpuwerk::protocol

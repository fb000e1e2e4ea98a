#include "app/options.h"

#include <toml++/toml.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <sstream>

namespace gpuwerk::app {
namespace {

core::Error ConfigError(std::string message) {
  return core::Error(core::ErrorCode::kInvalidArgument, "invalid_config", std::move(message));
}

template <class... F>
struct Overloaded : F... {
  using F::operator()...;
};

/// Sets `value` from `text`, as given by `source` (a file, a variable) for option `key`.
core::Result<void> SetFromText(const OptionValue& value, const std::string& text,
                               const std::string& source, std::string_view key) {
  auto number = [&]<class Int>(Int* out) -> core::Result<void> {
    errno = 0;
    char* end = nullptr;
    const long long n = std::strtoll(text.c_str(), &end, 10);
    if (text.empty() || *end != '\0' || errno == ERANGE || n < std::numeric_limits<Int>::min() ||
        n > std::numeric_limits<Int>::max()) {
      return std::unexpected(ConfigError(source + ": " + std::string(key) +
                                         " must be a whole number, got '" + text + "'"));
    }
    *out = static_cast<Int>(n);
    return {};
  };
  return std::visit(Overloaded{
                        [&](std::string* out) -> core::Result<void> {
                          *out = text;
                          return {};
                        },
                        [&](std::filesystem::path* out) -> core::Result<void> {
                          *out = text;
                          return {};
                        },
                        [&](int* out) { return number(out); },
                        [&](int64_t* out) { return number(out); },
                        [&](std::vector<std::string>* out) -> core::Result<void> {
                          // One item per line (an SSH public key line has no newline).
                          out->clear();
                          std::istringstream lines(text);
                          for (std::string line; std::getline(lines, line);) {
                            if (!line.empty()) out->push_back(line);
                          }
                          return {};
                        },
                    },
                    value);
}

}  // namespace

std::string BoundOption::Shown() const {
  if (!shown_default.empty()) return std::string(shown_default);
  return std::visit(Overloaded{
                        [](const std::string* v) { return *v; },
                        [](const std::filesystem::path* v) { return v->string(); },
                        [](const int* v) { return std::to_string(*v); },
                        [](const int64_t* v) { return std::to_string(*v); },
                        [](const std::vector<std::string>* v) {
                          std::string all;
                          for (const std::string& item : *v)
                            all += (all.empty() ? "" : ", ") + item;
                          return all;
                        },
                    },
                    value);
}

bool BoundOption::Empty() const {
  return std::visit(Overloaded{[](const std::string* v) { return v->empty(); },
                               [](const std::filesystem::path* v) { return v->empty(); },
                               [](const std::vector<std::string>* v) { return v->empty(); },
                               [](const auto*) { return false; }},
                    value);
}

std::string BoundOption::Flag() const {
  if (!flag.empty()) return std::string(flag);
  std::string out = "--";
  for (char c : key) out += c == '_' ? '-' : c;
  return secret ? out + "-file" : out;
}

std::string BoundOption::RefusedFlag() const {
  const std::string file_flag = Flag();
  if (!secret || !file_flag.ends_with("-file")) return "";
  return file_flag.substr(0, file_flag.size() - 5);
}

core::Result<std::string> ReadSecretFile(const std::filesystem::path& path, std::string_view flag) {
  constexpr std::uintmax_t kMaxBytes = 64 * 1024;
  auto refuse = [&](const std::string& why) -> core::Result<std::string> {
    return std::unexpected(ConfigError(std::string(flag) + " " + path.string() + ": " + why));
  };
  std::ifstream in(path, std::ios::binary);
  if (!in) return refuse("cannot be read");
  std::string text;
  char buf[4096];
  while (in.read(buf, sizeof buf) || in.gcount() > 0) {
    text.append(buf, static_cast<size_t>(in.gcount()));
    if (text.size() > kMaxBytes)
      return refuse("is larger than 64 KiB; it must hold the value alone");
  }
  if (text.ends_with('\n')) text.pop_back();
  if (text.ends_with('\r')) text.pop_back();
  if (text.empty()) return refuse("is empty");
  if (text.find_first_of("\r\n") != std::string::npos) {
    return refuse("holds more than one line; it must hold the value alone");
  }
  return text;
}

std::string BoundOption::EnvName() const {
  std::string out = "GPUWERK_";
  for (char c : key) out += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return out;
}

core::Result<void> LoadConfigFile(const std::filesystem::path& path,
                                  std::span<const BoundOption> options,
                                  std::span<const std::string> ignored) {
  toml::table table;
  try {
    table = toml::parse_file(path.string());
  } catch (const toml::parse_error& err) {
    return std::unexpected(ConfigError(path.string() + ":" +
                                       std::to_string(err.source().begin.line) + ": " +
                                       std::string(err.description())));
  }
  for (const auto& [key, node] : table) {
    const std::string name(key.str());
    const BoundOption* option = nullptr;
    for (const BoundOption& o : options) {
      if (o.key == name) option = &o;
    }
    if (option == nullptr && std::find(ignored.begin(), ignored.end(), name) != ignored.end()) {
      continue;
    }
    if (option == nullptr) {
      return std::unexpected(ConfigError(path.string() + ": unknown option '" + name + "'"));
    }
    const std::string source = path.string() + ": option '" + name + "'";
    if (auto* list = std::get_if<std::vector<std::string>*>(&option->value)) {
      if (auto s = node.value<std::string>()) {
        **list = {*s};
        continue;
      }
      const toml::array* array = node.as_array();
      if (array == nullptr) {
        return std::unexpected(ConfigError(source + " must be a string or an array of strings"));
      }
      std::vector<std::string> items;
      for (const toml::node& item : *array) {
        auto s = item.value<std::string>();
        if (!s) return std::unexpected(ConfigError(source + " must be an array of strings"));
        items.push_back(*s);
      }
      **list = std::move(items);
      continue;
    }
    std::string text;
    if (auto s = node.value<std::string>()) {
      text = *s;
    } else if (auto n = node.value<int64_t>()) {
      text = std::to_string(*n);
    } else {
      return std::unexpected(ConfigError(source + " must be a string or an integer"));
    }
    GPUWERK_TRY(SetFromText(option->value, text, path.string(), name));
  }
  return {};
}

core::Result<void> ApplyEnvironment(std::span<const BoundOption> options) {
  for (const BoundOption& o : options) {
    const std::string name = o.EnvName();
    if (const char* v = std::getenv(name.c_str()))
      GPUWERK_TRY(SetFromText(o.value, v, name, o.key));
  }
  return {};
}

std::string OptionsMarkdown(std::span<const BoundOption> options) {
  std::string out =
      "| flag | environment | TOML key | default | meaning |\n"
      "| --- | --- | --- | --- | --- |\n";
  for (const BoundOption& o : options) {
    const std::string shown = o.Shown();
    std::string meaning(o.help);
    if (!o.details.empty()) {
      if (!meaning.ends_with('.')) meaning += '.';
      meaning += " " + std::string(o.details);
    }
    if (o.required) meaning = "**required.** " + meaning;
    if (o.secret) {
      if (!meaning.ends_with('.')) meaning += '.';
      meaning += " A secret: `" + o.Flag() + "` names a file holding it; `" + o.RefusedFlag() +
                 "` on the command line is refused (anyone on the machine reads argv).";
    }
    out +=
        "| `" + o.Flag() + (o.secret ? " FILE" : "") + "` | `" + o.EnvName() + "` | `" +
        std::string(o.key) + "` | " +
        // A shown_default with blanks is words ("the machine's host name"), not a value.
        (shown.empty()                                                      ? ""
         : !o.shown_default.empty() && shown.find(' ') != std::string::npos ? shown
                                                                            : "`" + shown + "`") +
        " | " + meaning + " |\n";
  }
  return out;
}

core::Result<AddressPort> ParseAddressPort(const std::string& text) {
  const size_t colon = text.rfind(':');
  int port = -1;
  if (colon != std::string::npos) {
    try {
      port = std::stoi(text.substr(colon + 1));
    } catch (const std::exception&) {
      port = -1;
    }
  }
  if (colon == std::string::npos || port < 0 || port > 65535) {
    return core::InvalidArgument("invalid_address", "must be ADDR:PORT, got '" + text + "'");
  }
  AddressPort out{text.substr(0, colon), static_cast<uint16_t>(port)};
  if (out.address.starts_with('[') && out.address.ends_with(']')) {
    out.address = out.address.substr(1, out.address.size() - 2);
  }
  return out;
}

}  // namespace gpuwerk::app

#include "agent/docker_engine.h"

#include <arpa/inet.h>
#include <curl/curl.h>
#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <utility>

#include "core/curl_handles.h"

namespace gpuwerk::agent {
namespace {

using core::ErrorCode;
using nlohmann::json;

/// The most of an answer we read, in bytes; a larger one is a lying or broken engine.
constexpr size_t kMaxResponseBytes = 32 << 20;

struct Sink {
  std::string* body;
  bool overflow = false;
};

size_t WriteCallback(char* data, size_t size, size_t nmemb, void* userp) {
  auto* sink = static_cast<Sink*>(userp);
  const size_t n = size * nmemb;
  if (sink->body->size() + n > kMaxResponseBytes) {
    sink->overflow = true;
    return 0;  // makes curl fail with CURLE_WRITE_ERROR
  }
  sink->body->append(data, n);
  return n;
}

/// Percent-encodes everything but RFC 3986 unreserved characters and those in `keep`.
std::string PercentEncode(std::string_view text, std::string_view keep = "") {
  std::string out;
  out.reserve(text.size());
  for (unsigned char c : text) {
    const bool unreserved = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
                            (c >= '0' && c <= '9') || c == '-' || c == '.' || c == '_' || c == '~';
    if (unreserved || keep.find(static_cast<char>(c)) != std::string_view::npos) {
      out += static_cast<char>(c);
    } else {
      out += fmt::format("%{:02X}", c);
    }
  }
  return out;
}

/// Text from the engine, made safe for a one-line message.
std::string Printable(std::string_view text, size_t max = 300) {
  std::string out;
  for (char c : text.substr(0, max)) {
    out += (static_cast<unsigned char>(c) >= 0x20 && c != 0x7f) ? c : ' ';
  }
  if (text.size() > max) out += "…";
  return out;
}

/// The `message` and podman's `cause` of an engine error answer ({"message": "…"}).
struct EngineMessage {
  std::string message;
  std::string cause;
};

EngineMessage ParseEngineMessage(std::string_view body) {
  EngineMessage out;
  const json j = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_object()) {
    if (auto it = j.find("message"); it != j.end() && it->is_string()) {
      out.message = it->get<std::string>();
    }
    if (auto it = j.find("cause"); it != j.end() && it->is_string()) {
      out.cause = it->get<std::string>();
    }
  }
  if (out.message.empty()) out.message = std::string(body);
  return out;
}

/// A string field, "" when absent or null; throws json::type_error when of another type.
std::string Str(const json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return "";
  return it->get<std::string>();
}

std::map<std::string, std::string> Labels(const json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return {};
  return it->get<std::map<std::string, std::string>>();
}

core::Result<uint16_t> ParsePort(std::string_view text) {
  unsigned value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || value > 65535) {
    return core::Fail(ErrorCode::kUnavailable, "engine_bad_response",
                      fmt::format("container engine sent port \"{}\"", Printable(text, 20)));
  }
  return static_cast<uint16_t>(value);
}

bool IsWildcard(std::string_view address) {
  return address.empty() || address == "0.0.0.0" || address == "::" || address == "[::]" ||
         address == "*";
}

}  // namespace

DockerEngine::DockerEngine(Options options) : options_(std::move(options)) {
  core::CurlGlobalInitOnce();
}

DockerEngine::~DockerEngine() = default;

std::string DockerEngine::Where() const { return "unix://" + options_.socket_path; }

core::Result<DockerEngine::Response> DockerEngine::Call(std::string_view method,
                                                        const std::string& path_and_query,
                                                        std::string_view body,
                                                        std::string_view content_type,
                                                        Timeout timeout) const {
  const Timeout limit = timeout.count() > 0 ? timeout : options_.timeout;
  const std::string_view path =
      std::string_view(path_and_query).substr(0, path_and_query.find('?'));
  core::CurlEasy curl(curl_easy_init());
  if (!curl) return core::Internal("curl_easy_init failed");
  CURL* h = curl.get();

  const std::string url = fmt::format("http://localhost{}{}", kApiPrefix, path_and_query);
  const std::string method_str(method);
  Response response;
  Sink sink{&response.body};
  char errbuf[CURL_ERROR_SIZE] = {};
  curl_slist* raw_headers = nullptr;
  if (!content_type.empty()) {
    raw_headers =
        curl_slist_append(raw_headers, fmt::format("Content-Type: {}", content_type).c_str());
  }
  // No "Expect: 100-continue" round trip before bodies.
  raw_headers = curl_slist_append(raw_headers, "Expect:");
  core::CurlList headers(raw_headers);

  curl_easy_setopt(h, CURLOPT_UNIX_SOCKET_PATH, options_.socket_path.c_str());
  curl_easy_setopt(h, CURLOPT_URL, url.c_str());
  curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, static_cast<long>(limit.count()));
  curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, static_cast<long>(limit.count()));
  curl_easy_setopt(h, CURLOPT_ERRORBUFFER, errbuf);
  curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, WriteCallback);
  curl_easy_setopt(h, CURLOPT_WRITEDATA, &sink);
  curl_easy_setopt(h, CURLOPT_HTTPHEADER, headers.get());
  curl_easy_setopt(h, CURLOPT_PROXY, "");  // never a proxy from the environment
  if (method == "POST" || method == "PUT") {
    curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(body.size()));
    curl_easy_setopt(h, CURLOPT_POSTFIELDS, body.empty() ? "" : body.data());
  }
  if (method != "GET" && method != "POST") {
    curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method_str.c_str());
  }

  const CURLcode rc = curl_easy_perform(h);
  if (rc == CURLE_OPERATION_TIMEDOUT) {
    return core::Fail(ErrorCode::kDeadlineExceeded, "engine_timeout",
                      fmt::format("container engine at {} did not answer {} {} within {} ms",
                                  Where(), method, path, limit.count()));
  }
  if (rc == CURLE_WRITE_ERROR && sink.overflow) {
    return core::Fail(ErrorCode::kUnavailable, "engine_bad_response",
                      fmt::format("container engine at {} sent more than {} bytes to {} {}",
                                  Where(), kMaxResponseBytes, method, path));
  }
  if (rc != CURLE_OK) {
    return core::Fail(ErrorCode::kUnavailable, "engine_unavailable",
                      fmt::format("container engine at {} is not reachable ({} {}): {}", Where(),
                                  method, path, errbuf[0] ? errbuf : curl_easy_strerror(rc)));
  }
  curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &response.status);
  return response;
}

namespace {

/// The Error for an answer a call did not expect. `request` is "METHOD /path" for the message.
core::Error StatusError(long status, std::string_view body, std::string_view request,
                        std::string_view where) {
  const EngineMessage m = ParseEngineMessage(body);
  const std::string text = fmt::format("container engine at {} answered {} to {}: {}", where,
                                       status, request, Printable(m.message));
  if (status == 400) return core::Error(ErrorCode::kInvalidArgument, "engine_bad_request", text);
  if (status == 404) return core::Error(ErrorCode::kNotFound, "container_not_found", text);
  // Docker says 409; podman's compatible service says 500 with this cause.
  if (status == 409 || m.cause == "container state improper") {
    return core::Error(ErrorCode::kFailedPrecondition, "container_conflict", text);
  }
  return core::Error(ErrorCode::kUnavailable, "engine_error", text);
}

core::Error BadResponse(std::string_view request, std::string_view where, std::string_view why) {
  return core::Error(ErrorCode::kUnavailable, "engine_bad_response",
                     fmt::format("container engine at {} sent an unexpected answer to {}: {}",
                                 where, request, Printable(why)));
}

/// Fills an inspect answer (`GET /containers/{id}/json`) into a ContainerInfo; throws
/// json::exception on a type mismatch.
core::Result<ContainerInfo> InfoFromInspect(const json& j) {
  ContainerInfo info;
  info.id = j.at("Id").get<std::string>();
  info.name = Str(j, "Name");
  if (info.name.starts_with('/')) info.name.erase(0, 1);
  if (auto config = j.find("Config"); config != j.end() && config->is_object()) {
    info.image = Str(*config, "Image");
    info.labels = Labels(*config, "Labels");
  }
  const json& state = j.at("State");
  info.state = ParseContainerState(Str(state, "Status"));
  if (auto it = state.find("ExitCode"); it != state.end() && !it->is_null()) {
    info.exit_code = it->get<int>();
  }
  info.started_at = Str(state, "StartedAt");
  info.finished_at = Str(state, "FinishedAt");
  if (auto it = state.find("OOMKilled"); it != state.end() && !it->is_null()) {
    info.oom_killed = it->get<bool>();
  }
  info.error = Str(state, "Error");
  if (auto host = j.find("HostConfig"); host != j.end() && host->is_object()) {
    auto number = [&](const char* key) -> int64_t {
      auto it = host->find(key);
      return it != host->end() && it->is_number_integer() ? it->get<int64_t>() : 0;
    };
    info.memory_bytes = number("Memory");
    info.nano_cpus = number("NanoCpus");
    info.pids_limit = number("PidsLimit");
  }
  if (auto ns = j.find("NetworkSettings"); ns != j.end() && ns->is_object()) {
    if (auto ports = ns->find("Ports"); ports != ns->end() && ports->is_object()) {
      if (auto ssh = ports->find("22/tcp");
          ssh != ports->end() && ssh->is_array() && !ssh->empty()) {
        const std::string host_port = Str(ssh->at(0), "HostPort");
        if (!host_port.empty()) {
          GPUWERK_ASSIGN_OR_RETURN(info.ssh_port, ParsePort(host_port));
        }
      }
    }
  }
  return info;
}

/// Fills one entry of a list answer (`GET /containers/json`); throws json::exception on a type
/// mismatch.
ContainerInfo InfoFromListEntry(const json& j) {
  ContainerInfo info;
  info.id = j.at("Id").get<std::string>();
  if (auto names = j.find("Names"); names != j.end() && names->is_array() && !names->empty()) {
    info.name = names->at(0).get<std::string>();
    if (info.name.starts_with('/')) info.name.erase(0, 1);
  }
  info.image = Str(j, "Image");
  info.labels = Labels(j, "Labels");
  info.state = ParseContainerState(Str(j, "State"));
  if (auto ports = j.find("Ports"); ports != j.end() && ports->is_array()) {
    for (const json& p : *ports) {
      if (p.value("PrivatePort", 0) == 22 && p.value("Type", std::string()) == "tcp" &&
          p.contains("PublicPort")) {
        const int port = p.at("PublicPort").get<int>();
        if (port > 0 && port <= 65535) info.ssh_port = static_cast<uint16_t>(port);
        break;
      }
    }
  }
  return info;
}

}  // namespace

core::Result<void> DockerEngine::Ping(Timeout timeout) {
  GPUWERK_ASSIGN_OR_RETURN(Response r, Call("GET", "/_ping", "", "", timeout));
  if (r.status != 200) return core::Fail(StatusError(r.status, r.body, "GET /_ping", Where()));
  return {};
}

core::Result<EngineVersion> DockerEngine::Version(Timeout timeout) {
  constexpr std::string_view kRequest = "GET /version";
  GPUWERK_ASSIGN_OR_RETURN(Response r, Call("GET", "/version", "", "", timeout));
  if (r.status != 200) return core::Fail(StatusError(r.status, r.body, kRequest, Where()));
  try {
    const json j = json::parse(r.body);
    EngineVersion v;
    v.version = Str(j, "Version");
    v.api_version = Str(j, "ApiVersion");
    v.os = Str(j, "Os");
    v.arch = Str(j, "Arch");
    v.kernel_version = Str(j, "KernelVersion");
    if (auto p = j.find("Platform"); p != j.end() && p->is_object()) v.platform = Str(*p, "Name");
    return v;
  } catch (const json::exception& e) {
    return core::Fail(BadResponse(kRequest, Where(), e.what()));
  }
}

core::Result<std::string> DockerEngine::CreateContainer(const ContainerSpec& spec,
                                                        Timeout timeout) {
  if (spec.image.empty()) {
    return core::InvalidArgument("invalid_container_spec", "a container needs an image");
  }
  if (spec.memory_bytes < 0 || spec.nano_cpus < 0 || spec.pids_limit < 0 ||
      spec.shm_size_bytes < 0) {
    return core::InvalidArgument("invalid_container_spec", "limits must not be negative");
  }
  if (IsWildcard(spec.ssh_bind_address)) {
    return core::InvalidArgument(
        "public_ssh_bind",
        fmt::format("sshd must be published on a specific internal address, not \"{}\"",
                    Printable(spec.ssh_bind_address, 64)));
  }
  for (const BindMount& b : spec.binds) {
    for (const std::string* path : {&b.source, &b.target}) {
      const bool bad_char = std::any_of(path->begin(), path->end(), [](char c) {
        return c == ':' || c == ',' || static_cast<unsigned char>(c) < 0x20 || c == 0x7f;
      });
      if (!path->starts_with('/') || bad_char) {
        return core::InvalidArgument(
            "invalid_bind",
            fmt::format("a bind mount needs absolute paths without ':', ',' or control "
                        "characters: \"{}\"",
                        Printable(*path, 200)));
      }
    }
  }
  for (const std::string& v : spec.volumes) {
    if (!v.starts_with('/') || std::any_of(v.begin(), v.end(), [](char c) {
          return c == ':' || static_cast<unsigned char>(c) < 0x20 || c == 0x7f;
        })) {
      return core::InvalidArgument(
          "invalid_container_spec",
          fmt::format("a volume needs an absolute path without ':' or control characters: \"{}\"",
                      Printable(v, 200)));
    }
  }
  for (const Ulimit& u : spec.ulimits) {
    if (u.name.empty() || u.soft < -1 || u.hard < -1) {
      return core::InvalidArgument("invalid_container_spec",
                                   "a ulimit needs a name and limits of -1 (unlimited) or more");
    }
  }
  json env = json::array();
  bool has_visible_devices = false;
  for (const std::string& e : spec.env) {
    env.push_back(e);
    if (e.starts_with("NVIDIA_VISIBLE_DEVICES=")) has_visible_devices = true;
  }
  if (spec.gpu && !has_visible_devices) env.push_back("NVIDIA_VISIBLE_DEVICES=all");

  json host_config = {
      {"PortBindings",
       {{"22/tcp", json::array({{{"HostIp", spec.ssh_bind_address}, {"HostPort", ""}}})}}},
      {"RestartPolicy", {{"Name", spec.restart_policy}}},
  };
  if (spec.privileged) {
    host_config["Privileged"] = true;
  } else {
    host_config["CapDrop"] = json::array({"ALL"});
    host_config["CapAdd"] = spec.capabilities;
    if (spec.no_new_privileges) host_config["SecurityOpt"] = json::array({"no-new-privileges"});
  }
  if (spec.shm_size_bytes > 0) host_config["ShmSize"] = spec.shm_size_bytes;
  if (!spec.ulimits.empty()) {
    json ulimits = json::array();
    for (const Ulimit& u : spec.ulimits) {
      ulimits.push_back({{"Name", u.name}, {"Soft", u.soft}, {"Hard", u.hard}});
    }
    host_config["Ulimits"] = std::move(ulimits);
  }
  if (spec.memory_bytes > 0) {
    host_config["Memory"] = spec.memory_bytes;
    // No swap beyond the memory limit (Docker's default would allow as much swap again).
    host_config["MemorySwap"] = spec.memory_bytes;
  }
  if (spec.nano_cpus > 0) host_config["NanoCpus"] = spec.nano_cpus;
  if (spec.pids_limit > 0) host_config["PidsLimit"] = spec.pids_limit;
  if (!spec.runtime.empty()) {
    host_config["Runtime"] = spec.runtime;
  } else if (spec.gpu) {
    host_config["Runtime"] = "nvidia";
  }
  if (!spec.network.empty()) host_config["NetworkMode"] = spec.network;
  if (!spec.binds.empty()) {
    json binds = json::array();
    for (const BindMount& b : spec.binds) {
      binds.push_back(b.source + ":" + b.target + (b.read_only ? ":ro" : ""));
    }
    host_config["Binds"] = std::move(binds);
  }
  if (!spec.extra_hosts.empty()) host_config["ExtraHosts"] = spec.extra_hosts;
  json body = {
      {"Image", spec.image},
      {"Labels", spec.labels},
      {"Env", std::move(env)},
      {"ExposedPorts", {{"22/tcp", json::object()}}},
      {"HostConfig", std::move(host_config)},
  };
  if (!spec.hostname.empty()) body["Hostname"] = spec.hostname;
  if (!spec.cmd.empty()) body["Cmd"] = spec.cmd;
  if (!spec.volumes.empty()) {
    json volumes = json::object();
    for (const std::string& v : spec.volumes) volumes[v] = json::object();
    body["Volumes"] = std::move(volumes);
  }

  std::string path = "/containers/create";
  if (!spec.name.empty()) path += "?name=" + PercentEncode(spec.name);
  constexpr std::string_view kRequest = "POST /containers/create";
  GPUWERK_ASSIGN_OR_RETURN(Response r,
                           Call("POST", path, body.dump(), "application/json", timeout));
  if (r.status == 404) {
    return core::Fail(ErrorCode::kFailedPrecondition, "image_not_found",
                      fmt::format("image \"{}\" is not on the container engine at {}; build or "
                                  "load it there first (engine: {})",
                                  Printable(spec.image, 200), Where(),
                                  Printable(ParseEngineMessage(r.body).message)));
  }
  if (r.status == 409 ||
      (r.status == 500 && ParseEngineMessage(r.body).cause == "that name is already in use")) {
    return core::Fail(ErrorCode::kAlreadyExists, "container_exists",
                      fmt::format("a container named \"{}\" already exists on the engine at {}",
                                  Printable(spec.name, 200), Where()));
  }
  if (r.status != 201 && r.status != 200) {
    return core::Fail(StatusError(r.status, r.body, kRequest, Where()));
  }
  try {
    std::string id = json::parse(r.body).at("Id").get<std::string>();
    if (id.empty()) return core::Fail(BadResponse(kRequest, Where(), "empty Id"));
    return id;
  } catch (const json::exception& e) {
    return core::Fail(BadResponse(kRequest, Where(), e.what()));
  }
}

core::Result<void> DockerEngine::PutArchive(std::string_view id, std::string_view path,
                                            std::string_view tar_bytes, Timeout timeout) {
  if (id.empty()) return core::InvalidArgument("invalid_container_id", "container id is empty");
  if (path.empty()) return core::InvalidArgument("invalid_argument", "archive path is empty");
  const std::string request = fmt::format("PUT /containers/{}/archive", Printable(id, 80));
  GPUWERK_ASSIGN_OR_RETURN(Response r, Call("PUT",
                                            fmt::format("/containers/{}/archive?path={}",
                                                        PercentEncode(id), PercentEncode(path)),
                                            tar_bytes, "application/x-tar", timeout));
  if (r.status == 200 || r.status == 204) return {};
  return core::Fail(StatusError(r.status, r.body, request, Where()));
}

core::Result<std::string> DockerEngine::GetArchive(std::string_view id, std::string_view path,
                                                   Timeout timeout) {
  if (id.empty()) return core::InvalidArgument("invalid_container_id", "container id is empty");
  if (path.empty()) return core::InvalidArgument("invalid_argument", "archive path is empty");
  const std::string request = fmt::format("GET /containers/{}/archive", Printable(id, 80));
  GPUWERK_ASSIGN_OR_RETURN(Response r, Call("GET",
                                            fmt::format("/containers/{}/archive?path={}",
                                                        PercentEncode(id), PercentEncode(path)),
                                            "", "", timeout));
  if (r.status == 200) return std::move(r.body);
  return core::Fail(StatusError(r.status, r.body, request, Where()));
}

core::Result<void> DockerEngine::StartContainer(std::string_view id, Timeout timeout) {
  if (id.empty()) return core::InvalidArgument("invalid_container_id", "container id is empty");
  const std::string request = fmt::format("POST /containers/{}/start", Printable(id, 80));
  GPUWERK_ASSIGN_OR_RETURN(
      Response r,
      Call("POST", fmt::format("/containers/{}/start", PercentEncode(id)), "", "", timeout));
  if (r.status == 204 || r.status == 304 || r.status == 200) return {};  // 304: already running
  return core::Fail(StatusError(r.status, r.body, request, Where()));
}

core::Result<void> DockerEngine::RestartContainer(std::string_view id, int stop_timeout_seconds,
                                                  Timeout timeout) {
  if (id.empty()) return core::InvalidArgument("invalid_container_id", "container id is empty");
  if (stop_timeout_seconds < 0) stop_timeout_seconds = 0;
  const std::string request = fmt::format("POST /containers/{}/restart", Printable(id, 80));
  const Timeout base = timeout.count() > 0 ? timeout : options_.timeout;
  GPUWERK_ASSIGN_OR_RETURN(
      Response r,
      Call("POST",
           fmt::format("/containers/{}/restart?t={}", PercentEncode(id), stop_timeout_seconds), "",
           "", base + std::chrono::seconds(stop_timeout_seconds)));
  if (r.status == 204 || r.status == 200) return {};
  return core::Fail(StatusError(r.status, r.body, request, Where()));
}

core::Result<ContainerInfo> DockerEngine::InspectContainer(std::string_view id, Timeout timeout) {
  if (id.empty()) return core::InvalidArgument("invalid_container_id", "container id is empty");
  const std::string request = fmt::format("GET /containers/{}/json", Printable(id, 80));
  GPUWERK_ASSIGN_OR_RETURN(
      Response r,
      Call("GET", fmt::format("/containers/{}/json", PercentEncode(id)), "", "", timeout));
  if (r.status != 200) return core::Fail(StatusError(r.status, r.body, request, Where()));
  try {
    return InfoFromInspect(json::parse(r.body));
  } catch (const json::exception& e) {
    return core::Fail(BadResponse(request, Where(), e.what()));
  }
}

core::Result<void> DockerEngine::RemoveContainer(std::string_view id, bool force, Timeout timeout) {
  if (id.empty()) return core::InvalidArgument("invalid_container_id", "container id is empty");
  const std::string request = fmt::format("DELETE /containers/{}", Printable(id, 80));
  GPUWERK_ASSIGN_OR_RETURN(Response r,
                           Call("DELETE",
                                fmt::format("/containers/{}?force={}&v=true", PercentEncode(id),
                                            force ? "true" : "false"),
                                "", "", timeout));
  if (r.status == 204 || r.status == 200 || r.status == 404) return {};
  return core::Fail(StatusError(r.status, r.body, request, Where()));
}

core::Result<std::vector<ContainerInfo>> DockerEngine::ListContainers(
    const std::map<std::string, std::string>& label_filter, Timeout timeout) {
  constexpr std::string_view kRequest = "GET /containers/json";
  std::string path = "/containers/json?all=true";
  if (!label_filter.empty()) {
    json labels = json::array();
    for (const auto& [key, value] : label_filter) {
      labels.push_back(value.empty() ? key : key + "=" + value);
    }
    path += "&filters=" + PercentEncode(json{{"label", labels}}.dump());
  }
  GPUWERK_ASSIGN_OR_RETURN(Response r, Call("GET", path, "", "", timeout));
  if (r.status != 200) return core::Fail(StatusError(r.status, r.body, kRequest, Where()));
  try {
    const json j = json::parse(r.body);
    std::vector<ContainerInfo> out;
    if (j.is_null()) return out;
    for (const json& entry : j.get_ref<const json::array_t&>()) {
      out.push_back(InfoFromListEntry(entry));
    }
    return out;
  } catch (const json::exception& e) {
    return core::Fail(BadResponse(kRequest, Where(), e.what()));
  }
}

core::Result<void> DockerEngine::CreateNetwork(const NetworkSpec& spec, Timeout timeout) {
  if (spec.name.empty() || spec.name.size() > 15) {
    return core::InvalidArgument(
        "invalid_network_spec",
        fmt::format("a network name is 1 to 15 characters (it names the bridge): \"{}\"",
                    Printable(spec.name, 64)));
  }
  constexpr std::string_view kRequest = "POST /networks/create";
  const json body = {
      {"Name", spec.name},
      {"Driver", "bridge"},
      {"CheckDuplicate", true},
      {"Labels", spec.labels},
      {"Options", {{"com.docker.network.bridge.name", spec.name}}},
  };
  GPUWERK_ASSIGN_OR_RETURN(
      Response r, Call("POST", "/networks/create", body.dump(), "application/json", timeout));
  if (r.status == 201 || r.status == 200) return {};
  const EngineMessage m = ParseEngineMessage(r.body);
  if (r.status == 409 || m.cause == "network already exists" ||
      m.message.find("already exists") != std::string::npos) {
    return core::Fail(ErrorCode::kAlreadyExists, "network_exists",
                      fmt::format("a network named \"{}\" already exists on the engine at {}",
                                  Printable(spec.name, 64), Where()));
  }
  return core::Fail(StatusError(r.status, r.body, kRequest, Where()));
}

core::Result<void> DockerEngine::ConnectNetwork(std::string_view id, std::string_view network,
                                                std::string_view address, Timeout timeout) {
  in6_addr v6{};
  in_addr v4{};
  const std::string addr(address);
  const bool is_v4 = ::inet_pton(AF_INET, addr.c_str(), &v4) == 1;
  if (!is_v4 && ::inet_pton(AF_INET6, addr.c_str(), &v6) != 1) {
    return core::InvalidArgument("invalid_address",
                                 fmt::format("not an IP address: \"{}\"", Printable(address, 64)));
  }
  if (id.empty() || network.empty()) {
    return core::InvalidArgument("invalid_argument", "container id or network name is empty");
  }
  const std::string request = fmt::format("POST /networks/{}/connect", Printable(network, 80));
  const json body = {
      {"Container", std::string(id)},
      {"EndpointConfig", {{"IPAMConfig", {{is_v4 ? "IPv4Address" : "IPv6Address", addr}}}}},
  };
  GPUWERK_ASSIGN_OR_RETURN(Response r,
                           Call("POST", fmt::format("/networks/{}/connect", PercentEncode(network)),
                                body.dump(), "application/json", timeout));
  if (r.status == 200 || r.status == 204) return {};
  if (r.status == 404) {
    return core::Fail(ErrorCode::kNotFound, "network_not_found",
                      fmt::format("container engine at {} answered 404 to {}: {}", Where(), request,
                                  Printable(ParseEngineMessage(r.body).message)));
  }
  return core::Fail(StatusError(r.status, r.body, request, Where()));
}

core::Result<void> DockerEngine::RemoveNetwork(std::string_view name, Timeout timeout) {
  if (name.empty()) return core::InvalidArgument("invalid_argument", "network name is empty");
  const std::string request = fmt::format("DELETE /networks/{}", Printable(name, 80));
  GPUWERK_ASSIGN_OR_RETURN(
      Response r,
      Call("DELETE", fmt::format("/networks/{}", PercentEncode(name)), "", "", timeout));
  if (r.status == 204 || r.status == 200 || r.status == 404) return {};
  const EngineMessage m = ParseEngineMessage(r.body);
  if (r.status == 409 || m.cause == "network is being used") {
    return core::Fail(ErrorCode::kFailedPrecondition, "network_in_use",
                      fmt::format("container engine at {} answered {} to {}: {}", Where(), r.status,
                                  request, Printable(m.message)));
  }
  return core::Fail(StatusError(r.status, r.body, request, Where()));
}

core::Result<std::vector<NetworkInfo>> DockerEngine::ListNetworks(
    const std::map<std::string, std::string>& label_filter, Timeout timeout) {
  constexpr std::string_view kRequest = "GET /networks";
  std::string path = "/networks";
  if (!label_filter.empty()) {
    json labels = json::array();
    for (const auto& [key, value] : label_filter) {
      labels.push_back(value.empty() ? key : key + "=" + value);
    }
    path += "?filters=" + PercentEncode(json{{"label", labels}}.dump());
  }
  GPUWERK_ASSIGN_OR_RETURN(Response r, Call("GET", path, "", "", timeout));
  if (r.status != 200) return core::Fail(StatusError(r.status, r.body, kRequest, Where()));
  try {
    const json j = json::parse(r.body);
    std::vector<NetworkInfo> out;
    if (j.is_null()) return out;
    for (const json& entry : j.get_ref<const json::array_t&>()) {
      out.push_back(
          {.id = Str(entry, "Id"), .name = Str(entry, "Name"), .labels = Labels(entry, "Labels")});
    }
    return out;
  } catch (const json::exception& e) {
    return core::Fail(BadResponse(kRequest, Where(), e.what()));
  }
}

core::Result<bool> DockerEngine::ImageExists(std::string_view name, Timeout timeout) {
  if (name.empty()) return core::InvalidArgument("invalid_argument", "image name is empty");
  const std::string request = fmt::format("GET /images/{}/json", Printable(name, 200));
  // Image references keep their "/", ":" and "@": the engine routes /images/{name}/json on them.
  GPUWERK_ASSIGN_OR_RETURN(
      Response r,
      Call("GET", fmt::format("/images/{}/json", PercentEncode(name, "/:@")), "", "", timeout));
  if (r.status == 200) return true;
  if (r.status == 404) return false;
  return core::Fail(StatusError(r.status, r.body, request, Where()));
}

}  // namespace gpuwerk::agent

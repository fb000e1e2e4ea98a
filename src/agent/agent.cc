#include "agent/agent.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <fstream>
#include <set>
#include <system_error>
#include <thread>
#include <utility>

#include "agent/authorized_keys.h"
#include "agent/host_key.h"
#include "agent/login_probe.h"
#include "agent/network_isolation.h"
#include "agent/probe_process.h"
#include "core/encoding.h"
#include "core/strings.h"

namespace gpuwerk::agent {
namespace {

using Steady = std::chrono::steady_clock;

constexpr const char* kStateFile = "agent-state.json";
/// Transient create failures in a row before the create is reported as failed for good.
constexpr int kCreateAttempts = 3;
/// Drift reports kept while the server cannot be reached; the oldest go first.
constexpr size_t kMaxPendingDrift = 256;
/// How long after its own start or restart of a container the agent takes a stop or a new start
/// of it for its own (an engine may carry out a restart after answering it).
constexpr auto kOwnStartGrace = std::chrono::seconds(30);

/// One drift report in words, for the agent's log.
std::string DescribeDrift(const DriftReport& d) {
  std::string s = "container " + d.container_id + " of instance " + d.instance_id + " node " +
                  std::to_string(d.node_index) + " was " + d.kind + " outside gpuwerk";
  if (d.kind == "stopped") {
    s += " (exit code " + std::to_string(d.exit_code) + (d.oom_killed ? ", OOM killed" : "") +
         ", finished " + d.at + ")";
  }
  if (d.kind == "changed") {
    std::string what;
    for (const auto& c : d.changes) what += (what.empty() ? "" : ", ") + c;
    s += " (" + what + ")";
  }
  return s;
}

std::string Describe(const core::Error& e) { return e.api_code + ": " + e.message; }

/// The status reason of a container whose sshd refused the relay key (case C07), while the
/// agent writes the file again: `file` is where the container's keys are (its read-only
/// kAgentKeysFileInContainer, or /root/.ssh/authorized_keys for a container made before it).
std::string RelayKeyMissing(std::string_view file) {
  return "the SSH relay cannot log in to this instance: the relay credential is "
         "missing from " +
         std::string(file) + "; gpuwerk is putting it back";
}

/// The same when writing the file failed with `code` (an engine's or the agent's own; never text
/// from the container).
std::string RelayKeyNotPutBack(std::string_view file, const std::string& code) {
  return "the SSH relay cannot log in to this instance: the relay credential is "
         "missing from " +
         std::string(file) + ", and putting it back failed (" + code +
         "); gpuwerk tries again every round";
}

/// The status reason when sshd refuses the relay key although the agent's read-only file holds
/// it: something in the container changed sshd (its configuration, or another sshd).
constexpr const char* kRelayKeyRefused =
    "the SSH relay cannot log in to this instance: its sshd refuses the relay credential, which "
    "gpuwerk's read-only /etc/ssh/gpuwerk/authorized_keys holds (was sshd's configuration "
    "changed in the container?); gpuwerk checks again every round";

/// Whether container `c` was created with the agent's read-only keys mount (kKeysLabel).
bool HasKeysMount(const ContainerInfo& c) {
  auto it = c.labels.find(std::string(kKeysLabel));
  return it != c.labels.end() && it->second == "bind";
}

/// The file in container `c` that holds the keys the agent manages.
std::string_view KeysFileIn(const ContainerInfo& c) {
  return HasKeysMount(c) ? kAgentKeysFileInContainer
                         : std::string_view("/root/.ssh/authorized_keys");
}

/// The digest of a container's key lines, to tell whether its authorized_keys is current.
std::string KeysDigest(const std::vector<std::string>& lines) {
  std::string all;
  for (const auto& l : lines) all += l + "\n";
  return core::HexEncode(core::Sha256(all));
}

}  // namespace

void LogIsolationRepairs(std::string_view component, const std::vector<IsolationRepair>& repairs,
                         bool install) {
  for (const IsolationRepair& r : repairs) {
    // The sentence is KeepNetworkIsolation's, with another program's rule escaped in it.
    const auto level = install && r.kind == IsolationRepair::Kind::kJumpInserted
                           ? spdlog::level::info
                           : spdlog::level::warn;
    spdlog::log(level, "{}: instance network filter ({}): {}", component, r.ipv6 ? "IPv6" : "IPv4",
                r.what);
  }
}

Agent::Agent(AgentOptions options, ContainerEngine& engine, SyncClient& client, Inventory inventory)
    : options_(std::move(options)),
      engine_(engine),
      client_(client),
      inventory_(std::move(inventory)) {
  keys_root_ = options_.keys_dir;
  if (keys_root_.empty() && !options_.state_dir.empty()) keys_root_ = options_.state_dir / "keys";
  if (!keys_root_.empty()) {
    std::error_code ec;
    keys_root_ = std::filesystem::absolute(keys_root_, ec).lexically_normal();
  }
}

Agent::~Agent() {
  if (!temporary_keys_root_.empty()) {
    std::error_code ec;
    std::filesystem::remove_all(temporary_keys_root_, ec);
  }
}

core::Result<AgentKeysPaths> Agent::KeysPaths(std::string_view container_name) {
  if (keys_root_.empty()) {
    // No keys_dir and no state_dir (state in memory only): a directory of this agent's own.
    std::string tmpl =
        (std::filesystem::temp_directory_path() / "gpuwerk-agent-keys-XXXXXX").string();
    if (::mkdtemp(tmpl.data()) == nullptr) {
      return core::Fail(
          core::ErrorCode::kUnavailable, "authorized_keys_write_failed",
          "cannot make a keys directory under " + std::filesystem::temp_directory_path().string());
    }
    keys_root_ = temporary_keys_root_ = tmpl;
    spdlog::info("agent: no state directory: containers' keys are kept in {}", tmpl);
  }
  return AgentKeysPathsFor(keys_root_, container_name);
}

core::Result<void> Agent::WriteKeys(const ContainerInfo& c, const std::vector<std::string>& lines) {
  if (!HasKeysMount(c)) {
    // Made by an agent before the read-only mount: the engine's archive upload, nothing run in
    // the container.
    return WriteAuthorizedKeysByArchive(engine_, c.id, lines, options_.engine_timeout);
  }
  GPUWERK_ASSIGN_OR_RETURN(AgentKeysPaths paths, KeysPaths(c.name));
  return WriteAgentKeys(paths, lines);
}

std::map<std::string, std::string> Agent::LabelFilter() const {
  auto filter = options_.extra_labels;
  filter[std::string(kInstanceLabel)] = "";
  return filter;
}

bool Agent::Owns(const ContainerInfo& c) const {
  auto host = c.labels.find(std::string(kHostLabel));
  if (host != c.labels.end()) return host->second == host_id_;
  // Made before containers carried kHostLabel: ours when a desired entry of this host names it
  // (adopted as it is, files kept); otherwise it may be another host's, and is left alone.
  auto instance = c.labels.find(std::string(kInstanceLabel));
  return instance != c.labels.end() &&
         std::any_of(desired_.begin(), desired_.end(), [&](const DesiredContainer& d) {
           return d.container_name == c.name && d.instance_id == instance->second;
         });
}

void Agent::LoadState() {
  if (options_.state_dir.empty()) return;
  std::ifstream in(options_.state_dir / kStateFile);
  if (!in) return;
  auto j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  auto gens = j.is_object() ? j.find("restart_generations") : j.end();
  if (!j.is_object() || gens == j.end() || !gens->is_object()) {
    spdlog::warn("agent: ignoring unreadable state file {}",
                 (options_.state_dir / kStateFile).string());
    return;
  }
  for (const auto& [id, gen] : gens->items()) {
    if (gen.is_number_integer()) records_[id].applied_generation = gen.get<int64_t>();
  }
  if (auto keys = j.find("authorized_keys_sha256"); keys != j.end() && keys->is_object()) {
    for (const auto& [id, digest] : keys->items()) {
      if (digest.is_string()) records_[id].keys_digest = digest.get<std::string>();
    }
  }
  // "instance/node" → container id, as last observed: a container removed while the agent was
  // not running is still told as removed.
  if (auto known = j.find("containers"); known != j.end() && known->is_object()) {
    for (const auto& [key, id] : known->items()) {
      const size_t slash = key.rfind('/');
      if (!id.is_string() || slash == std::string::npos) continue;
      int node = 0;
      const char* begin = key.data() + slash + 1;
      const char* end = key.data() + key.size();
      auto [ptr, ec] = std::from_chars(begin, end, node);
      if (ec != std::errc() || ptr != end || begin == end) continue;
      known_[{key.substr(0, slash), node}] = {.container_id = id.get<std::string>(),
                                              .id_only = true};
    }
  }
}

void Agent::SaveState() {
  if (options_.state_dir.empty()) return;
  std::error_code ec;
  std::filesystem::create_directories(options_.state_dir, ec);
  const auto path = options_.state_dir / kStateFile;
  const auto tmp = options_.state_dir / (std::string(kStateFile) + ".tmp");
  {
    std::map<std::string, std::string> keys_written;
    for (const auto& [id, r] : records_) {
      if (r.keys_digest) keys_written[id] = *r.keys_digest;
    }
    std::map<std::string, std::string> containers;
    for (const auto& [key, k] : known_) {
      containers[key.instance_id + "/" + std::to_string(key.node_index)] = k.container_id;
    }
    std::ofstream out(tmp, std::ios::trunc);
    out << nlohmann::json{{"restart_generations", Applied()},
                          {"authorized_keys_sha256", keys_written},
                          {"containers", containers}}
               .dump()
        << "\n";
    if (!out) {
      spdlog::error("agent: cannot write {}", tmp.string());
      return;
    }
  }
  std::filesystem::rename(tmp, path, ec);
  if (ec) spdlog::error("agent: cannot write {}: {}", path.string(), ec.message());
}

void Agent::RecordGeneration(const std::string& id, int64_t generation) {
  auto& applied = records_[id].applied_generation;
  if (applied && *applied >= generation) return;
  applied = generation;
  SaveState();
}

AppliedGenerations Agent::Applied() const {
  AppliedGenerations applied;
  for (const auto& [id, r] : records_) {
    if (r.applied_generation) applied[id] = *r.applied_generation;
  }
  return applied;
}

bool Agent::Ready(const std::string& id) const {
  auto it = records_.find(id);
  return it != records_.end() && it->second.ssh_ready;
}

bool Agent::SshBannerSeen(const std::string& host, uint16_t port,
                          std::chrono::milliseconds timeout) {
  if (port == 0) return false;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  if (::inet_pton(AF_INET, host.c_str(), &addr.sin_addr) != 1) return false;
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return false;
  const auto deadline = Steady::now() + timeout;
  auto left_ms = [&] {
    return static_cast<int>(std::max<int64_t>(
        0,
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Steady::now()).count()));
  };
  bool seen = false;
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 ||
      errno == EINPROGRESS) {
    std::string got;
    pollfd p{fd, POLLIN, 0};
    while (!seen && got.size() < 256) {
      const int ms = left_ms();
      if (ms == 0 || ::poll(&p, 1, ms) <= 0) break;
      char buf[256];
      const ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
      if (n <= 0) break;  // refused (the connect failed), reset, or closed
      got.append(buf, static_cast<size_t>(n));
      if (got.size() >= 8) seen = got.starts_with("SSH-2.0-");
      if (got.size() >= 8 && !seen) break;
    }
  }
  ::close(fd);
  return seen;
}

void Agent::Observe() {
  auto list = engine_.ListContainers(LabelFilter(), options_.engine_timeout);
  if (!list) {
    const std::string error = Describe(list.error());
    if (engine_ok_ || engine_error_ != error) spdlog::error("agent: container engine: {}", error);
    engine_ok_ = false;
    engine_error_ = error;
    return;  // keep observed_: reported as unknown
  }
  if (!engine_ok_ && !engine_error_.empty()) spdlog::info("agent: container engine is back");
  engine_ok_ = true;
  engine_error_.clear();
  std::vector<ContainerInfo> observed;
  for (const auto& c : *list) {
    if (!Owns(c)) continue;
    auto info = engine_.InspectContainer(c.id, options_.engine_timeout);
    if (info) {
      observed.push_back(std::move(*info));
    } else if (info.error().api_code != "container_not_found") {
      ContainerInfo unknown = c;  // C11: a state we cannot confirm is unknown
      unknown.state = ContainerState::kUnknown;
      unknown.error = Describe(info.error());
      observed.push_back(std::move(unknown));
    }
  }
  observed_ = std::move(observed);
  // What changed since the last observation that the agent did not do (docs/agent-protocol.md
  // "Drift"): reported in this round's sync.
  const auto now = Steady::now();
  std::erase_if(started_, [&](const auto& t) { return now - t.second > kOwnStartGrace; });
  std::set<std::string> started_lately;
  for (const auto& [id, at] : started_) started_lately.insert(id);
  for (auto& d : DetectDrift(known_, observed_, touched_, started_lately, desired_)) {
    spdlog::warn("agent: {}", DescribeDrift(d));
    drift_.push_back(std::move(d));
  }
  if (drift_.size() > kMaxPendingDrift) {
    drift_.erase(drift_.begin(), drift_.end() - static_cast<std::ptrdiff_t>(kMaxPendingDrift));
  }
  touched_.clear();
  // Forget containers that are gone, and what only holds for a round or a running container.
  bool pruned = false;
  for (auto it = records_.begin(); it != records_.end();) {
    const bool exists = std::any_of(observed_.begin(), observed_.end(),
                                    [&](const ContainerInfo& c) { return c.id == it->first; });
    if (exists) {
      it->second.ssh_ready = false;
      it->second.login_error.clear();
      ++it;
    } else {
      pruned = pruned || it->second.applied_generation || it->second.keys_digest;
      it = records_.erase(it);
    }
  }
  if (pruned) SaveState();
  for (const auto& c : observed_) {
    if (c.state != ContainerState::kRunning) continue;
    const bool ready = ContainerReady(c);
    records_[c.id].ssh_ready = ready;
  }
  for (const auto& c : observed_) {
    auto it = records_.find(c.id);
    if (it == records_.end()) continue;
    if (c.state != ContainerState::kRunning) it->second.proven_start.reset();
    if (!it->second.proven_start) it->second.relay_checked_at.reset();
  }
  std::set<std::string> ready;
  for (const auto& [id, r] : records_) {
    if (r.ssh_ready) ready.insert(id);
  }
  KnownContainers known = KnownFrom(observed_, ready);
  const bool ids_changed =
      known.size() != known_.size() ||
      !std::equal(known.begin(), known.end(), known_.begin(), [](const auto& a, const auto& b) {
        return a.first == b.first && a.second.container_id == b.second.container_id;
      });
  known_ = std::move(known);
  if (ids_changed) SaveState();  // so that a removal while the agent is down is told too
}

bool Agent::KeysCurrent(const ContainerInfo& c) const {
  auto instance = c.labels.find(std::string(kInstanceLabel));
  auto node = c.labels.find(std::string(kNodeLabel));
  auto record = records_.find(c.id);
  if (instance == c.labels.end() || node == c.labels.end() || record == records_.end() ||
      !record->second.keys_digest) {
    return false;
  }
  for (const auto& d : desired_) {
    if (d.instance_id == instance->second && std::to_string(d.node_index) == node->second) {
      return *record->second.keys_digest == KeysDigest(KeyLines(d));
    }
  }
  return false;
}

void Agent::CheckRelayKey(const ContainerInfo& c, bool force) {
  const bool with_ca = !options_.relay_certificate_authorities.empty();
  if (options_.relay_authorized_keys.empty() && !with_ca) return;
  // A file due for a rewrite this round (new key lines, e.g. other --relay-from patterns) is not
  // checked: the rewrite follows, and the login is proven (and this checked) again after it.
  if (!KeysCurrent(c)) return;
  const auto now = Steady::now();
  auto& checked = records_[c.id].relay_checked_at;
  if (!force && checked && now - *checked < options_.relay_check_interval) return;
  checked = now;
  auto instance = c.labels.find(std::string(kInstanceLabel));
  const std::vector<std::string> relay_lines =
      RelayLines(instance == c.labels.end() ? std::string() : instance->second);
  // What sshd is asked about: with relay CAs the probe certificate, which the CA's probe line
  // admits (no from=, so sshd's answer says whether it takes the CA's certificates at all);
  // otherwise the first plain relay key, whose options (from=) may refuse the agent's address.
  std::string offer;
  bool answer_says_all = true;  // a refusal means sshd refuses the credential, not the agent
  if (with_ca) {
    offer = options_.relay_probe_certificate;
    answer_says_all = !offer.empty();
  } else {
    const AuthorizedKeyLine relay = SplitAuthorizedKeyLine(options_.relay_authorized_keys.front());
    offer = relay.key;
    answer_says_all = relay.options.empty();
  }
  const LoginProbe probe = offer.empty() ? LoginProbe::kRefused : Probe(c, offer).outcome;
  // The fault is cleared only by a check that finds the relay key accepted: the record outlives
  // the round (ContainerRecord::relay_error).
  auto accepted = [&] {
    ContainerRecord& record = records_[c.id];
    if (record.relay_error.empty()) return;
    spdlog::info("agent: sshd of {} accepts the relay credential again", c.name);
    record.relay_error.clear();
  };
  if (probe == LoginProbe::kAccepted) return accepted();
  if (probe != LoginProbe::kRefused) return;  // no answer: nothing learnt either way
  // The agent's own read-only file (containers with the keys mount): whether it holds the
  // relay's lines. Nothing in the container is read or run.
  core::Result<bool> held = false;
  if (HasKeysMount(c)) {
    auto paths = KeysPaths(c.name);
    held =
        paths ? AgentKeysHold(*paths, relay_lines) : core::Result<bool>(core::Fail(paths.error()));
  }
  if (!answer_says_all) {
    // The line's options (from="<relay addresses>") may refuse the agent's own address, or there
    // is no certificate to ask with: sshd cannot tell us whether the line is there, so look at
    // the file itself: the agent's own copy. A container made before the read-only mount cannot
    // be checked (its file is read only through the container), so nothing is learnt.
    if (!HasKeysMount(c)) return;
    if (!held) {
      spdlog::warn("agent: cannot check the relay credential in {}: {}", c.name,
                   Describe(held.error()));
      return;
    }
    if (*held) return accepted();
  }
  ContainerRecord& record = records_[c.id];
  record.keys_digest.reset();  // SyncAuthorizedKeys writes the file again this round
  if (held && *held) {
    // The file is the agent's and read-only in the container: sshd itself was changed. Writing
    // the file again changes nothing in the container; the fault stays until sshd accepts.
    spdlog::warn(
        "agent: sshd of {} refuses the relay credential although its read-only authorized_keys "
        "holds it (sshd changed in the container?)",
        c.name);
    record.relay_error = kRelayKeyRefused;
    return;
  }
  spdlog::warn(
      "agent: sshd of {} refuses the relay credential (authorized_keys edited?); writing it "
      "again",
      c.name);
  record.relay_error = RelayKeyMissing(KeysFileIn(c));
}

void Agent::ReadHostKey(const ContainerInfo& c) {
  ContainerRecord& record = records_[c.id];
  if (!record.host_key.empty() || record.host_key_tries >= kHostKeyTries) return;
  auto key = ReadSshHostKey(engine_, c.id, options_.engine_timeout);
  if (key && *key == record.presented_host_key) {
    record.host_key = std::move(*key);
    return;
  }
  if (++record.host_key_tries >= kHostKeyTries) {
    // The relay then logs in without checking this container's host key (docs/ssh.md "Host key
    // pinning").
    spdlog::warn("agent: cannot read the sshd host key of {} ({}): {}; it is not reported", c.name,
                 kSshHostKeyPath,
                 key ? "the engine's copy of the file is not the key its sshd presents (" +
                           core::BoundedPrintable(record.presented_host_key) + ")"
                     : Describe(key.error()));
  }
}

LoginProbeAnswer Agent::Probe(const ContainerInfo& c, const std::string& key_line) {
  LoginProbeAnswer answer =
      ProbeLoginConfined(options_.login_probe, options_.ssh_bind_address, c.ssh_port, "root",
                         key_line, options_.ssh_probe_timeout);
  if (!answer.error.empty() && answer.error != last_probe_error_) {
    // Said once per new reason (a hanging sshd says the same each round).
    spdlog::warn("agent: login probe of {}: {}", c.name, answer.error);
  }
  last_probe_error_ = answer.error;
  return answer;
}

bool Agent::ContainerReady(const ContainerInfo& c) {
  auto label = [&](std::string_view name) {
    auto it = c.labels.find(std::string(name));
    return it == c.labels.end() ? std::string() : it->second;
  };
  if (auto it = records_.find(c.id);
      it != records_.end() && it->second.proven_start == c.started_at) {
    const bool up =
        SshBannerSeen(options_.ssh_bind_address, c.ssh_port, options_.ssh_probe_timeout);
    if (up) CheckRelayKey(c, /*force=*/false);
    if (up) ReadHostKey(c);  // when the first read failed
    return up;
  }
  const std::string instance = label(kInstanceLabel);
  const std::string node = label(kNodeLabel);
  const DesiredContainer* desired = nullptr;
  for (const auto& d : desired_) {
    if (d.instance_id == instance && std::to_string(d.node_index) == node) desired = &d;
  }
  if (desired == nullptr || desired->authorized_keys.empty() || c.ssh_port == 0) {
    return SshBannerSeen(options_.ssh_bind_address, c.ssh_port, options_.ssh_probe_timeout);
  }
  const LoginProbeAnswer answer = Probe(c, desired->authorized_keys.front());
  const std::string presented = answer.server_host_key;
  const LoginProbe probe = answer.outcome;
  switch (probe) {
    case LoginProbe::kAccepted:
      spdlog::info("agent: login to {} (instance {}) proven with the person's key", c.name,
                   instance);
      records_[c.id].proven_start = c.started_at;
      records_[c.id].presented_host_key = presented;
      CheckRelayKey(c, /*force=*/true);
      ReadHostKey(c);
      return true;
    case LoginProbe::kRefused:
      records_[c.id].login_error =
          "sshd in the container refuses the person's key (check ~/.ssh modes and owner)";
      spdlog::warn("agent: sshd of {} (instance {}) refuses the person's key", c.name, instance);
      return false;
    case LoginProbe::kNoAnswer:
      return false;
    case LoginProbe::kUnsupported:
      return SshBannerSeen(options_.ssh_bind_address, c.ssh_port, options_.ssh_probe_timeout);
  }
  return false;
}

void Agent::Create(const DesiredContainer& d) {
  ContainerSpec spec;
  spec.name = d.container_name;
  spec.image = d.image;
  spec.hostname = d.hostname;
  spec.labels = options_.extra_labels;
  spec.labels[std::string(kInstanceLabel)] = d.instance_id;
  spec.labels[std::string(kNodeLabel)] = std::to_string(d.node_index);
  spec.labels[std::string(kGenerationLabel)] = std::to_string(d.restart_generation);
  spec.labels[std::string(kHostLabel)] = host_id_;
  spec.env = d.env;
  const InstanceLimits& limits = options_.instance_limits;
  spec.memory_bytes = limits.memory_bytes;
  if (d.memory_bytes > 0 && (spec.memory_bytes == 0 || d.memory_bytes < spec.memory_bytes)) {
    spec.memory_bytes = d.memory_bytes;
  }
  spec.nano_cpus = limits.nano_cpus;
  spec.pids_limit = limits.pids_limit;
  spec.capabilities = limits.capabilities;
  spec.no_new_privileges = true;
  spec.gpu = d.gpu && !inventory_.gpus.empty();
  spec.ssh_bind_address = options_.ssh_bind_address;
  ApplyInstanceRuntime(options_.instance_runtime, spec);
  spec.labels[std::string(kKeysLabel)] = "bind";
  const std::string attempt_key = d.instance_id + "/" + std::to_string(d.node_index);
  auto fail = [&](const core::Error& e, const std::string& step) {
    // An engine that is busy or hiccups (a 5xx, a timeout) gets another try at the next round;
    // a create that cannot work (no image, a bad spec) or a GPU runtime failure (C13) is
    // reported at once, and so is the kCreateAttempts-th transient failure in a row.
    std::string lower = e.message;
    for (char& ch : lower) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    const bool gpu_runtime =
        lower.find("nvidia") != std::string::npos || lower.find("nvml") != std::string::npos;
    const bool transient = !gpu_runtime && (e.code == core::ErrorCode::kUnavailable ||
                                            e.code == core::ErrorCode::kDeadlineExceeded);
    const int attempts = ++create_attempts_[attempt_key];
    if (transient && attempts < kCreateAttempts) {
      spdlog::warn("agent: {} of {} (instance {} node {}) failed, attempt {} of {}; retrying: {}",
                   step, d.container_name, d.instance_id, d.node_index, attempts, kCreateAttempts,
                   Describe(e));
      return;
    }
    create_attempts_.erase(attempt_key);
    spdlog::error("agent: {} of {} (instance {} node {}) failed: {}", step, d.container_name,
                  d.instance_id, d.node_index, Describe(e));
    failures_.push_back({d.instance_id, d.node_index, e.api_code, step + ": " + e.message});
  };
  if (options_.instance_networks) {
    spec.network = InstanceNetworkName(d.instance_id);
    NetworkSpec network{.name = spec.network, .labels = options_.extra_labels};
    network.labels[std::string(kNetworkInstanceLabel)] = d.instance_id;
    network.labels[std::string(kHostLabel)] = host_id_;
    // A network left by an earlier try, or made by the agent of the instance's other node on
    // the same engine, serves as it is.
    if (auto made = engine_.CreateNetwork(network, options_.engine_timeout);
        !made && made.error().api_code != "network_exists") {
      return fail(made.error(), "creating the instance network");
    }
  }
  // The keys first, on the host: the container mounts the agent's directory read-only
  // (AgentKeysBinds), and sshd reads them from there. Nothing is written into the container.
  auto keys = KeysPaths(d.container_name);
  if (!keys) return fail(keys.error(), "writing authorized_keys");
  if (auto written = WriteAgentKeys(*keys, KeyLines(d)); !written) {
    return fail(written.error(), "writing authorized_keys");
  }
  spec.binds = AgentKeysBinds(*keys);
  // A node of a 2-host instance: its cluster's files, read-only like its keys, and the node names
  // in /etc/hosts (docs/clusters.md).
  if (d.cluster) {
    if (auto checked = CheckClusterSpec(*d.cluster); !checked) {
      return fail(checked.error(), "setting up the cluster");
    }
    auto binds = WriteClusterFiles(ClusterFilesDir(*keys), ClusterFiles(*d.cluster, options_.rail));
    if (!binds) return fail(binds.error(), "writing the cluster files");
    spec.binds.insert(spec.binds.end(), binds->begin(), binds->end());
    spec.extra_hosts = ClusterExtraHosts(*d.cluster);
  }
  auto id = engine_.CreateContainer(spec, options_.engine_timeout);
  if (!id && id.error().api_code == "container_exists" && MadeByAnEarlierTry(spec)) {
    // An earlier create timed out on the agent's side but the engine carried it out after the
    // round's listing was taken: the container is this instance's own. The next round lists it
    // and starts it (its keys go in first: KeysBeforeStart), so the create is not a failure.
    create_attempts_.erase(attempt_key);
    spdlog::warn(
        "agent: {} (instance {} node {}) already exists with this instance's labels, made by an "
        "earlier create the engine finished late; the next round takes it over",
        d.container_name, d.instance_id, d.node_index);
    return;
  }
  if (!id) return fail(id.error(), "create");
  // The node joins the rail with its own rail address before its first start.
  if (d.cluster && !options_.rail.network.empty()) {
    const std::string& own =
        d.cluster->rail_addresses.at(static_cast<size_t>(d.cluster->node_index));
    if (auto joined =
            engine_.ConnectNetwork(*id, options_.rail.network, own, options_.engine_timeout);
        !joined) {
      fail(joined.error(), "joining the rail network " + options_.rail.network);
      if (auto removed = engine_.RemoveContainer(*id, true, options_.engine_timeout); !removed) {
        spdlog::error("agent: cannot remove the failed container {}: {}", *id,
                      Describe(removed.error()));
      }
      return;
    }
  }
  // The keys are in place before the first start (C05); a start that fails leaves nothing.
  auto started = engine_.StartContainer(*id, options_.engine_timeout);
  if (!started) {
    fail(started.error(), "start");
    if (auto removed = engine_.RemoveContainer(*id, true, options_.engine_timeout); !removed) {
      spdlog::error("agent: cannot remove the failed container {}: {}", *id,
                    Describe(removed.error()));
    }
    return;
  }
  create_attempts_.erase(attempt_key);
  records_[*id].keys_digest = KeysDigest(KeyLines(d));
  SaveState();
  // A container removed outside gpuwerk, found missing this round, is back: from the image, so
  // its files and sshd's host keys are new (the server tells its person).
  for (auto& drift : drift_) {
    if (drift.kind == "removed" && !drift.recreated && drift.instance_id == d.instance_id &&
        drift.node_index == d.node_index) {
      drift.recreated = true;
      drift.new_container_id = *id;
      spdlog::warn(
          "agent: created {} (instance {} node {}) again after its removal outside gpuwerk: its "
          "files are gone and its SSH host keys are new",
          d.container_name, d.instance_id, d.node_index);
    }
  }
  spdlog::info("agent: created and started {} (instance {} node {}, generation {})",
               d.container_name, d.instance_id, d.node_index, d.restart_generation);
}

bool Agent::MadeByAnEarlierTry(const ContainerSpec& spec) {
  // Docker Engine API v1.41 `GET /containers/{id}/json` takes a name as well as an id.
  auto found = engine_.InspectContainer(spec.name, options_.engine_timeout);
  if (!found) return false;
  for (const std::string_view label : {kInstanceLabel, kNodeLabel, kHostLabel}) {
    const auto want = spec.labels.find(std::string(label));
    const auto have = found->labels.find(std::string(label));
    if (want == spec.labels.end() || have == found->labels.end() || have->second != want->second) {
      return false;
    }
  }
  return true;
}

bool Agent::KeysBeforeStart(const Action& a) {
  auto c = std::find_if(observed_.begin(), observed_.end(),
                        [&](const ContainerInfo& o) { return o.id == a.container_id; });
  if (c == observed_.end() || KeysCurrent(*c)) return true;
  // A stopped container whose file is not known to be current: e.g. one whose create the engine
  // carried out after the agent had given up on its answer (a slow engine just after its start),
  // or one adopted after an agent restart that lost its state. It gets the file now, before its
  // start: the agent's read-only copy on the host, or (made before that mount) by archive.
  const std::vector<std::string> lines = KeyLines(a.desired);
  auto put = WriteKeys(*c, lines);
  if (!put) {
    spdlog::error("agent: writing authorized_keys of {} before its start failed: {}", c->name,
                  Describe(put.error()));
    return false;  // not started without the keys; the next round tries again
  }
  records_[c->id].keys_digest = KeysDigest(lines);
  SaveState();
  return true;
}

std::vector<std::string> Agent::RelayLines(const std::string& instance_id) const {
  std::vector<std::string> lines = options_.relay_authorized_keys;
  for (const std::string& ca : options_.relay_certificate_authorities) {
    // The CA trusted for this instance's principal alone (issue 12 finding 1).
    auto line = RelayCaKeyLine(ca, instance_id, options_.relay_ca_from);
    if (!line) {
      // The server's id; an id that could break the line gets no relay line (the relay's login
      // is refused, C07's fault shows).
      spdlog::error("agent: no relay CA line for instance {}: {}",
                    core::BoundedPrintable(instance_id, 64), Describe(line.error()));
      continue;
    }
    lines.push_back(std::move(*line));
    lines.push_back(RelayCaProbeLine(ca));
  }
  return lines;
}

std::vector<std::string> Agent::KeyLines(const DesiredContainer& d) const {
  std::vector<std::string> lines = d.authorized_keys;
  const std::vector<std::string> relay = RelayLines(d.instance_id);
  lines.insert(lines.end(), relay.begin(), relay.end());
  return lines;
}

bool Agent::SyncAuthorizedKeys() {
  bool wrote = false;
  for (const auto& c : observed_) {
    if (c.state != ContainerState::kRunning && c.state != ContainerState::kCreated &&
        c.state != ContainerState::kExited) {
      continue;
    }
    auto instance = c.labels.find(std::string(kInstanceLabel));
    auto node = c.labels.find(std::string(kNodeLabel));
    if (instance == c.labels.end() || node == c.labels.end()) continue;
    for (const auto& d : desired_) {
      if (d.instance_id != instance->second || std::to_string(d.node_index) != node->second) {
        continue;
      }
      const std::vector<std::string> lines = KeyLines(d);
      const std::string digest = KeysDigest(lines);
      auto record = records_.find(c.id);
      if (record != records_.end() && record->second.keys_digest == digest) break;
      // The agent's read-only copy on the host (the container sees it at once), or for a
      // container made before that mount the engine's archive upload; never an exec.
      auto put = WriteKeys(c, lines);
      if (!put) {
        spdlog::error("agent: rewriting authorized_keys of {} failed: {}", c.name,
                      Describe(put.error()));
        // The relay's key still missing (C07): the fault stays, now saying the write failed.
        if (record != records_.end() && !record->second.relay_error.empty()) {
          record->second.relay_error =
              RelayKeyNotPutBack(KeysFileIn(c), core::BoundedPrintable(put.error().api_code, 64));
        }
        break;
      }
      // Adopted containers (no digest yet) get the file rewritten once: same content, no harm.
      spdlog::info("agent: authorized_keys of {} (instance {}) now has {} key(s)", c.name,
                   d.instance_id, lines.size());
      ContainerRecord& written = records_[c.id];
      written.keys_digest = digest;
      written.proven_start.reset();  // prove the person's login again with the new file
      wrote = true;
      break;
    }
  }
  if (wrote) SaveState();
  return wrote;
}

bool Agent::Apply(const std::vector<Action>& actions) {
  for (const auto& a : actions) {
    switch (a.kind) {
      case ActionKind::kCreate:
        Create(a.desired);
        break;
      case ActionKind::kStart: {
        // A container that keeps exiting right after its start (a broken sshd_config, a full
        // disk) is started again with a growing pause (2 s … 60 s), not in a tight loop.
        if (!records_[a.container_id].start_backoff.TryStart(Steady::now())) break;
        if (!KeysBeforeStart(a)) break;
        touched_.insert(a.container_id);
        started_[a.container_id] = Steady::now();
        if (auto r = engine_.StartContainer(a.container_id, options_.engine_timeout); r) {
          spdlog::info("agent: started {} (instance {})", a.container_id, a.desired.instance_id);
          RecordGeneration(a.container_id, a.generation);
        } else {
          spdlog::error("agent: start of {} failed: {}", a.container_id, Describe(r.error()));
        }
        break;
      }
      case ActionKind::kRestart:
        touched_.insert(a.container_id);
        started_[a.container_id] = Steady::now();
        if (auto r = engine_.RestartContainer(a.container_id, options_.restart_stop_timeout_seconds,
                                              options_.engine_timeout);
            r) {
          // Accepted only (C10): the next inspect says whether it runs.
          spdlog::info("agent: restarted {} (instance {}, generation {})", a.container_id,
                       a.desired.instance_id, a.generation);
          RecordGeneration(a.container_id, a.generation);
        } else {
          spdlog::error("agent: restart of {} failed: {}", a.container_id, Describe(r.error()));
        }
        break;
      case ActionKind::kRemove:
        touched_.insert(a.container_id);
        if (auto r = engine_.RemoveContainer(a.container_id, true, options_.engine_timeout); r) {
          spdlog::info("agent: removed {}", a.container_id);
          // Its keys directory goes with it (a container made again gets it written afresh).
          for (const auto& c : observed_) {
            if (c.id != a.container_id || !HasKeysMount(c)) continue;
            if (auto paths = KeysPaths(c.name); paths) {
              RemoveAgentKeys(*paths);
              std::error_code ec;  // a 2-host node's cluster files (its private key) go too
              std::filesystem::remove_all(ClusterFilesDir(*paths), ec);
            }
          }
          sweep_networks_now_ = true;  // its network may be free now
        } else {
          spdlog::error("agent: removal of {} failed: {}", a.container_id, Describe(r.error()));
        }
        break;
    }
  }
  return !actions.empty();
}

void Agent::SweepNetworks() {
  auto filter = options_.extra_labels;
  filter[std::string(kNetworkInstanceLabel)] = "";
  filter[std::string(kHostLabel)] = host_id_;
  auto networks = engine_.ListNetworks(filter, options_.engine_timeout);
  if (!networks) {
    spdlog::warn("agent: cannot list instance networks: {}", Describe(networks.error()));
    return;
  }
  std::set<std::string> in_use;
  for (const auto& c : observed_) {
    if (auto it = c.labels.find(std::string(kInstanceLabel)); it != c.labels.end()) {
      in_use.insert(it->second);
    }
  }
  for (const auto& d : desired_) in_use.insert(d.instance_id);
  for (const NetworkInfo& n : *networks) {
    auto it = n.labels.find(std::string(kNetworkInstanceLabel));
    if (it == n.labels.end() || in_use.contains(it->second)) continue;
    if (auto removed = engine_.RemoveNetwork(n.name, options_.engine_timeout); removed) {
      spdlog::info("agent: removed network {} (instance {})", n.name, it->second);
    } else if (removed.error().api_code != "network_in_use") {
      spdlog::warn("agent: cannot remove network {}: {}", n.name, Describe(removed.error()));
    }
  }
}

protocol::AgentSyncRequest Agent::BuildRequest() const {
  protocol::AgentSyncRequest request;
  request.agent_version = options_.agent_version;
  request.inventory = inventory_;
  request.inventory.ssh_address = options_.ssh_bind_address;  // where sshd ports are published
  const InstanceLimits& limits = options_.instance_limits;
  request.inventory.limits = {
      .memory_bytes = limits.memory_bytes,
      .nano_cpus = limits.nano_cpus,
      .pids_limit = limits.pids_limit,
      .capabilities = limits.capabilities,
      .not_enforced = limits.not_enforced,
      .docker_inside = std::string(DockerInsideName(options_.instance_runtime.docker_inside)),
      .shm_bytes = options_.instance_runtime.shm_bytes};
  for (std::string& warning : InstanceRuntimeWarnings(options_.instance_runtime)) {
    request.inventory.limits.not_enforced.push_back(std::move(warning));
  }
  if (!network_check_error_.empty()) {
    request.inventory.limits.not_enforced.push_back(
        "network: the filter rules cannot be checked (" + network_check_error_.substr(0, 300) +
        "): another program's rules may decide before them");
  }
  request.engine = {.ok = engine_ok_, .error = engine_error_};
  const AppliedGenerations applied = Applied();
  for (const auto& c : observed_) {
    auto record = records_.find(c.id);
    const ContainerRecord none;
    const ContainerRecord& r = record != records_.end() ? record->second : none;
    ContainerReport report =
        ReportContainer(c, AppliedGeneration(c, applied), r.ssh_ready, engine_ok_, engine_error_);
    report.ssh_host_key = r.host_key;
    if (!r.login_error.empty() && report.error.empty()) report.error = r.login_error;
    if (!r.relay_error.empty() && report.error.empty()) report.error = r.relay_error;
    if (r.start_backoff.starts_in_a_row() >= 3 && c.state != ContainerState::kRunning &&
        report.error.empty()) {
      report.error = "the container keeps exiting right after it starts (exit code " +
                     std::to_string(c.exit_code) + ", started " +
                     std::to_string(r.start_backoff.starts_in_a_row()) +
                     " times in a row); check its sshd configuration, or restart or delete it";
    }
    request.containers.push_back(std::move(report));
  }
  request.failures = failures_;
  request.drift = drift_;
  return request;
}

void Agent::CheckNetworkIsolation(bool now) {
  if (!options_.keep_network_isolation) return;
  const auto at = Steady::now();
  if (!now && last_network_check_ && at - *last_network_check_ < options_.network_check_interval) {
    return;
  }
  last_network_check_ = at;
  auto repairs = options_.keep_network_isolation();
  if (!repairs) {
    if (repairs.error().message != network_check_error_) {
      spdlog::error("agent: cannot check the instance network filter rules: {}",
                    Describe(repairs.error()));
    }
    network_check_error_ = repairs.error().message;
    return;
  }
  if (!network_check_error_.empty()) {
    spdlog::info("agent: the instance network filter rules are checked again");
    network_check_error_.clear();
  }
  LogIsolationRepairs("agent", *repairs, false);
}

core::Result<bool> Agent::RunOnce() {
  // The filter rules before anything else: another program may have put its rules above them
  // since the last round.
  CheckNetworkIsolation(false);
  // Until the first answer names this host, the agent cannot tell its containers from another
  // host's on the same engine: it reports nothing ("observed": false) and touches nothing.
  const bool know_host = !host_id_.empty();
  if (know_host) {
    Observe();
    if (have_desired_ && engine_ok_) {
      const bool acted = Apply(Reconcile(desired_, observed_, Applied()));
      // A container that joined its network just now made the engine add its own rules (podman's
      // CNI plugins put their jumps first in FORWARD): the agent's go first again before the
      // container is probed and reported.
      if (acted) CheckNetworkIsolation(true);
      if (acted) Observe();
      if (SyncAuthorizedKeys()) Observe();
      // After a removal, and once a minute for networks left behind (an agent killed between
      // creating a network and its container): not every round, which would add an engine call
      // to each.
      const auto now = std::chrono::steady_clock::now();
      if (options_.instance_networks && engine_ok_ &&
          (sweep_networks_now_ || now >= next_network_sweep_)) {
        SweepNetworks();
        sweep_networks_now_ = false;
        next_network_sweep_ = now + std::chrono::minutes(1);
      }
    }
  }
  protocol::AgentSyncRequest request = BuildRequest();
  if (!know_host) request.observed = false;
  last_request_ = protocol::ToJson(request);
  GPUWERK_ASSIGN_OR_RETURN(protocol::AgentSyncAnswer answer, client_.Sync(request));
  failures_.clear();
  drift_.clear();  // sent (BuildRequest took them all)
  if (answer.sync_interval_seconds > 0) {
    options_.sync_interval = std::chrono::seconds(answer.sync_interval_seconds);
  }
  if (!host_id_.empty() && host_id_ != answer.host_id) {
    spdlog::warn(
        "agent: the server now calls this host {} (was {}); containers labelled for {} "
        "are no longer managed",
        answer.host_id, host_id_, host_id_);
  }
  if (host_id_ != answer.host_id) {
    // What an agent of another host id saw is not this host's (the first answer after a start
    // keeps what the state file said).
    if (!host_id_.empty()) known_.clear();
    host_id_ = answer.host_id;
    observed_.clear();
    for (auto& [id, r] : records_) r.ssh_ready = false;
  }
  desired_ = std::move(answer.desired);
  have_desired_ = true;
  if (!know_host) return true;  // observe and act at once, now that the host is known
  if (answer.desired_version) {
    std::lock_guard lock(mu_);
    desired_version_ = *answer.desired_version;
  }
  return engine_ok_ && !Reconcile(desired_, observed_, Applied()).empty();
}

void Agent::Run() {
  LoadState();
  std::thread watcher([this] { WatchLoop(); });
  bool previous_was_immediate = false;
  while (true) {
    {
      std::lock_guard lock(mu_);
      if (stop_) break;
      woken_ = false;
    }
    auto again = RunOnce();
    if (!again) {
      spdlog::error("agent: sync failed: {}", Describe(again.error()));
    }
    // One immediate round after a new desired list; never a tight loop (a create that keeps
    // failing waits for the interval).
    const bool immediate = again && *again && !previous_was_immediate;
    previous_was_immediate = immediate;
    const bool proving = std::any_of(observed_.begin(), observed_.end(), [&](const auto& c) {
      return c.state == ContainerState::kRunning && !Ready(c.id);
    });
    const auto pause = proving ? std::min(options_.sync_interval, options_.ready_poll_interval)
                               : options_.sync_interval;
    std::unique_lock lock(mu_);
    if (!immediate) wake_.wait_for(lock, pause, [this] { return stop_ || woken_; });
  }
  client_.CancelWatch();
  watcher.join();
}

void Agent::WatchLoop() {
  std::string known;
  while (true) {
    {
      std::unique_lock lock(mu_);
      if (stop_) return;
      if (known.empty()) known = desired_version_;
      if (known.empty()) {  // no sync answer yet
        wake_.wait_for(lock, std::chrono::milliseconds(200), [this] { return stop_; });
        continue;
      }
    }
    auto version = client_.Watch(known, options_.watch_wait);
    if (!version) {
      if (version.error().api_code == "watch_unsupported") return;  // periodic sync alone
      spdlog::debug("agent: watch failed: {}", Describe(version.error()));
      std::unique_lock lock(mu_);
      wake_.wait_for(lock, options_.sync_interval, [this] { return stop_; });
      continue;
    }
    if (*version != known) {
      known = *version;
      {
        std::lock_guard lock(mu_);
        woken_ = true;
      }
      wake_.notify_all();
    }
  }
}

void Agent::Stop() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  wake_.notify_all();
}

}  // namespace gpuwerk::agent

#include "app/local_platform.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <fstream>
#include <thread>
#include <vector>

#include "agent/agent.h"
#include "agent/agent_client.h"
#include "agent/authorized_keys.h"
#include "agent/docker_engine.h"
#include "agent/instance_runtime.h"
#include "agent/inventory.h"
#include "agent/network_isolation.h"
#include "app/agent_command.h"
#include "app/containers_conf.h"
#include "app/options.h"
#include "app/relay_process.h"

extern char** environ;

namespace gpuwerk::app {

namespace fs = std::filesystem;
using std::chrono::milliseconds;
using std::chrono::seconds;

struct LocalPlatform::Impl {
  std::string engine_url;
  std::string engine_origin;
  std::string host_name;
  bool has_gpu = false;
  std::string docker_inside = "off";
  pid_t podman_pid = -1;                ///< the podman service we own, -1 when none
  std::unique_ptr<RelayProcess> relay;  ///< `gpuwerk relay` in a process of its own
  std::string ssh_address;
  uint16_t ssh_port = 0;
  std::unique_ptr<agent::DockerEngine> engine;
  std::unique_ptr<agent::AgentClient> client;
  std::unique_ptr<agent::Agent> agent;
  std::thread agent_thread;
  bool stopped = false;
};

namespace {

constexpr std::string_view kUnix = "unix://";
constexpr auto kEngineStartLimit = seconds(30);

bool Answers(const std::string& socket_path) {
  std::error_code ec;
  if (!fs::exists(socket_path, ec)) return false;
  agent::DockerEngine probe({.socket_path = socket_path});
  return probe.Ping(seconds(2)).has_value();
}

bool ProcessAlive(pid_t pid) { return pid > 0 && ::kill(pid, 0) == 0; }

/// Whether `pid` is a podman process (a pid file may name a pid reused by something else).
bool IsPodman(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/cmdline", std::ios::binary);
  std::string cmdline((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return cmdline.find("podman") != std::string::npos;
}

void StopProcess(pid_t pid, bool is_child) {
  if (pid <= 0) return;
  ::kill(pid, SIGTERM);
  const auto deadline = std::chrono::steady_clock::now() + seconds(10);
  while (std::chrono::steady_clock::now() < deadline) {
    if (is_child) {
      if (::waitpid(pid, nullptr, WNOHANG) == pid) return;
    } else if (!ProcessAlive(pid)) {
      return;
    }
    std::this_thread::sleep_for(milliseconds(50));
  }
  spdlog::warn("up: the podman service (pid {}) did not stop in 10 s; killing it", pid);
  ::kill(pid, SIGKILL);
  if (is_child) ::waitpid(pid, nullptr, 0);
}

/// Starts `podman system service` on DATA/engine/podman.sock (see LocalPlatform::Start).
core::Result<pid_t> StartPodman(const fs::path& dir, const std::string& socket_path) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) {
    return core::Fail(core::ErrorCode::kUnavailable, "engine_unavailable",
                      "cannot create " + dir.string() + ": " + ec.message());
  }
  const fs::path conf = dir / "containers.conf";
  {
    std::ofstream out(conf, std::ios::trunc);
    out << kContainersConf;
    if (!out) {
      return core::Fail(core::ErrorCode::kUnavailable, "engine_unavailable",
                        "cannot write " + conf.string());
    }
  }
  fs::remove(socket_path, ec);
  const std::string log = (dir / "podman.log").string();
  const std::string listen = "unix://" + socket_path;

  std::vector<std::string> env_text;
  for (char** e = environ; *e != nullptr; ++e) {
    if (std::string_view(*e).starts_with("CONTAINERS_CONF=")) continue;
    env_text.emplace_back(*e);
  }
  env_text.push_back("CONTAINERS_CONF=" + conf.string());
  std::vector<char*> envp;
  for (auto& e : env_text) envp.push_back(e.data());
  envp.push_back(nullptr);
  std::vector<std::string> args = {"podman", "system", "service", "--time=0", listen};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);

  posix_spawn_file_actions_t files;
  posix_spawn_file_actions_init(&files);
  posix_spawn_file_actions_addopen(&files, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&files, STDOUT_FILENO, log.c_str(),
                                   O_WRONLY | O_CREAT | O_APPEND, 0600);
  posix_spawn_file_actions_adddup2(&files, STDOUT_FILENO, STDERR_FILENO);
  // Nothing else of ours: the service and every container's conmon outlive us, and an inherited
  // listening socket or store file would stay open in them (the HTTP port stays taken).
  posix_spawn_file_actions_addclosefrom_np(&files, STDERR_FILENO + 1);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  // Its own session: the terminal's Ctrl-C reaches gpuwerk only, which stops the service last.
  // The signal mask is reset: main blocks SIGINT/SIGTERM in every thread, and a child would
  // inherit that and ignore our SIGTERM.
  sigset_t none;
  sigemptyset(&none);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSID | POSIX_SPAWN_SETSIGMASK);
  pid_t pid = -1;
  const int rc = ::posix_spawnp(&pid, "podman", &files, &attr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&files);
  posix_spawnattr_destroy(&attr);
  if (rc != 0) {
    return core::Fail(
        core::ErrorCode::kUnavailable, "engine_unavailable",
        "no container engine: no Docker socket answers and podman cannot be started "
        "(" +
            std::string(std::strerror(rc)) +
            "); install podman (bash scripts/setup.sh) or pass --engine unix:///PATH");
  }
  std::ofstream(dir / "podman.pid", std::ios::trunc) << pid << "\n";
  const auto deadline = std::chrono::steady_clock::now() + kEngineStartLimit;
  while (!Answers(socket_path)) {
    int status = 0;
    if (::waitpid(pid, &status, WNOHANG) == pid) {
      return core::Fail(core::ErrorCode::kUnavailable, "engine_unavailable",
                        "the podman API service exited at start; see " + log);
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      StopProcess(pid, /*is_child=*/true);
      return core::Fail(
          core::ErrorCode::kUnavailable, "engine_unavailable",
          "the podman API service did not answer on " + socket_path + " within 30 s; see " + log);
    }
    std::this_thread::sleep_for(milliseconds(100));
  }
  return pid;
}

}  // namespace

LocalPlatform::LocalPlatform(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
LocalPlatform::~LocalPlatform() { Stop(); }

core::Result<std::unique_ptr<LocalPlatform>> LocalPlatform::Start(
    const LocalPlatformOptions& options, ServerApp& server) {
  auto impl = std::make_unique<Impl>();
  std::string socket_path;
  if (!options.engine.empty()) {
    if (!options.engine.starts_with(kUnix) || options.engine.size() <= kUnix.size()) {
      return core::InvalidArgument("invalid_engine",
                                   "--engine must be unix:///PATH, got '" + options.engine + "'");
    }
    socket_path = options.engine.substr(kUnix.size());
    if (!Answers(socket_path)) {
      return core::Fail(core::ErrorCode::kUnavailable, "engine_unavailable",
                        "no container engine answers on " + options.engine);
    }
    impl->engine_origin = "given with --engine";
  } else {
    for (const char* docker : {"/var/run/docker.sock", "/run/docker.sock"}) {
      if (Answers(docker)) {
        socket_path = docker;
        impl->engine_origin = "Docker";
        break;
      }
    }
    if (socket_path.empty()) {
      const fs::path dir = (fs::absolute(options.data_dir) / "engine").lexically_normal();
      socket_path = (dir / "podman.sock").string();
      pid_t left = -1;
      if (std::ifstream in(dir / "podman.pid"); in) in >> left;
      if (ProcessAlive(left) && IsPodman(left) && Answers(socket_path)) {
        impl->podman_pid = left;  // ours from an earlier run that did not stop it
        impl->engine_origin = "podman service left by an earlier run, adopted";
      } else {
        if (ProcessAlive(left) && IsPodman(left)) StopProcess(left, /*is_child=*/false);
        GPUWERK_ASSIGN_OR_RETURN(impl->podman_pid, StartPodman(dir, socket_path));
        impl->engine_origin = "podman service started by gpuwerk";
      }
    }
  }
  impl->engine_url = "unix://" + socket_path;
  // From here on a failure must stop the service we started: the LocalPlatform owns it.
  std::unique_ptr<LocalPlatform> platform(new LocalPlatform(std::move(impl)));
  Impl& p = *platform->impl_;
  p.engine = std::make_unique<agent::DockerEngine>(
      agent::DockerEngine::Options{.socket_path = socket_path});

  auto image = p.engine->ImageExists(options.instance_image, seconds(10));
  if (!image) return std::unexpected(image.error());
  if (!*image) {
    return core::Fail(core::ErrorCode::kFailedPrecondition, "image_not_found",
                      "the instance image " + options.instance_image + " is not on the engine (" +
                          p.engine_url + "); build it with: bash scripts/instance-image/build.sh " +
                          options.instance_image + "   (bash scripts/up.sh does this)");
  }

  if (!options.ssh_listen.empty()) {
    auto listen = ParseAddressPort(options.ssh_listen);
    if (!listen) {
      return core::InvalidArgument("invalid_ssh_listen", "--ssh-listen " + listen.error().message);
    }
    // The relay in a process of its own under a memory limit (issue 12 finding 3), asking this
    // server over loopback with the credential `local`, new on every start (docs/ssh.md
    // "Running it"). Its restart announcement closes the rows a killed earlier run left open.
    GPUWERK_ASSIGN_OR_RETURN(auto credential, server.relay_credentials().IssueLocal("system"));
    const fs::path relay_dir = (fs::absolute(options.data_dir) / "relay").lexically_normal();
    GPUWERK_ASSIGN_OR_RETURN(
        p.relay, RelayProcess::Start({.server_url = server.base_url(),
                                      .credential = std::move(credential.secret),
                                      .listen_address = listen->address,
                                      .listen_port = listen->port,
                                      .host_key_path = relay_dir / "host_key",
                                      .relay_key_path = relay_dir / "relay_key",
                                      .relay_ca_path = relay_dir / "relay_ca",
                                      .trusted_proxies = options.relay_trusted_proxies,
                                      .log_level = options.log_level,
                                      .memory_limit_bytes = options.relay_memory_limit_mib << 20}));
    p.ssh_address = listen->address;
    p.ssh_port = p.relay->port();
  }

  agent::Inventory inventory = agent::DiscoverInventory();
  p.has_gpu = !inventory.gpus.empty();
  p.host_name = options.host_name;
  // The relay reaches the local agent's containers where it publishes their sshd: on 127.0.0.1,
  // on a port the engine picks (every unprivileged port: the default range).
  const std::string ssh_bind = "127.0.0.1";
  GPUWERK_ASSIGN_OR_RETURN(
      std::string token,
      server.RegisterLocalHost(options.host_name, options.gpu_type, /*gpu_required=*/p.has_gpu,
                               sched::SshRegistration{.address = ssh_bind,
                                                      .port_low = sched::kDefaultSshPortLow,
                                                      .port_high = sched::kDefaultSshPortHigh}));
  p.client = std::make_unique<agent::AgentClient>(server.base_url(), token);
  // Here the host is up's own: removed by an operator, a restart of up registers it again.
  p.client->SetTokenRefusedAdvice(
      "stop gpuwerk up (Ctrl-C) and start it again: it registers host " + options.host_name +
      " anew");
  agent::AgentOptions agent_options;
  agent_options.ssh_bind_address = ssh_bind;
  agent_options.state_dir = (fs::absolute(options.data_dir) / "agent").lexically_normal();
  // The login proof runs in a confined child of this binary (issue 12 finding 9).
  agent_options.login_probe.command = agent::SelfLoginProbeCommand();
  if (p.relay) {
    // The relay CA, trusted in each container for that instance's certificates alone, and the
    // probe certificate the agent's relay check offers (docs/ssh.md).
    GPUWERK_ASSIGN_OR_RETURN(std::string ca,
                             agent::ParseRelayCaLine(p.relay->relay_ca_public_line()));
    GPUWERK_ASSIGN_OR_RETURN(agent_options.relay_probe_certificate,
                             agent::ParseRelayProbeCertificate(p.relay->relay_probe_certificate()));
    agent_options.relay_certificate_authorities = {std::move(ca)};
  }
  // The agent's default limits: the reserve they leave covers this process (server, relay) too.
  auto limits = agent::ResolveInstanceLimits({}, inventory.memory_bytes, inventory.cpus);
  if (!limits) return core::Fail(limits.error());
  agent_options.instance_limits = std::move(*limits);
  GPUWERK_ASSIGN_OR_RETURN(
      agent_options.instance_runtime,
      agent::ResolveInstanceRuntime(options.docker_inside, options.instance_shm_bytes,
                                    inventory.memory_bytes, agent::ProcessCanRaiseLimits()));
  p.docker_inside =
      std::string(agent::DockerInsideName(agent_options.instance_runtime.docker_inside));
  if (!agent_options.instance_runtime.memlock_unlimited) {
    agent_options.instance_limits.not_enforced.emplace_back(agent::kMemlockNotRaised);
  }
  // Instance networks with the default filter rules (docs/isolation.md); the relay reaches the
  // instances' sshd through their published ports on 127.0.0.1, which the rules let through.
  const agent::NetworkIsolationSettings isolation;
  agent_options.instance_networks = isolation.enabled;
  std::vector<agent::IsolationRepair> repairs;
  if (std::string gap = agent::PrepareNetworkIsolation(isolation, &repairs); !gap.empty()) {
    spdlog::error("up: {}", gap);
    agent_options.instance_limits.not_enforced.push_back(std::move(gap));
  } else {
    agent::LogIsolationRepairs("up", repairs, true);
    // Kept first in their hooks while the agent runs: podman puts its own jumps at the top of
    // FORWARD when an instance's container joins its network (docs/isolation.md).
    agent_options.keep_network_isolation = [isolation] {
      return agent::KeepNetworkIsolation(isolation);
    };
  }
  spdlog::info("up: local agent for host {} ({} GPU(s), nvml {}), engine {} ({})", p.host_name,
               inventory.gpus.size(), inventory.nvml, p.engine_url, p.engine_origin);
  LogDockerInside("up", agent_options.instance_runtime, p.has_gpu);
  p.agent =
      std::make_unique<agent::Agent>(agent_options, *p.engine, *p.client, std::move(inventory));
  agent::Agent* agent = p.agent.get();
  p.agent_thread = std::thread([agent] { agent->Run(); });
  return platform;
}

const std::string& LocalPlatform::engine_url() const { return impl_->engine_url; }
const std::string& LocalPlatform::engine_origin() const { return impl_->engine_origin; }
const std::string& LocalPlatform::host_name() const { return impl_->host_name; }
bool LocalPlatform::has_gpu() const { return impl_->has_gpu; }
const std::string& LocalPlatform::docker_inside() const { return impl_->docker_inside; }
const std::string& LocalPlatform::ssh_address() const { return impl_->ssh_address; }
uint16_t LocalPlatform::ssh_port() const { return impl_->ssh_port; }

void LocalPlatform::Stop() {
  if (!impl_ || impl_->stopped) return;
  impl_->stopped = true;
  if (impl_->agent) impl_->agent->Stop();
  if (impl_->agent_thread.joinable()) impl_->agent_thread.join();
  if (impl_->relay) impl_->relay->Stop();  // open relay sessions end with "relay stopping"
  if (impl_->podman_pid > 0) {
    // A child of ours can be reaped; one adopted from an earlier run cannot.
    const bool child = ::waitpid(impl_->podman_pid, nullptr, WNOHANG) == 0;
    StopProcess(impl_->podman_pid, child);
    impl_->podman_pid = -1;
    spdlog::info("up: stopped the podman service (containers keep running)");
  }
}

}  // namespace gpuwerk::app

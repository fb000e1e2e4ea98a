// DockerEngine against the real container engine: a podman API service this test starts on a
// socket of its own (scripts/engine.sh), and the instance image from
// scripts/instance-image/build.sh (built on first use, about a minute). Needs root.
// Cases C05, C10, C11, C12 of docs/cases.md.
#include "agent/docker_engine.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "agent/authorized_keys.h"
#include "agent/host_key.h"
#include "agent/instance_limits.h"
#include "agent/network_isolation.h"
#include "core/strings.h"

namespace gpuwerk::agent {
namespace {

namespace fs = std::filesystem;
using core::ErrorCode;
using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

constexpr const char* kImage = "localhost/gpuwerk-instance:bookworm";
constexpr const char* kRunLabel = "io.gpuwerk.test-run";
constexpr milliseconds kCallTimeout = std::chrono::seconds(30);

struct Output {
  int rc = -1;
  std::string text;  // stdout and stderr
};

/// Runs `command` with /bin/sh, returning its exit status and output.
Output Shell(const std::string& command) {
  Output out;
  FILE* pipe = ::popen((command + " 2>&1").c_str(), "r");
  if (pipe == nullptr) return out;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), pipe)) > 0) out.text.append(buf, n);
  const int status = ::pclose(pipe);
  out.rc = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return out;
}

/// The source tree, where scripts/ and config/ are (set by gpuwerk_test).
std::string SourceDir() { return GPUWERK_TEST_SOURCE_DIR; }

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

class DockerEngineTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "the podman API service and containers need root";
    std::string tmpl = (fs::temp_directory_path() / "gpuwerk-engine-XXXXXX").string();
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
    socket_ = (dir_ / "podman.sock").string();
    run_id_ = "gwt" + std::to_string(::getpid()) + "x" +
              std::to_string(std::chrono::duration_cast<milliseconds>(
                                 std::chrono::system_clock::now().time_since_epoch())
                                 .count() %
                             1'000'000'000);
    ::setenv("CONTAINERS_CONF", (SourceDir() + "/config/containers.conf").c_str(), 1);

    Output started = Shell(SourceDir() + "/scripts/engine.sh start " + dir_.string());
    ASSERT_EQ(started.rc, 0) << started.text;
    engine_started_ = true;

    const auto t0 = Clock::now();
    Output built = Shell(SourceDir() + "/scripts/instance-image/build.sh " + kImage);
    ASSERT_EQ(built.rc, 0) << built.text;
    std::cout << built.text;
    std::cout << "[ timing ] instance image ready in " << Seconds(Clock::now() - t0) << " s\n";

    engine_ = std::make_unique<DockerEngine>(
        DockerEngine::Options{.socket_path = socket_, .timeout = kCallTimeout});
  }

  void TearDown() override {
    // Every container of this run, whatever the test did; through the CLI, which works even
    // when the API service is gone.
    if (!run_id_.empty()) {
      Shell("podman ps -a -q --filter label=" + std::string(kRunLabel) + "=" + run_id_ +
            " | xargs -r podman rm -f -t 0");
    }
    if (!run_id_.empty()) {
      Shell("podman network ls -q --filter label=" + std::string(kRunLabel) + "=" + run_id_ +
            " | xargs -r podman network rm -f");
    }
    if (engine_started_) Shell(SourceDir() + "/scripts/engine.sh stop " + dir_.string());
    if (!dir_.empty()) fs::remove_all(dir_);
  }

  ContainerSpec Spec(const std::string& suffix) const {
    return ContainerSpec{
        .name = run_id_ + "-" + suffix,
        .image = kImage,
        .hostname = "alpha-" + run_id_,
        .labels = {{kRunLabel, run_id_}, {"io.gpuwerk.instance", "ins_" + suffix}},
        .memory_bytes = 256 << 20,
    };
  }

  /// `podman` against this test's service.
  Output Podman(const std::string& args) const {
    return Shell("podman --url unix://" + socket_ + " " + args);
  }

  /// A stock OpenSSH client logging in as root with the test key.
  Output Ssh(uint16_t port, const std::string& command) const {
    return Shell("ssh -i " + (dir_ / "id_ed25519").string() + " -p " + std::to_string(port) +
                 " -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o BatchMode=yes"
                 " -o ConnectTimeout=5 -o LogLevel=ERROR root@127.0.0.1 '" +
                 command + "'");
  }

  /// Waits until `ssh … hostname` prints `hostname` (sshd up, key accepted), at most `limit`.
  bool WaitForSsh(uint16_t port, const std::string& hostname, Clock::duration limit,
                  std::string* last) const {
    const auto deadline = Clock::now() + limit;
    while (Clock::now() < deadline) {
      Output out = Ssh(port, "hostname");
      *last = out.text;
      if (out.rc == 0 && core::TrimEnd(out.text, core::kWhitespace) == hostname) return true;
      std::this_thread::sleep_for(milliseconds(100));
    }
    return false;
  }

  /// A fresh ed25519 key pair; returns the public key line.
  std::string NewKey() const {
    const std::string key = (dir_ / "id_ed25519").string();
    Output out = Shell("ssh-keygen -q -t ed25519 -N '' -C gpuwerk-test -f " + key);
    EXPECT_EQ(out.rc, 0) << out.text;
    std::ifstream in(key + ".pub");
    std::string line;
    std::getline(in, line);
    return line;
  }

  fs::path dir_;
  std::string socket_;
  std::string run_id_;
  bool engine_started_ = false;
  std::unique_ptr<DockerEngine> engine_;
};

TEST_F(DockerEngineTest, C05_C10_C12_Lifecycle) {
  auto version = engine_->Version(kCallTimeout);
  ASSERT_TRUE(version) << version.error().message;
  EXPECT_FALSE(version->version.empty());
  ASSERT_TRUE(engine_->Ping(kCallTimeout));
  auto has_image = engine_->ImageExists(kImage, kCallTimeout);
  ASSERT_TRUE(has_image) << has_image.error().message;
  EXPECT_TRUE(*has_image);

  const std::string public_key = NewKey();
  const ContainerSpec spec = Spec("life");

  // Create, put the key in, start; then a stock ssh gets in and sees the spec's hostname.
  const auto t_create = Clock::now();
  auto id = engine_->CreateContainer(spec, kCallTimeout);
  ASSERT_TRUE(id) << id.error().message;
  auto info = engine_->InspectContainer(*id, kCallTimeout);
  ASSERT_TRUE(info) << info.error().message;
  EXPECT_EQ(info->state, ContainerState::kCreated);
  ASSERT_TRUE(engine_->PutArchive(*id, kAuthorizedKeysArchiveRoot, AuthorizedKeysTar({public_key}),
                                  kCallTimeout));
  ASSERT_TRUE(engine_->StartContainer(*id, kCallTimeout));
  ASSERT_TRUE(engine_->StartContainer(*id, kCallTimeout));  // already running: fine

  info = engine_->InspectContainer(*id, kCallTimeout);
  ASSERT_TRUE(info) << info.error().message;
  EXPECT_EQ(info->id, *id);
  EXPECT_EQ(info->name, spec.name);
  EXPECT_EQ(info->image, kImage);
  EXPECT_EQ(info->state, ContainerState::kRunning);
  EXPECT_EQ(info->labels.at("io.gpuwerk.instance"), "ins_life");
  ASSERT_NE(info->ssh_port, 0);
  const uint16_t port = info->ssh_port;
  const std::string first_start = info->started_at;

  std::string last;
  ASSERT_TRUE(WaitForSsh(port, spec.hostname, std::chrono::seconds(60), &last)) << last;
  std::cout << "[ timing ] create → ssh ready in " << Seconds(Clock::now() - t_create) << " s\n";

  // C05: the owner and modes sshd insists on.
  Output modes = Ssh(port, "stat -c \"%a %u %g %n\" /root/.ssh /root/.ssh/authorized_keys");
  ASSERT_EQ(modes.rc, 0) << modes.text;
  EXPECT_EQ(modes.text, "700 0 0 /root/.ssh\n600 0 0 /root/.ssh/authorized_keys\n");
  // The memory limit applies, and sshd is published on 127.0.0.1 only.
  Output memory = Podman("inspect --format '{{.HostConfig.Memory}}' " + spec.name);
  EXPECT_EQ(core::TrimEnd(memory.text, core::kWhitespace), std::to_string(256 << 20));
  Output listening = Shell("ss -Htln 'sport = :" + std::to_string(port) + "' | awk '{print $4}'");
  EXPECT_EQ(listening.text, "127.0.0.1:" + std::to_string(port) + "\n");

  // Restart keeps the container's files and the key (C10: confirmed by inspect and a login).
  ASSERT_EQ(Ssh(port, "echo kept > /root/marker").rc, 0);
  const auto t_restart = Clock::now();
  auto restarted = engine_->RestartContainer(*id, 2, kCallTimeout);
  ASSERT_TRUE(restarted) << restarted.error().message;
  info = engine_->InspectContainer(*id, kCallTimeout);
  ASSERT_TRUE(info);
  EXPECT_EQ(info->state, ContainerState::kRunning);
  EXPECT_NE(info->started_at, first_start);
  ASSERT_NE(info->ssh_port, 0);
  ASSERT_TRUE(WaitForSsh(info->ssh_port, spec.hostname, std::chrono::seconds(60), &last)) << last;
  std::cout << "[ timing ] restart → ssh ready in " << Seconds(Clock::now() - t_restart) << " s\n";
  Output marker = Ssh(info->ssh_port, "cat /root/marker");
  EXPECT_EQ(marker.text, "kept\n");

  // C12: someone stops it by hand on the host; inspect says so.
  Output stopped = Podman("stop -t 1 " + spec.name);
  ASSERT_EQ(stopped.rc, 0) << stopped.text;
  info = engine_->InspectContainer(*id, kCallTimeout);
  ASSERT_TRUE(info);
  EXPECT_EQ(info->state, ContainerState::kExited);
  EXPECT_NE(info->finished_at, "0001-01-01T00:00:00Z");

  // Listing by label finds it (in any state); a label value nobody has finds nothing.
  auto list = engine_->ListContainers({{kRunLabel, run_id_}}, kCallTimeout);
  ASSERT_TRUE(list) << list.error().message;
  ASSERT_EQ(list->size(), 1u);
  EXPECT_EQ((*list)[0].id, *id);
  EXPECT_EQ((*list)[0].name, spec.name);
  EXPECT_EQ((*list)[0].state, ContainerState::kExited);
  EXPECT_EQ((*list)[0].labels.at("io.gpuwerk.instance"), "ins_life");
  list = engine_->ListContainers({{kRunLabel, run_id_ + "-nobody"}}, kCallTimeout);
  ASSERT_TRUE(list);
  EXPECT_TRUE(list->empty());

  // The name is taken while it exists.
  auto again = engine_->CreateContainer(spec, kCallTimeout);
  ASSERT_FALSE(again);
  EXPECT_EQ(again.error().code, ErrorCode::kAlreadyExists);
  EXPECT_EQ(again.error().api_code, "container_exists");

  // Remove; gone; removing again is fine; the name is free again.
  ASSERT_TRUE(engine_->RemoveContainer(*id, true, kCallTimeout));
  info = engine_->InspectContainer(*id, kCallTimeout);
  ASSERT_FALSE(info);
  EXPECT_EQ(info.error().code, ErrorCode::kNotFound);
  EXPECT_EQ(info.error().api_code, "container_not_found");
  EXPECT_TRUE(engine_->RemoveContainer(*id, true, kCallTimeout));
  EXPECT_TRUE(engine_->RemoveContainer(spec.name, false, kCallTimeout));
  list = engine_->ListContainers({{kRunLabel, run_id_}}, kCallTimeout);
  ASSERT_TRUE(list);
  EXPECT_TRUE(list->empty());
}

// Issue 11 (limits): a container made from the instance spec keeps only the documented
// capabilities (docs/isolation.md), cannot gain privileges, and has the memory, CPU and pids
// limits it was given — read back from inside after a real login with a stock ssh (which proves
// that sshd works with that set); an allocation beyond the memory limit kills only the process
// that made it, and the container and its sshd stay up.
TEST_F(DockerEngineTest, InstanceKeepsOnlyItsCapabilitiesAndLimits) {
  const std::string public_key = NewKey();
  ContainerSpec spec = Spec("limits");
  spec.memory_bytes = 256 << 20;
  spec.nano_cpus = 500'000'000;
  spec.pids_limit = 300;
  auto id = engine_->CreateContainer(spec, kCallTimeout);
  ASSERT_TRUE(id) << id.error().message;
  ASSERT_TRUE(engine_->PutArchive(*id, kAuthorizedKeysArchiveRoot, AuthorizedKeysTar({public_key}),
                                  kCallTimeout));
  ASSERT_TRUE(engine_->StartContainer(*id, kCallTimeout));
  auto info = engine_->InspectContainer(*id, kCallTimeout);
  ASSERT_TRUE(info) << info.error().message;
  std::string last;
  ASSERT_TRUE(WaitForSsh(info->ssh_port, spec.hostname, std::chrono::seconds(60), &last)) << last;

  // sshd (PID 1) and the login shell: exactly the documented set, and no_new_privs.
  Output status = Ssh(info->ssh_port,
                      "grep -E \"^(CapEff|CapBnd|NoNewPrivs):\" /proc/1/status /proc/self/status");
  ASSERT_EQ(status.rc, 0) << status.text;
  const std::string mask = fmt::format(
      "{:016x}", CapabilityMask({kInstanceCapabilities.begin(), kInstanceCapabilities.end()}));
  EXPECT_EQ(status.text, "/proc/1/status:CapEff:\t" + mask + "\n/proc/1/status:CapBnd:\t" + mask +
                             "\n/proc/1/status:NoNewPrivs:\t1\n/proc/self/status:CapEff:\t" + mask +
                             "\n/proc/self/status:CapBnd:\t" + mask +
                             "\n/proc/self/status:NoNewPrivs:\t1\n");
  EXPECT_EQ(status.text.find("00000000a80425fb"), std::string::npos);  // the engine's default

  // The cgroup limits as the container sees them (cgroup v2 files, else v1's).
  Output limits = Ssh(
      info->ssh_port,
      "cd /sys/fs/cgroup; if [ -f memory.max ]; then cat memory.max cpu.max pids.max; else "
      "cat memory/memory.limit_in_bytes; echo $(cat cpu/cpu.cfs_quota_us cpu/cpu.cfs_period_us); "
      "cat pids/pids.max; fi");
  ASSERT_EQ(limits.rc, 0) << limits.text;
  EXPECT_EQ(limits.text, std::to_string(256 << 20) + "\n50000 100000\n300\n");

  // Beyond the memory limit: the kernel kills the allocating process (tail keeps the whole
  // line), not sshd; the login goes on and the next one works.
  Output hog = Ssh(info->ssh_port, "head -c 400M /dev/zero | tail; echo tail=$?");
  EXPECT_NE(hog.text.find("tail=137"), std::string::npos) << hog.text;
  Output after = Ssh(info->ssh_port, "hostname");
  EXPECT_EQ(after.rc, 0) << after.text;
  EXPECT_EQ(core::TrimEnd(after.text, core::kWhitespace), spec.hostname);
  info = engine_->InspectContainer(*id, kCallTimeout);
  ASSERT_TRUE(info) << info.error().message;
  EXPECT_EQ(info->state, ContainerState::kRunning);
  EXPECT_FALSE(info->oom_killed);
}

// An instance network: created once (a second create says network_exists), listed by label, the
// container joins it instead of the default bridge and gets an address there, it cannot go while
// the container is attached, and removing it is idempotent.
TEST_F(DockerEngineTest, InstanceNetworkIsCreatedJoinedAndRemoved) {
  const NetworkSpec network{.name = InstanceNetworkName(run_id_),
                            .labels = {{kRunLabel, run_id_}, {"io.gpuwerk.network", "x"}}};
  ASSERT_TRUE(engine_->CreateNetwork(network, kCallTimeout));
  auto again = engine_->CreateNetwork(network, kCallTimeout);
  ASSERT_FALSE(again);
  EXPECT_EQ(again.error().api_code, "network_exists");
  EXPECT_EQ(
      engine_->CreateNetwork({.name = "gwi-name-far-too-long"}, kCallTimeout).error().api_code,
      "invalid_network_spec");
  auto listed = engine_->ListNetworks({{kRunLabel, run_id_}}, kCallTimeout);
  ASSERT_TRUE(listed) << listed.error().message;
  ASSERT_EQ(listed->size(), 1u);
  EXPECT_EQ(listed->at(0).name, network.name);
  EXPECT_EQ(listed->at(0).labels.at("io.gpuwerk.network"), "x");

  ContainerSpec spec = Spec("net");
  spec.network = network.name;
  auto id = engine_->CreateContainer(spec, kCallTimeout);
  ASSERT_TRUE(id) << id.error().message;
  ASSERT_TRUE(engine_->StartContainer(*id, kCallTimeout));
  Output joined = Podman(
      "inspect --format '{{range $k, $v := .NetworkSettings.Networks}}{{$k}} "
      "{{$v.IPAddress}}{{end}}' " +
      *id);
  ASSERT_EQ(joined.rc, 0) << joined.text;
  EXPECT_TRUE(joined.text.starts_with(network.name + " 10.")) << joined.text;

  auto busy = engine_->RemoveNetwork(network.name, kCallTimeout);
  ASSERT_FALSE(busy);
  EXPECT_EQ(busy.error().api_code, "network_in_use") << busy.error().message;
  ASSERT_TRUE(engine_->RemoveContainer(*id, true, kCallTimeout));
  EXPECT_TRUE(engine_->RemoveNetwork(network.name, kCallTimeout));
  EXPECT_TRUE(engine_->RemoveNetwork(network.name, kCallTimeout));  // already gone
  listed = engine_->ListNetworks({{kRunLabel, run_id_}}, kCallTimeout);
  ASSERT_TRUE(listed) << listed.error().message;
  EXPECT_TRUE(listed->empty());
}

TEST_F(DockerEngineTest, RunningContainerIsNotRemovedWithoutForce) {
  auto id = engine_->CreateContainer(Spec("busy"), kCallTimeout);
  ASSERT_TRUE(id) << id.error().message;
  ASSERT_TRUE(engine_->StartContainer(*id, kCallTimeout));
  auto removed = engine_->RemoveContainer(*id, false, kCallTimeout);
  ASSERT_FALSE(removed);
  EXPECT_EQ(removed.error().code, ErrorCode::kFailedPrecondition);
  EXPECT_EQ(removed.error().api_code, "container_conflict");
  EXPECT_TRUE(engine_->RemoveContainer(*id, true, kCallTimeout));
}

TEST_F(DockerEngineTest, MissingImageIsImageNotFoundAndLeavesNoContainer) {
  ContainerSpec spec = Spec("noimage");
  spec.image = "localhost/gpuwerk-no-such-image:" + run_id_;
  auto exists = engine_->ImageExists(spec.image, kCallTimeout);
  ASSERT_TRUE(exists) << exists.error().message;
  EXPECT_FALSE(*exists);
  auto id = engine_->CreateContainer(spec, kCallTimeout);
  ASSERT_FALSE(id);
  EXPECT_EQ(id.error().code, ErrorCode::kFailedPrecondition);
  EXPECT_EQ(id.error().api_code, "image_not_found");
  EXPECT_NE(id.error().message.find(spec.image), std::string::npos) << id.error().message;
  auto list = engine_->ListContainers({{kRunLabel, run_id_}}, kCallTimeout);
  ASSERT_TRUE(list) << list.error().message;
  EXPECT_TRUE(list->empty());
}

TEST_F(DockerEngineTest, MissingContainerIsNotFoundEverywhere) {
  const std::string name = run_id_ + "-never";
  auto info = engine_->InspectContainer(name, kCallTimeout);
  ASSERT_FALSE(info);
  EXPECT_EQ(info.error().api_code, "container_not_found");
  for (auto r : {engine_->StartContainer(name, kCallTimeout),
                 engine_->RestartContainer(name, 1, kCallTimeout),
                 engine_->PutArchive(name, "/", AuthorizedKeysTar({}), kCallTimeout)}) {
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().code, ErrorCode::kNotFound);
    EXPECT_EQ(r.error().api_code, "container_not_found");
  }
  EXPECT_TRUE(engine_->RemoveContainer(name, true, kCallTimeout));
}

TEST_F(DockerEngineTest, EngineGoneIsUnavailableQuickly) {
  ASSERT_TRUE(engine_->Ping(kCallTimeout));
  Output stopped = Shell(SourceDir() + "/scripts/engine.sh stop " + dir_.string());
  ASSERT_EQ(stopped.rc, 0) << stopped.text;
  const auto start = Clock::now();
  auto info = engine_->InspectContainer("alpha", kCallTimeout);
  ASSERT_FALSE(info);
  EXPECT_EQ(info.error().code, ErrorCode::kUnavailable);
  EXPECT_EQ(info.error().api_code, "engine_unavailable");
  EXPECT_NE(info.error().message.find(socket_), std::string::npos) << info.error().message;
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(1));
}

// docs/agent-protocol.md "Host key": the container's sshd host key read through the archive
// download (nothing runs inside) is the key its sshd presents (ssh-keyscan), and another
// container of the same image has its own.
TEST_F(DockerEngineTest, SshdHostKeyReadByArchiveIsTheKeyItsSshdPresents) {
  const std::string public_key = NewKey();
  std::vector<std::string> read;
  for (const char* suffix : {"hk1", "hk2"}) {
    const ContainerSpec spec = Spec(suffix);
    auto id = engine_->CreateContainer(spec, kCallTimeout);
    ASSERT_TRUE(id) << id.error().message;
    // No key yet: the image has none; the container makes them at its first start.
    EXPECT_EQ(ReadSshHostKey(*engine_, *id, kCallTimeout).error().api_code, "container_not_found");
    ASSERT_TRUE(engine_->PutArchive(*id, kAuthorizedKeysArchiveRoot,
                                    AuthorizedKeysTar({public_key}), kCallTimeout));
    ASSERT_TRUE(engine_->StartContainer(*id, kCallTimeout));
    auto info = engine_->InspectContainer(*id, kCallTimeout);
    ASSERT_TRUE(info) << info.error().message;
    std::string last;
    ASSERT_TRUE(WaitForSsh(info->ssh_port, spec.hostname, std::chrono::seconds(60), &last)) << last;
    auto key = ReadSshHostKey(*engine_, *id, kCallTimeout);
    ASSERT_TRUE(key) << key.error().message;
    Output scan = Shell("ssh-keyscan -t ed25519 -p " + std::to_string(info->ssh_port) +
                        " 127.0.0.1 2>/dev/null | awk '{print $2\" \"$3}'");
    ASSERT_EQ(scan.rc, 0) << scan.text;
    EXPECT_EQ(core::TrimEnd(scan.text, core::kWhitespace), *key);
    read.push_back(*key);
  }
  EXPECT_NE(read[0], read[1]);
}

// Issue 12 finding 9: the keys are a read-only bind of the agent's own host directory; sshd in
// the container reads them from there (C05's owner and modes), the tenant (root inside) can
// neither change nor remove them, and the agent rewrites them on the host without running
// anything in the container: the old key is refused at once, no restart.
TEST_F(DockerEngineTest, Finding9_KeysAreAReadOnlyMountTheTenantCannotChange) {
  const std::string first = NewKey();
  ContainerSpec spec = Spec("keys");
  auto paths = AgentKeysPathsFor(dir_ / "keys", spec.name);
  ASSERT_TRUE(paths) << paths.error().message;
  ASSERT_TRUE(WriteAgentKeys(*paths, {first}));
  spec.binds = AgentKeysBinds(*paths);
  auto id = engine_->CreateContainer(spec, kCallTimeout);
  ASSERT_TRUE(id) << id.error().message;
  ASSERT_TRUE(engine_->StartContainer(*id, kCallTimeout));
  auto info = engine_->InspectContainer(*id, kCallTimeout);
  ASSERT_TRUE(info) << info.error().message;
  std::string last;
  ASSERT_TRUE(WaitForSsh(info->ssh_port, spec.hostname, std::chrono::seconds(60), &last)) << last;
  Output modes = Ssh(info->ssh_port,
                     "stat -c \"%a %u %g %n\" /etc/ssh/gpuwerk /etc/ssh/gpuwerk/authorized_keys; "
                     "ls -A /etc/ssh/gpuwerk");
  EXPECT_EQ(modes.text,
            "700 0 0 /etc/ssh/gpuwerk\n600 0 0 /etc/ssh/gpuwerk/authorized_keys\n"
            "authorized_keys\n");

  // The tenant, root in the container, tries to take the file: every change fails, and
  // replacing /root/.ssh with a symlink changes nothing for the agent's file.
  for (const char* attempt :
       {"echo x >> /etc/ssh/gpuwerk/authorized_keys", "rm -f /etc/ssh/gpuwerk/authorized_keys",
        "mv /etc/ssh/gpuwerk /etc/ssh/moved", "umount /etc/ssh/gpuwerk",
        "mount -o remount,rw /etc/ssh/gpuwerk",
        "rm -f /etc/ssh/sshd_config.d/00-gpuwerk-keys.conf"}) {
    Output tried = Ssh(info->ssh_port, attempt);
    EXPECT_NE(tried.rc, 0) << attempt << ": " << tried.text;
  }
  ASSERT_EQ(Ssh(info->ssh_port, "rm -rf /root/.ssh; ln -s /proc/self /root/.ssh").rc, 0);
  EXPECT_EQ(Ssh(info->ssh_port, "cat /etc/ssh/gpuwerk/authorized_keys").text, first + "\n");

  // Rewritten on the host with another key only: the old key is refused at once, the new one
  // works, the container never restarted.
  const fs::path second_path = dir_ / "second";
  ASSERT_EQ(Shell("ssh-keygen -q -t ed25519 -N '' -C second -f " + second_path.string()).rc, 0);
  std::string second;
  std::getline(std::ifstream(second_path.string() + ".pub"), second);
  ASSERT_TRUE(WriteAgentKeys(*paths, {second}));
  EXPECT_NE(Ssh(info->ssh_port, "true").rc, 0);
  Output with_second =
      Shell("ssh -i " + second_path.string() + " -p " + std::to_string(info->ssh_port) +
            " -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o BatchMode=yes"
            " -o ConnectTimeout=5 -o LogLevel=ERROR root@127.0.0.1 "
            "cat /etc/ssh/gpuwerk/authorized_keys");
  ASSERT_EQ(with_second.rc, 0) << with_second.text;
  EXPECT_EQ(with_second.text, second + "\n");
  auto after = engine_->InspectContainer(*id, kCallTimeout);
  ASSERT_TRUE(after);
  EXPECT_EQ(after->started_at, info->started_at);

  // Stopped, rewritten, started: the next start has the file.
  Output stopped = Podman("stop -t 1 " + spec.name);
  ASSERT_EQ(stopped.rc, 0) << stopped.text;
  ASSERT_TRUE(WriteAgentKeys(*paths, {first}));
  ASSERT_TRUE(engine_->StartContainer(*id, kCallTimeout));
  info = engine_->InspectContainer(*id, kCallTimeout);
  ASSERT_TRUE(info);
  ASSERT_TRUE(WaitForSsh(info->ssh_port, spec.hostname, std::chrono::seconds(60), &last)) << last;
  ASSERT_TRUE(engine_->RemoveContainer(*id, true, kCallTimeout));
}

// Issue 12 finding 9, a container made before the read-only mount: its keys go in by the
// engine's archive upload. A tenant who made /root/.ssh a symlink to a path that exists on the
// host as well does not get the upload written on the host: the engine unpacks inside the
// container's root.
TEST_F(DockerEngineTest, Finding9_ArchiveUploadDoesNotFollowATenantSymlinkOutOfTheContainer) {
  const std::string key = NewKey();
  const ContainerSpec spec = Spec("legacy");
  auto id = engine_->CreateContainer(spec, kCallTimeout);
  ASSERT_TRUE(id) << id.error().message;
  ASSERT_TRUE(WriteAuthorizedKeysByArchive(*engine_, *id, {key}, kCallTimeout));
  ASSERT_TRUE(engine_->StartContainer(*id, kCallTimeout));
  auto info = engine_->InspectContainer(*id, kCallTimeout);
  ASSERT_TRUE(info) << info.error().message;
  std::string last;
  ASSERT_TRUE(WaitForSsh(info->ssh_port, spec.hostname, std::chrono::seconds(60), &last)) << last;
  const fs::path outside = dir_ / "outside";
  fs::create_directories(outside);
  ASSERT_EQ(Ssh(info->ssh_port, "mkdir -p " + outside.string() + " && rm -rf /root/.ssh && ln -s " +
                                    outside.string() + " /root/.ssh")
                .rc,
            0);
  auto put = WriteAuthorizedKeysByArchive(*engine_, *id, {key}, kCallTimeout);
  // Whatever the engine made of it inside the container, nothing reached the host's directory.
  std::cout << "[ measured ] archive upload over a symlinked /root/.ssh: "
            << (put ? std::string("accepted") : put.error().api_code) << "\n";
  size_t entries = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(outside)) ++entries;
  EXPECT_EQ(entries, 0u);
  ASSERT_TRUE(engine_->RemoveContainer(*id, true, kCallTimeout));
}

}  // namespace
}  // namespace gpuwerk::agent

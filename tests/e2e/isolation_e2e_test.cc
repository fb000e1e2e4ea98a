// Tenant isolation of instance networks, end to end: the real `gpuwerk server`, two `gpuwerk agent`
// processes (two hosts on this one machine, one real podman API service), a real `gpuwerk relay`,
// the real instance image and the stock ssh client. Two people each have an instance; what one
// instance can reach is tried from inside the other with bash's /dev/tcp, and through the relay
// with `ssh -L`. Needs root (rootful podman, iptables). docs/isolation.md describes the rules.
#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "tests/support/child_process.h"
#include "tests/support/e2e_engine.h"
#include "tests/support/e2e_platform.h"
#include "tests/support/e2e_relay.h"
#include "tests/support/engine_probe.h"
#include "tests/support/eventually.h"
#include "tests/support/host_waits.h"
#include "tests/support/http_client.h"
#include "tests/support/net.h"
#include "tests/support/run_command.h"
#include "tests/support/sign_up.h"
#include "tests/support/ssh_keygen.h"
#include "tests/support/temp_dir.h"

namespace gpuwerk::testing {
namespace {

const auto* const kEngine = RegisterEngineEnvironment("gpuwerk-isolation-engine");

namespace fs = std::filesystem;
using nlohmann::json;
using std::chrono::milliseconds;
using std::chrono::seconds;

/// The label of an instance network (agent/network_isolation.h kNetworkInstanceLabel).
constexpr const char* kNetworkLabel = "gpuwerk.network.instance";
/// An address the test puts on a veth interface of this machine and lets instances reach
/// (--instance-network-allow): it stands for "the outside" (TEST-NET-2, RFC 5737).
constexpr const char* kOutsideAddress = "198.51.100.7";
constexpr const char* kOutsideInterface = "gwtout0";

/// A TCP listener on this machine that answers each connection with `banner` and closes it.
class BannerServer {
 public:
  BannerServer(const std::string& address, std::string banner) : banner_(std::move(banner)) {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    const int one = 1;
    ::setsockopt(fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    ::inet_pton(AF_INET, address.c_str(), &addr.sin_addr);
    socklen_t len = sizeof addr;
    if (::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
        ::listen(fd_, 16) != 0 ||
        ::getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
      return;
    }
    port_ = ntohs(addr.sin_port);
    thread_ = std::thread([this] {
      while (!stop_) {
        pollfd p{fd_, POLLIN, 0};
        if (::poll(&p, 1, 100) <= 0) continue;
        const int c = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
        if (c < 0) continue;
        ++accepted_;
        (void)!::write(c, banner_.data(), banner_.size());
        ::close(c);
      }
    });
  }
  ~BannerServer() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
    if (fd_ >= 0) ::close(fd_);
  }
  int port() const { return port_; }
  int accepted() const { return accepted_; }

 private:
  std::string banner_;
  int fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<int> accepted_{0};
  std::thread thread_;
};

/// What a TCP connection to `address`:`port` on this machine reads within `limit` ("" when the
/// connection fails or closes without a byte).
std::string ReadBanner(const std::string& address, int port, milliseconds limit = seconds(5)) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  ::inet_pton(AF_INET, address.c_str(), &addr.sin_addr);
  std::string got;
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0) {
    const auto end = std::chrono::steady_clock::now() + limit;
    while (std::chrono::steady_clock::now() < end && got.size() < 4096) {
      pollfd p{fd, POLLIN, 0};
      if (::poll(&p, 1, 100) <= 0) continue;
      char buf[512];
      const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
      if (n <= 0) break;
      got.append(buf, static_cast<size_t>(n));
    }
  }
  ::close(fd);
  return got;
}

/// The `-A HOOK -j CHAIN` lines of `tool -S HOOK` that jump to one of the agent's chains.
int HookCount(const std::string& tool, const std::string& hook, const std::string& chain) {
  CommandResult r = Script(tool + " -w 5 -S " + hook);
  int n = 0;
  std::istringstream lines(r.out);
  for (std::string line; std::getline(lines, line);) {
    if (line == "-A " + hook + " -j " + chain) ++n;
  }
  return n;
}

class IsolationE2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << EngineEnvironment::setup_error();
    ASSERT_EQ(EngineEnvironment::setup_error(), "");
    engine_ = std::make_unique<EngineProbe>(EngineEnvironment::socket());
    ASSERT_TRUE(engine_->Up()) << "the suite's engine does not answer on "
                               << EngineEnvironment::socket();
    Script(std::string("ip link del ") + kOutsideInterface + " 2>/dev/null");
    CommandResult link =
        Script(std::string("ip link add ") + kOutsideInterface + " type veth peer name " +
               std::string(kOutsideInterface) + "p && ip addr add " + kOutsideAddress + "/32 dev " +
               kOutsideInterface + " && ip link set " + kOutsideInterface + "p up && ip link set " +
               kOutsideInterface + " up");
    ASSERT_EQ(link.exit_code, 0) << "cannot add the veth pair: " << link.err;
  }

  void TearDown() override {
    for (auto& f : forwards_) f->Stop(seconds(5));
    relay_.Stop(seconds(10));
    platform_.Stop();
    if (HasFailure()) {
      platform_.PrintLogs();
      std::cerr << "---- relay log\n" << Tail(dir_.path() / "relay.log") << "\n----\n";
    }
    if (engine_ && engine_->Up()) {
      for (const auto& id : instances_) {
        json list = engine_->ContainersWithLabel(kInstanceLabel, id);
        if (list.is_array()) {
          for (const auto& c : list) engine_->ForceRemove(c["Id"].get<std::string>());
        }
        for (const std::string& name : NetworksOf(id)) {
          engine_->Send("DELETE", "/v1.41/networks/" + name);
        }
      }
    }
    Script(std::string("ip link del ") + kOutsideInterface + " 2>/dev/null");
    // The agents leave their chains installed (host state, like an engine's own rules): this
    // test removes them, so that nothing of it stays on the machine.
    for (const char* tool : {"iptables", "ip6tables"}) {
      for (const char* hook : {"INPUT", "FORWARD", "OUTPUT"}) {
        const std::string chain = std::string("GPUWERK-ISOLATION-") + hook;
        while (HookCount(tool, hook, chain) > 0) {
          if (Script(std::string(tool) + " -w 5 -D " + hook + " -j " + chain).exit_code != 0) {
            break;
          }
        }
        Script(std::string(tool) + " -w 5 -F " + chain + " 2>/dev/null; " + tool + " -w 5 -X " +
               chain + " 2>/dev/null");
      }
    }
  }

  /// The names of the engine's networks labelled for `instance_id`.
  std::vector<std::string> NetworksOf(const std::string& instance_id) {
    const std::string filter =
        json{{"label", json::array({std::string(kNetworkLabel) + "=" + instance_id})}}.dump();
    std::string escaped;
    for (unsigned char ch : filter) {
      if (std::isalnum(ch) || ch == '-' || ch == '_' || ch == '.') {
        escaped += static_cast<char>(ch);
      } else {
        char buf[4];
        std::snprintf(buf, sizeof buf, "%%%02X", ch);
        escaped += buf;
      }
    }
    auto r = engine_->Send("GET", "/v1.41/networks?filters=" + escaped);
    std::vector<std::string> out;
    const json j = r.Json();
    if (r.status != 200 || !j.is_array()) return out;
    for (const auto& n : j) out.push_back(n["Name"].get<std::string>());
    return out;
  }

  void StartServer() {
    platform_.StartServer();
    if (HasFatalFailure()) return;
    op_ = platform_.Operator();
    ASSERT_FALSE(HasFailure());
  }

  /// The relay, logging in to instances with its key and a certificate per instance from a CA
  /// made here (the CA's public line goes to the agents), asking the server with its own relay
  /// credential (registered here).
  void StartRelay() {
    StartE2eRelay(*op_, "isolation-e2e", platform_.url(), dir_.path(), relay_, &relay_line_,
                  &relay_port_);
  }

  /// Registers host `index` (spark-1x, no GPU) and starts its agent on the suite's engine,
  /// trusting the relay's CA for each instance's certificates, "the outside" allowed.
  void StartAgent(int index) {
    E2eHost& host = platform_.AddHost(*op_, "spark-iso-" + std::to_string(index));
    ASSERT_FALSE(host.token.empty());
    platform_.StartAgent(host, {"--relay-ca", relay_line_, "--instance-network-allow",
                                std::string(kOutsideAddress) + "/32"});
  }

  /// A person with a key and a running instance named `name`.
  struct Tenant {
    std::unique_ptr<HttpClient> api;
    GeneratedKey key;
    std::string id;
    std::string hostname;
    int ssh_port = 0;  ///< sshd's published port on 127.0.0.1
    std::string ip;    ///< the container's address on its network
    std::string gateway;
    std::string network;
  };

  void Launch(Tenant& t, const std::string& email, const std::string& name) {
    t.api = std::make_unique<HttpClient>(platform_.url());
    ASSERT_TRUE(SignUpAndProve(*t.api, platform_.data() / "mail", email, kPassword));
    ASSERT_TRUE(RecordCard(*op_, email));  // so that they can launch
    t.key = GenerateKey(dir_.path(), name + "-key");
    auto r = t.api->PostJson("/api/v1/ssh-keys",
                             {{"name", "laptop"}, {"public_key", t.key.public_line}});
    ASSERT_EQ(r.status, 201) << r.body;
    const std::string key_id = r.Json()["id"];
    r = t.api->PostJson("/api/v1/instances",
                        {{"name", name}, {"ssh_key_id", key_id}, {"gpu_type", "spark-1x"}});
    ASSERT_EQ(r.status, 201) << r.body;
    t.id = r.Json()["id"];
    t.hostname = r.Json()["hostname"];
    instances_.insert(t.id);
  }

  /// Waits until `t` runs, then reads its container's network from the engine.
  void AwaitRunning(Tenant& t) {
    json last;
    ASSERT_TRUE(Eventually(
        [&] {
          auto r = t.api->Get("/api/v1/instances/" + t.id);
          last = r.Json();
          return r.status == 200 && last["status"] == "running";
        },
        seconds(120)))
        << "instance " << t.id << " never ran; last: " << last.dump();
    json list = engine_->ContainersWithLabel(kInstanceLabel, t.id);
    ASSERT_TRUE(list.is_array() && list.size() == 1) << list.dump();
    json c = engine_->Inspect(list[0]["Id"].get<std::string>());
    ASSERT_TRUE(c.is_object());
    t.ssh_port =
        std::stoi(c["NetworkSettings"]["Ports"]["22/tcp"][0]["HostPort"].get<std::string>());
    const json& networks = c["NetworkSettings"]["Networks"];
    ASSERT_TRUE(networks.is_object() && networks.size() == 1) << networks.dump();
    t.network = networks.begin().key();
    t.ip = networks.begin().value()["IPAddress"];
    t.gateway = networks.begin().value()["Gateway"];
  }

  /// Runs `script` with bash inside `t`'s instance, through its published sshd.
  CommandResult In(const Tenant& t, const std::string& script) {
    return RunCommand(dir_.path(),
                      "ssh -i " + t.key.private_path.string() + " -p " +
                          std::to_string(t.ssh_port) +
                          " -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null"
                          " -o BatchMode=yes -o ConnectTimeout=10 -o LogLevel=ERROR"
                          " root@127.0.0.1 bash -s",
                      script);
  }

  /// What `t`'s instance reads from `address`:`port` within 4 s ("" when refused or silent).
  std::string ReadFrom(const Tenant& t, const std::string& address, int port) {
    CommandResult r = In(t, "timeout 4 bash -c 'exec 3<>/dev/tcp/" + address + "/" +
                                std::to_string(port) + " && cat <&3' 2>/dev/null; true\n");
    EXPECT_EQ(r.exit_code, 0) << "ssh into " << t.hostname << " failed: " << r.err;
    return r.out;
  }

  /// Starts a service in `t`'s instance on 0.0.0.0:`port` that answers `banner`, and waits until
  /// the instance itself reads it.
  void Serve(const Tenant& t, int port, const std::string& banner) {
    CommandResult r = In(
        t,
        "setsid perl -MIO::Socket::INET -e '$s=IO::Socket::INET->new(LocalAddr=>\"0.0.0.0\","
        "LocalPort=>" +
            std::to_string(port) +
            ",Listen=>5,ReuseAddr=>1) or die; while($c=$s->accept){print $c \"" + banner +
            "\\n\"; close $c}' </dev/null >/dev/null 2>&1 &\n"
            "for i in $(seq 50); do timeout 1 bash -c 'exec 3<>/dev/tcp/127.0.0.1/" +
            std::to_string(port) + " && cat <&3' 2>/dev/null && exit 0; sleep 0.1; done; exit 1\n");
    ASSERT_EQ(r.exit_code, 0) << "the service in " << t.hostname << " did not come up: " << r.err;
    ASSERT_EQ(r.out, banner + "\n");
  }

  /// `ssh -N -L 127.0.0.1:LOCAL:target` through the relay into `t`; returns LOCAL once listening.
  int ForwardThroughRelay(const Tenant& t, const std::string& target) {
    const int local = FreePort();
    auto child = std::make_unique<ChildProcess>();
    EXPECT_TRUE(child->Start(
        {"/usr/bin/ssh", "-N", "-p", std::to_string(relay_port_), "-i", t.key.private_path.string(),
         "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null", "-o",
         "BatchMode=yes", "-o", "ExitOnForwardFailure=yes", "-o", "LogLevel=ERROR", "-L",
         "127.0.0.1:" + std::to_string(local) + ":" + target, t.hostname + "@127.0.0.1"},
        CleanEnv(), dir_.path() / ("forward-" + std::to_string(local) + ".log")));
    EXPECT_TRUE(
        Eventually([&] { return !child->Running() || PortOpen("127.0.0.1", local); }, seconds(30)))
        << Tail(dir_.path() / ("forward-" + std::to_string(local) + ".log"));
    EXPECT_TRUE(child->Running()) << Tail(dir_.path() /
                                          ("forward-" + std::to_string(local) + ".log"));
    forwards_.push_back(std::move(child));
    return local;
  }

  TempDir dir_;
  E2ePlatform platform_{dir_.path()};
  std::string relay_line_;
  int relay_port_ = 0;
  ChildProcess relay_;
  std::vector<std::unique_ptr<ChildProcess>> forwards_;
  std::unique_ptr<EngineProbe> engine_;
  std::unique_ptr<HttpClient> op_;
  std::set<std::string> instances_;
};

// Two people's instances on two agents of one machine: B's listening service and sshd are
// unreachable from A's instance and through A's relay forwarding; a service on the host's
// 0.0.0.0 is unreachable from both; both reach an address allowed as "outside"; the relay still
// reaches each instance's sshd. Then deleting the instances removes their networks.
TEST_F(IsolationE2eTest, Issue11_InstanceNetworksKeepTenantsApartAndReachOnlyTheOutside) {
  StartServer();
  ASSERT_FALSE(HasFatalFailure());
  StartRelay();
  ASSERT_FALSE(HasFatalFailure());
  StartAgent(0);
  StartAgent(1);
  ASSERT_FALSE(HasFatalFailure());
  ASSERT_TRUE(WaitHostsReady(*op_, 2)) << "the agents never synced with working engines";

  // Two agents installed the rules: each chain is hooked exactly once, in both families.
  for (const char* tool : {"iptables", "ip6tables"}) {
    for (const char* hook : {"INPUT", "FORWARD", "OUTPUT"}) {
      EXPECT_EQ(HookCount(tool, hook, std::string("GPUWERK-ISOLATION-") + hook), 1)
          << tool << " " << hook << ":\n"
          << Script(std::string(tool) + " -S " + hook).out;
    }
  }

  Tenant a, b;
  Launch(a, "alice@example.test", "ainst");
  Launch(b, "bob@example.test", "binst");
  ASSERT_FALSE(HasFatalFailure());
  AwaitRunning(a);
  AwaitRunning(b);
  ASSERT_FALSE(HasFatalFailure());

  // Each instance has a network of its own, labelled for it.
  EXPECT_NE(a.network, b.network);
  EXPECT_TRUE(a.network.starts_with("gwi")) << a.network;
  EXPECT_EQ(NetworksOf(a.id), std::vector<std::string>{a.network});
  EXPECT_EQ(NetworksOf(b.id), std::vector<std::string>{b.network});
  const std::set<std::string> hosts_used = {
      engine_->ContainersWithLabel(kInstanceLabel, a.id)[0]["Labels"][kHostLabel],
      engine_->ContainersWithLabel(kInstanceLabel, b.id)[0]["Labels"][kHostLabel]};
  EXPECT_EQ(hosts_used.size(), 2u) << "both instances landed on one host";

  Serve(b, 8000, "SERVICE-OF-B");
  Serve(a, 8000, "SERVICE-OF-A");
  ASSERT_FALSE(HasFatalFailure());

  // From A's instance: B's service and B's sshd are out of reach.
  EXPECT_EQ(ReadFrom(a, b.ip, 8000), "") << "A's instance reached B's service at " << b.ip;
  EXPECT_EQ(ReadFrom(a, b.ip, 22), "") << "A's instance reached B's sshd at " << b.ip;
  // … and the other way round.
  EXPECT_EQ(ReadFrom(b, a.ip, 8000), "") << "B's instance reached A's service at " << a.ip;
  // This machine's processes do not open connections into instance networks either.
  EXPECT_EQ(ReadBanner(b.ip, 8000, seconds(3)), "");

  // A service on the host's 0.0.0.0: not through the instance's gateway, nor through the
  // host's other addresses.
  BannerServer host_service("0.0.0.0", "HOST-SERVICE\n");
  ASSERT_GT(host_service.port(), 0);
  std::vector<std::string> host_addresses = {a.gateway, b.gateway};
  {
    CommandResult addrs =
        Script("ip -4 -o addr show scope global | awk '$2 !~ /^(gwi|cni|podman|" +
               std::string(kOutsideInterface) + ")/ {split($4, p, \"/\"); print p[1]}'");
    std::istringstream lines(addrs.out);
    for (std::string line; std::getline(lines, line);) {
      if (!line.empty()) host_addresses.push_back(line);
    }
  }
  for (const Tenant* t : {&a, &b}) {
    for (const std::string& address : host_addresses) {
      EXPECT_EQ(ReadFrom(*t, address, host_service.port()), "")
          << t->hostname << " reached the host's service at " << address;
    }
  }
  EXPECT_EQ(host_service.accepted(), 0);

  // The allowed "outside" address answers both.
  BannerServer outside(kOutsideAddress, "OUTSIDE\n");
  ASSERT_GT(outside.port(), 0);
  EXPECT_EQ(ReadFrom(a, kOutsideAddress, outside.port()), "OUTSIDE\n");
  EXPECT_EQ(ReadFrom(b, kOutsideAddress, outside.port()), "OUTSIDE\n");

  // Through the relay: A's session works, and forwards to A's own service, but not to B's.
  CommandResult relayed = RunCommand(
      dir_.path(), "ssh -p " + std::to_string(relay_port_) + " -i " + a.key.private_path.string() +
                       " -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null"
                       " -o BatchMode=yes -o ConnectTimeout=10 -o LogLevel=ERROR " +
                       a.hostname + "@127.0.0.1 hostname");
  EXPECT_EQ(relayed.exit_code, 0) << relayed.err;
  EXPECT_EQ(relayed.out, a.hostname + "\n");
  const int own = ForwardThroughRelay(a, "127.0.0.1:8000");
  EXPECT_EQ(ReadBanner("127.0.0.1", own), "SERVICE-OF-A\n");
  const int other = ForwardThroughRelay(a, b.ip + ":8000");
  EXPECT_EQ(ReadBanner("127.0.0.1", other), "") << "A's relay tunnel reached B's service";
  const int other_ssh = ForwardThroughRelay(a, b.ip + ":22");
  EXPECT_EQ(ReadBanner("127.0.0.1", other_ssh), "") << "A's relay tunnel reached B's sshd";

  // Deleting the instances removes their networks.
  for (const Tenant* t : {&a, &b}) {
    auto r = t->api->Delete("/api/v1/instances/" + t->id);
    EXPECT_TRUE(r.status == 202 || r.status == 204 || r.status == 200) << r.body;
  }
  EXPECT_TRUE(
      Eventually([&] { return NetworksOf(a.id).empty() && NetworksOf(b.id).empty(); }, seconds(60)))
      << "networks left: " << ::testing::PrintToString(NetworksOf(a.id))
      << ::testing::PrintToString(NetworksOf(b.id));
}

/// The first rule of `hook` as `tool -S` lists it ("" when it has none).
std::string FirstRule(const std::string& tool, const std::string& hook) {
  std::istringstream lines(Script(tool + " -w 5 -S " + hook).out);
  for (std::string line; std::getline(lines, line);) {
    if (line.starts_with("-A ")) return line;
  }
  return "";
}

/// A network beyond this machine, for an instance a denied private destination: a network
/// namespace behind a veth pair, with `kDeniedAddress` in it (RFC 1918, in the default deny list)
/// and a listener there (made in the namespace). Traffic to it from an instance is forwarded by
/// the host, so the FORWARD chain decides. Removed with this object.
class DeniedNetwork {
 public:
  static constexpr const char* kDeniedAddress = "10.254.77.7";

  DeniedNetwork() {
    Remove();
    CommandResult made = Script(
        "ip netns add gwtdeny && ip link add gwtdn0 type veth peer name gwtdn0p && "
        "ip link set gwtdn0p netns gwtdeny && ip addr add 10.254.77.1/24 dev gwtdn0 && "
        "ip link set gwtdn0 up && ip netns exec gwtdeny ip addr add " +
        std::string(kDeniedAddress) +
        "/24 dev gwtdn0p && ip netns exec gwtdeny ip link set gwtdn0p up && "
        "ip netns exec gwtdeny ip link set lo up");
    error_ = made.exit_code == 0 ? "" : "cannot make the denied network: " + made.err;
    if (!error_.empty()) return;
    // A socket belongs to the namespace of the thread that makes it.
    std::thread([this] {
      const int ns = ::open("/run/netns/gwtdeny", O_RDONLY | O_CLOEXEC);
      if (ns < 0 || ::setns(ns, CLONE_NEWNET) != 0) {
        error_ = "cannot enter the namespace";
      } else {
        server_ = std::make_unique<BannerServer>(kDeniedAddress, "DENIED-SERVICE\n");
      }
      if (ns >= 0) ::close(ns);
    }).join();
  }
  ~DeniedNetwork() {
    server_.reset();
    Remove();
  }
  const std::string& error() const { return error_; }
  int port() const { return server_ ? server_->port() : 0; }
  int accepted() const { return server_ ? server_->accepted() : 0; }

 private:
  static void Remove() {
    Script("ip netns del gwtdeny 2>/dev/null; ip link del gwtdn0 2>/dev/null");
  }
  std::string error_;
  std::unique_ptr<BannerServer> server_;
};

// The tester's fault: podman's CNI plugins insert their jumps at the top of FORWARD when a
// container joins a network and they are missing (the first instance after a boot), and their
// `-s <instance> -j ACCEPT` decided before the agent's rules: an instance reached 10.1.2.3 and
// 169.254.169.254. Here the agent hooks its chains, the CNI jump is taken out (a host whose engine
// has run no container since its boot), and a launch makes podman put it back on top. The agent's
// jump must be the first rule of FORWARD again by the time the instance runs, and the instance's
// connection to a denied private address, forwarded to a listener beyond this machine, must be
// rejected at once ("No route to host": ICMP administratively prohibited), reaching nothing.
TEST_F(IsolationE2eTest, EngineRulesAddedAtALaunchDoNotGoAboveTheAgents) {
  const std::string jump = "-A FORWARD -j GPUWERK-ISOLATION-FORWARD";
  StartServer();
  ASSERT_FALSE(HasFatalFailure());
  StartRelay();
  ASSERT_FALSE(HasFatalFailure());
  StartAgent(0);
  ASSERT_FALSE(HasFatalFailure());
  ASSERT_TRUE(WaitHostsReady(*op_, 1)) << "the agent never synced with a working engine";
  ASSERT_EQ(FirstRule("iptables", "FORWARD"), jump) << Script("iptables -S FORWARD").out;

  // The engine's jump goes back at the end if the launch did not put it back.
  struct TakenOut {
    std::vector<std::string> lines;
    ~TakenOut() {
      const std::string now = Script("iptables -w 5 -S FORWARD").out;
      for (const std::string& line : lines) {
        if (now.find(line) == std::string::npos) Script("iptables -w 5 " + line);
      }
    }
  } taken_out;
  {
    std::istringstream lines(Script("iptables -w 5 -S FORWARD").out);
    for (std::string line; std::getline(lines, line);) {
      if (line.starts_with("-A FORWARD ") && line.ends_with(" -j CNI-FORWARD")) {
        taken_out.lines.push_back(line);
      }
    }
  }
  for (const std::string& line : taken_out.lines) {
    ASSERT_EQ(Script("iptables -w 5 -D" + line.substr(2)).exit_code, 0) << line;
  }
  DeniedNetwork denied;
  ASSERT_EQ(denied.error(), "");
  ASSERT_GT(denied.port(), 0);

  Tenant a;
  Launch(a, "carol@example.test", "cinst");
  ASSERT_FALSE(HasFatalFailure());
  AwaitRunning(a);
  ASSERT_FALSE(HasFatalFailure());

  const std::string forward = Script("iptables -w 5 -S FORWARD").out;
  EXPECT_NE(forward.find("-j CNI-FORWARD"), std::string::npos)
      << "the engine put no jump of its own into FORWARD at the launch:\n"
      << forward;
  EXPECT_EQ(FirstRule("iptables", "FORWARD"), jump) << forward;
  const std::string agent_log = ReadFile(platform_.host(0).log);
  EXPECT_NE(agent_log.find("instance network filter (IPv4): the jump to "
                           "GPUWERK-ISOLATION-FORWARD was rule "),
            std::string::npos)
      << Tail(platform_.host(0).log);
  EXPECT_NE(agent_log.find("of FORWARD, below \"-A FORWARD -m comment --comment \\\"CNI "
                           "firewall plugin rules"),
            std::string::npos)
      << Tail(platform_.host(0).log);

  CommandResult tried =
      In(a, "timeout 4 bash -c 'exec 3<>/dev/tcp/" + std::string(DeniedNetwork::kDeniedAddress) +
                "/" + std::to_string(denied.port()) + " && cat <&3' 2>&1; echo rc=$?\n");
  EXPECT_EQ(tried.exit_code, 0) << tried.err;
  EXPECT_NE(tried.out.find("No route to host"), std::string::npos)
      << "not rejected by the agent's rule: " << tried.out;
  EXPECT_EQ(tried.out.find("DENIED-SERVICE"), std::string::npos) << tried.out;
  EXPECT_EQ(denied.accepted(), 0);
}

}  // namespace
}  // namespace gpuwerk::testing

#include "app/server_config.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <map>
#include <optional>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "app/agent_config.h"
#include "app/command_config.h"
#include "app/relay_config.h"
#include "app/server_app.h"
#include "core/clock.h"
#include "core/logging.h"
#include "core/random.h"
#include "tests/support/temp_dir.h"

namespace gpuwerk::app {
namespace {

/// Sets environment variables for one scope and restores what was there.
class ScopedEnv {
 public:
  ScopedEnv() = default;
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;
  ~ScopedEnv() {
    for (const auto& [name, old] : saved_) {
      if (old) {
        ::setenv(name.c_str(), old->c_str(), 1);
      } else {
        ::unsetenv(name.c_str());
      }
    }
  }
  void Set(const std::string& name, const std::string& value) {
    Save(name);
    ::setenv(name.c_str(), value.c_str(), 1);
  }
  void Unset(const std::string& name) {
    Save(name);
    ::unsetenv(name.c_str());
  }

 private:
  void Save(const std::string& name) {
    if (saved_.contains(name)) return;
    const char* old = std::getenv(name.c_str());
    saved_[name] = old ? std::optional<std::string>(old) : std::nullopt;
  }

  std::map<std::string, std::optional<std::string>> saved_;
};

/// A value as text, lists joined with ','.
std::string Text(const OptionValue& value) {
  if (auto* s = std::get_if<std::string*>(&value)) return **s;
  if (auto* p = std::get_if<std::filesystem::path*>(&value)) return (*p)->string();
  if (auto* i = std::get_if<int*>(&value)) return std::to_string(**i);
  if (auto* n = std::get_if<int64_t*>(&value)) return std::to_string(**n);
  std::string all;
  for (const std::string& item : *std::get<std::vector<std::string>*>(value)) {
    all += (all.empty() ? "" : ",") + item;
  }
  return all;
}

bool IsNumber(const OptionValue& v) {
  return std::holds_alternative<int*>(v) || std::holds_alternative<int64_t*>(v);
}
bool IsList(const OptionValue& v) { return std::holds_alternative<std::vector<std::string>*>(v); }

/// The value source `source` ("file", "env", "flag") gives the `index`th option: distinct per
/// source and per option. Lists get two items.
std::vector<std::string> Items(const BoundOption& o, size_t index, const std::string& source) {
  if (IsNumber(o.value)) {
    const int base = source == "file" ? 1000 : source == "env" ? 2000 : 3000;
    return {std::to_string(base + static_cast<int>(index))};
  }
  const std::string v = source + "-" + std::string(o.key);
  if (IsList(o.value)) return {v + "-1", v + "-2"};
  return {v};
}

std::string Joined(const std::vector<std::string>& items) {
  std::string all;
  for (const std::string& item : items) all += (all.empty() ? "" : ",") + item;
  return all;
}

/// Checks, for every option of `options`, that the file, the environment and the flag each set
/// it, and that flags > environment > file > default.
template <class Config>
void ExpectEverySourceSetsEveryOption(const std::vector<Option<Config>>& options,
                                      const std::string& config_env) {
  Config defaults;
  const std::vector<BoundOption> declared = Bind(options, defaults);
  testing::TempDir dir;
  const auto file = dir.path() / "all.toml";
  {
    std::ofstream out(file);
    for (size_t i = 0; i < declared.size(); ++i) {
      const BoundOption& o = declared[i];
      const auto items = Items(o, i, "file");
      out << o.key << " = ";
      if (IsNumber(o.value)) {
        out << items[0];
      } else if (IsList(o.value)) {
        out << "[\"" << items[0] << "\", \"" << items[1] << "\"]";
      } else {
        out << "\"" << items[0] << "\"";
      }
      out << "\n";
    }
  }
  std::vector<std::string> flag_args = {"gpuwerk", "cmd"};
  for (size_t i = 0; i < declared.size(); ++i) {
    for (const std::string& item : Items(declared[i], i, "flag")) {
      flag_args.push_back(declared[i].Flag());
      if (!declared[i].secret) {
        flag_args.push_back(item);
        continue;
      }
      // A secret's flag names a file holding the value (with the newline an editor adds).
      const auto secret_file = dir.path() / ("secret-" + std::string(declared[i].key));
      std::ofstream(secret_file) << item << "\n";
      flag_args.push_back(secret_file.string());
    }
  }

  // Which sources are given, from least to most, and whom each option must come from.
  for (const std::string top : {"file", "env", "flag"}) {
    SCOPED_TRACE("highest source given: " + top);
    ScopedEnv env;
    env.Set(config_env, file.string());
    for (size_t i = 0; i < declared.size(); ++i) {
      if (top == "file") {
        env.Unset(declared[i].EnvName());
        continue;
      }
      std::string lines;  // a list takes one item per line
      for (const std::string& item : Items(declared[i], i, "env")) {
        lines += (lines.empty() ? "" : "\n") + item;
      }
      env.Set(declared[i].EnvName(), lines);
    }
    std::vector<std::string> args = {"gpuwerk", "cmd"};
    if (top == "flag") args = flag_args;
    std::vector<const char*> argv;
    for (const std::string& a : args) argv.push_back(a.c_str());

    CLI::App app;
    auto* cmd = app.add_subcommand("cmd");
    CommandConfig<Config> command(*cmd, options, config_env);
    ASSERT_NO_THROW(app.parse(static_cast<int>(argv.size()), argv.data()));
    auto config = command.Resolve();
    ASSERT_TRUE(config) << config.error().message;
    const std::vector<BoundOption> got = Bind(options, *config);
    for (size_t i = 0; i < got.size(); ++i) {
      EXPECT_EQ(Text(got[i].value), Joined(Items(declared[i], i, top)))
          << got[i].Flag() << " / " << got[i].EnvName() << " / " << got[i].key;
    }
  }
}

TEST(ServerConfigTest, EveryOptionIsSetByFileEnvironmentAndFlagInThatPrecedence) {
  ExpectEverySourceSetsEveryOption(ServerOptions(), "GPUWERK_CONFIG");
  ExpectEverySourceSetsEveryOption(UpOptions(), "GPUWERK_CONFIG");
  ExpectEverySourceSetsEveryOption(AgentOptions(), "GPUWERK_AGENT_CONFIG");
  ExpectEverySourceSetsEveryOption(RelayOptions(), "GPUWERK_RELAY_CONFIG");
}

TEST(ServerConfigTest, NoSourceGivesTheDefaults) {
  CLI::App app;
  auto* cmd = app.add_subcommand("up");
  CommandConfig<ServerConfig> command(*cmd, UpOptions(), "GPUWERK_CONFIG_UNSET_IN_TESTS");
  const char* argv[] = {"gpuwerk", "up"};
  app.parse(2, argv);
  auto config = command.Resolve();
  ASSERT_TRUE(config) << config.error().message;
  ServerConfig defaults;
  const auto got = Bind(UpOptions(), *config);
  const auto want = Bind(UpOptions(), defaults);
  for (size_t i = 0; i < got.size(); ++i) EXPECT_EQ(Text(got[i].value), Text(want[i].value));
}

TEST(ServerConfigTest, FlagsAreDeclaredOnceEach) {
  ServerConfig server;
  AgentConfig agent;
  RelayConfig relay;
  for (const auto& options :
       {Bind(UpOptions(), server), Bind(AgentOptions(), agent), Bind(RelayOptions(), relay)}) {
    std::set<std::string> flags, keys;
    for (const BoundOption& o : options) {
      EXPECT_TRUE(flags.insert(o.Flag()).second) << o.Flag();
      EXPECT_TRUE(keys.insert(std::string(o.key)).second) << o.key;
      EXPECT_FALSE(o.help.empty()) << o.key;
    }
  }
}

TEST(ServerConfigTest, MissingRequiredOptionIsNamedWithAllItsSources) {
  CLI::App app;
  auto* cmd = app.add_subcommand("agent");
  CommandConfig<AgentConfig> command(*cmd, AgentOptions(), "GPUWERK_AGENT_CONFIG_UNSET_IN_TESTS");
  const char* argv[] = {"gpuwerk", "agent", "--engine", "unix:///e.sock"};
  ScopedEnv env;
  env.Set("GPUWERK_SERVER_URL", "");
  env.Set("GPUWERK_HOST_TOKEN", "gwh_x");
  app.parse(4, argv);
  auto config = command.Resolve();
  ASSERT_FALSE(config);
  EXPECT_EQ(config.error().api_code, "invalid_config");
  EXPECT_EQ(config.error().message,
            "--server is required (or GPUWERK_SERVER_URL, or server_url in the config file)");
}

/// Resolves `args` (after "gpuwerk cmd") against `options`.
template <class Config>
core::Result<Config> ResolveArgs(const std::vector<Option<Config>>& options,
                                 const std::vector<std::string>& args) {
  std::vector<std::string> all = {"gpuwerk", "cmd"};
  all.insert(all.end(), args.begin(), args.end());
  std::vector<const char*> argv;
  for (const std::string& a : all) argv.push_back(a.c_str());
  CLI::App app;
  auto* cmd = app.add_subcommand("cmd");
  CommandConfig<Config> command(*cmd, options, "GPUWERK_CONFIG_UNSET_IN_TESTS");
  app.parse(static_cast<int>(argv.size()), argv.data());
  return command.Resolve();
}

// Issue 12 finding 8: a token or password on a command line is readable by every user of the
// machine (/proc/PID/cmdline). Each secret comes from a file flag, the environment or the config
// file; its value flag is refused, saying what to use instead.
TEST(ServerConfigTest, SecretsAreNeverTakenFromTheCommandLine) {
  testing::TempDir dir;
  ScopedEnv env;
  env.Set("GPUWERK_SERVER_URL", "http://127.0.0.1:1");
  env.Set("GPUWERK_ENGINE", "unix:///e.sock");
  env.Unset("GPUWERK_HOST_TOKEN");
  env.Unset("GPUWERK_RELAY_TOKEN");
  auto refused = ResolveArgs(AgentOptions(), {"--token", "gwh_secret"});
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().api_code, "invalid_config");
  EXPECT_NE(refused.error().message.find("--token on the command line is readable"),
            std::string::npos)
      << refused.error().message;
  EXPECT_NE(refused.error().message.find("--token-file FILE"), std::string::npos);
  EXPECT_NE(refused.error().message.find("GPUWERK_HOST_TOKEN"), std::string::npos);
  EXPECT_EQ(refused.error().message.find("gwh_secret"), std::string::npos);

  for (const std::string flag : {"--operator-password", "--smtp-password"}) {
    auto server = ResolveArgs(ServerOptions(), {flag, "a password of 16"});
    ASSERT_FALSE(server) << flag;
    EXPECT_NE(server.error().message.find(flag + "-file FILE"), std::string::npos)
        << server.error().message;
  }
  auto relay = ResolveArgs(RelayOptions(), {"--token", "gwt_x"});
  ASSERT_FALSE(relay);
  EXPECT_NE(relay.error().message.find("GPUWERK_RELAY_TOKEN"), std::string::npos);

  // The file flag: the file's one line, without its line end (LF or CRLF).
  const auto token_file = dir.path() / "token";
  std::ofstream(token_file) << "gwh_from_file\r\n";
  auto agent = ResolveArgs(AgentOptions(), {"--token-file", token_file.string()});
  ASSERT_TRUE(agent) << agent.error().message;
  EXPECT_EQ(agent->host_token, "gwh_from_file");

  // Files that cannot be a secret are refused, naming the flag and the file.
  const auto empty = dir.path() / "empty";
  std::ofstream(empty) << "\n";
  const auto two = dir.path() / "two";
  std::ofstream(two) << "gwh_a\ngwh_b\n";
  const auto big = dir.path() / "big";
  std::ofstream(big) << std::string(70 * 1024, 'x');
  for (const auto& [file, why] : std::vector<std::pair<std::filesystem::path, std::string>>{
           {dir.path() / "missing", "cannot be read"},
           {empty, "is empty"},
           {two, "more than one line"},
           {big, "larger than 64 KiB"}}) {
    auto bad = ResolveArgs(AgentOptions(), {"--token-file", file.string()});
    ASSERT_FALSE(bad) << file;
    EXPECT_EQ(bad.error().api_code, "invalid_config");
    EXPECT_NE(bad.error().message.find("--token-file " + file.string()), std::string::npos)
        << bad.error().message;
    EXPECT_NE(bad.error().message.find(why), std::string::npos) << bad.error().message;
  }
}

TEST(ServerConfigTest, FileThenEnvironment) {
  testing::TempDir dir;
  const auto file = dir.path() / "gpuwerk.toml";
  std::ofstream(file) << "listen = \"127.0.0.1:9000\"\npublic_url = \"https://gpu.example.test\"\n"
                         "http_threads = 8\n";
  ServerConfig c;
  ASSERT_TRUE(LoadConfigFile(file, Bind(ServerOptions(), c)));
  EXPECT_EQ(c.listen, "127.0.0.1:9000");
  EXPECT_EQ(c.http_threads, 8);
  ::setenv("GPUWERK_LISTEN", "127.0.0.1:9001", 1);
  ASSERT_TRUE(ApplyEnvironment(Bind(ServerOptions(), c)));
  ::unsetenv("GPUWERK_LISTEN");
  EXPECT_EQ(c.listen, "127.0.0.1:9001");
  EXPECT_EQ(c.public_url, "https://gpu.example.test");
  EXPECT_TRUE(Validate(c));
}

TEST(ServerConfigTest, ListenAddressesAreCheckedBeforeAnythingStarts) {
  ServerConfig c;
  for (const char* good : {"127.0.0.1:0", "[::1]:8080", "0.0.0.0:80", "localhost:9000"}) {
    c.listen = good;
    EXPECT_TRUE(Validate(c)) << good;
  }
  for (const char* bad : {"nonsense", "127.0.0.1:99999", "127.0.0.1:", ":80", "::1:80"}) {
    c.listen = bad;
    auto r = Validate(c);
    ASSERT_FALSE(r) << bad;
    EXPECT_EQ(r.error().api_code, "invalid_config");
    EXPECT_NE(r.error().message.find("listen must be HOST:PORT"), std::string::npos);
  }
  c.listen = "127.0.0.1:0";
  c.ssh_listen = "nowhere";
  auto ssh = Validate(c);
  ASSERT_FALSE(ssh);
  EXPECT_NE(ssh.error().message.find("ssh_listen must be ADDR:PORT"), std::string::npos);
}

// `admin migrate --config /etc/gpuwerk/server.conf`: a command reading another's file takes its
// own keys and skips the ones named to it, while a key neither knows is still refused.
TEST(ServerConfigTest, AFileOfAnotherCommandIsReadForItsOwnKeysWhenTheRestAreNamed) {
  testing::TempDir dir;
  const auto file = dir.path() / "server.conf";
  std::ofstream(file) << "listen = \"127.0.0.1:9\"\ndatabase = \"postgresql://db/gw\"\n"
                         "http_threads = 8\n";
  std::vector<Option<ServerConfig>> own;
  std::vector<std::string> others;
  for (const auto& o : ServerOptions()) {
    if (o.key == "database") {
      own.push_back(o);
    } else {
      others.emplace_back(o.key);
    }
  }
  ServerConfig c;
  ASSERT_FALSE(LoadConfigFile(file, Bind(own, c))) << "listen is not one of its options";
  ASSERT_TRUE(LoadConfigFile(file, Bind(own, c), others));
  EXPECT_EQ(c.database, "postgresql://db/gw");
  EXPECT_EQ(c.listen, ServerConfig{}.listen) << "a skipped key sets nothing";
  std::ofstream(file, std::ios::app) << "no_such_option = 1\n";
  auto r = LoadConfigFile(file, Bind(own, c), others);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("no_such_option"), std::string::npos) << r.error().message;
}

TEST(ServerConfigTest, BadFilesAndValuesAreNamed) {
  testing::TempDir dir;
  const auto file = dir.path() / "bad.toml";
  std::ofstream(file) << "listen = \n";
  ServerConfig c;
  auto r = LoadConfigFile(file, Bind(ServerOptions(), c));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().api_code, "invalid_config");
  EXPECT_NE(r.error().message.find("bad.toml:1"), std::string::npos) << r.error().message;

  std::ofstream(file) << "no_such_option = 1\n";
  r = LoadConfigFile(file, Bind(ServerOptions(), c));
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("no_such_option"), std::string::npos);

  std::ofstream(file) << "engine = \"unix:///e.sock\"\n";
  r = LoadConfigFile(file, Bind(ServerOptions(), c));
  ASSERT_FALSE(r) << "engine is an option of up only";
  EXPECT_TRUE(LoadConfigFile(file, Bind(UpOptions(), c)));

  ::setenv("GPUWERK_HTTP_THREADS", "many", 1);
  r = ApplyEnvironment(Bind(ServerOptions(), c));
  ::unsetenv("GPUWERK_HTTP_THREADS");
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("GPUWERK_HTTP_THREADS"), std::string::npos) << r.error().message;

  ::setenv("GPUWERK_SSH_PORT", "99999999999", 1);
  r = ApplyEnvironment(Bind(ServerOptions(), c));
  ::unsetenv("GPUWERK_SSH_PORT");
  EXPECT_FALSE(r) << "out of the range of int";

  c = ServerConfig{};
  c.mail = "smtp";
  EXPECT_FALSE(Validate(c)) << "smtp without smtp_url";
  c = ServerConfig{};
  c.mail = "SMTP";
  auto bad_mail = Validate(c);
  ASSERT_FALSE(bad_mail) << "the transport's words are exact";
  EXPECT_EQ(bad_mail.error().api_code, "invalid_config");
  EXPECT_NE(bad_mail.error().message.find("'maildir' or 'smtp'"), std::string::npos)
      << bad_mail.error().message;
  c = ServerConfig{};
  c.smtp_starttls = "sometimes";
  EXPECT_FALSE(Validate(c));
  c = ServerConfig{};
  c.public_url = "gpu.example.test";
  EXPECT_FALSE(Validate(c));
  // The test-only clock offset: ahead only, at most a year.
  c = ServerConfig{};
  c.test_clock_offset_seconds = 40 * 86400;
  EXPECT_TRUE(Validate(c));
  c.test_clock_offset_seconds = -1;
  EXPECT_FALSE(Validate(c));
  c.test_clock_offset_seconds = 367 * 86400;
  EXPECT_FALSE(Validate(c));
}

TEST(ServerConfigTest, SignUpPolicyAndDomainsAreChecked) {
  ServerConfig c;
  EXPECT_TRUE(Validate(c)) << "open by default";
  c.sign_up_policy = "invite";
  EXPECT_TRUE(Validate(c));
  c.sign_up_policy = "closed";
  auto bad = Validate(c);
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().api_code, "invalid_config");
  EXPECT_NE(bad.error().message.find("open, domains or invite"), std::string::npos);
  c.sign_up_policy = "domains";
  EXPECT_FALSE(Validate(c)) << "domains without a list";
  c.sign_up_domains = {"example.com", "Lab.Example.org"};
  EXPECT_TRUE(Validate(c));
  c.sign_up_domains = {"alice@example.com"};
  EXPECT_FALSE(Validate(c)) << "an address is not a domain";
  c.sign_up_domains = {"localhost"};
  EXPECT_FALSE(Validate(c));
  c.sign_up_policy = "open";
  c.sign_up_domains = {"example.com"};
  EXPECT_FALSE(Validate(c)) << "a list the policy would ignore";
}

// Issue 12 finding 8: the trusted proxies come from a TOML list, the environment or repeated
// flags; a bad entry stops the start with an error naming the option.
TEST(ServerConfigTest, TrustedProxiesAreCheckedAtStart) {
  testing::TempDir dir;
  const auto file = dir.path() / "proxy.toml";
  std::ofstream(file) << "trusted_proxies = [\"10.0.0.0/8\", \"2001:db8::/32\", \"::1\"]\n";
  ServerConfig c;
  ASSERT_TRUE(LoadConfigFile(file, Bind(ServerOptions(), c)));
  EXPECT_EQ(c.trusted_proxies, (std::vector<std::string>{"10.0.0.0/8", "2001:db8::/32", "::1"}));
  EXPECT_TRUE(Validate(c));
  for (const char* bad : {"10.0.0.0/33", "proxy.example.com", "0.0.0.0/0", "10.0.0.1:443"}) {
    c.trusted_proxies = {"127.0.0.1", bad};
    auto r = Validate(c);
    ASSERT_FALSE(r) << bad;
    EXPECT_EQ(r.error().api_code, "invalid_config");
    EXPECT_NE(r.error().message.find("trusted_proxies"), std::string::npos) << r.error().message;
    EXPECT_NE(r.error().message.find(bad), std::string::npos) << r.error().message;
  }
  testing::TempDir data;
  ServerConfig start;
  start.data_dir = data.path() / "data";
  start.listen = "127.0.0.1:0";
  start.password_hash_cost = "test-only-minimum";
  start.trusted_proxies = {"not-a-network"};
  core::InitCrypto();
  core::FakeClock clock;
  core::SodiumRng rng;
  auto app = ServerApp::Start(start, clock, rng);
  ASSERT_FALSE(app) << "a server does not start with a bad trusted_proxies entry";
  EXPECT_NE(app.error().message.find("trusted_proxies"), std::string::npos);
}

// The relay's TCP balancers (docs/ssh.md "Behind a TCP balancer"): `up` checks them at start as
// `gpuwerk relay` does, naming relay_trusted_proxies.
TEST(ServerConfigTest, RelayTrustedProxiesAreCheckedAtStart) {
  testing::TempDir dir;
  const auto file = dir.path() / "relay.toml";
  std::ofstream(file) << "relay_trusted_proxies = [\"10.0.0.5\", \"2001:db8:0:1::/64\"]\n";
  ServerConfig c;
  auto up = UpOptions();
  ASSERT_TRUE(LoadConfigFile(file, Bind(up, c)));
  EXPECT_EQ(c.relay_trusted_proxies, (std::vector<std::string>{"10.0.0.5", "2001:db8:0:1::/64"}));
  EXPECT_TRUE(Validate(c));
  for (const char* bad : {"10.0.0.0/33", "lb.example.com", "::/0"}) {
    c.relay_trusted_proxies = {bad};
    auto r = Validate(c);
    ASSERT_FALSE(r) << bad;
    EXPECT_EQ(r.error().api_code, "invalid_config");
    EXPECT_NE(r.error().message.find("relay_trusted_proxies"), std::string::npos)
        << r.error().message;
  }
}

// Docker inside and /dev/shm under `up` (docs/docker-inside.md): from the file and the environment,
// and an unknown mode refused before anything starts, naming the allowed values.
TEST(ServerConfigTest, UpDockerInsideAndShmComeFromFileAndEnvironmentAndAreChecked) {
  testing::TempDir dir;
  const auto file = dir.path() / "up.toml";
  std::ofstream(file) << "docker_inside = \"privileged\"\ninstance_shm_bytes = 1073741824\n";
  ServerConfig c;
  EXPECT_EQ(c.docker_inside, "off");
  EXPECT_EQ(c.instance_shm_bytes, 0);
  auto up = UpOptions();
  ASSERT_TRUE(LoadConfigFile(file, Bind(up, c)));
  EXPECT_EQ(c.docker_inside, "privileged");
  EXPECT_EQ(c.instance_shm_bytes, int64_t{1} << 30);
  EXPECT_TRUE(Validate(c));
  ::setenv("GPUWERK_DOCKER_INSIDE", "sysbox", 1);
  const auto applied = ApplyEnvironment(Bind(up, c));
  ::unsetenv("GPUWERK_DOCKER_INSIDE");
  ASSERT_TRUE(applied);
  EXPECT_EQ(c.docker_inside, "sysbox");
  for (const char* bad : {"on", "", "Privileged"}) {
    c.docker_inside = bad;
    auto r = Validate(c);
    ASSERT_FALSE(r) << bad;
    EXPECT_EQ(r.error().api_code, "invalid_config");
    EXPECT_NE(r.error().message.find("docker_inside must be off, sysbox or privileged"),
              std::string::npos)
        << r.error().message;
  }
  c.docker_inside = "off";
  c.instance_shm_bytes = 1024;
  auto shm = Validate(c);
  ASSERT_FALSE(shm);
  EXPECT_NE(shm.error().message.find("instance_shm_bytes"), std::string::npos);
}

// docs/configuration.md: each command's table is generated from the declarations (between
// `<!-- options NAME -->` and `<!-- end options NAME -->`), and every flag and GPUWERK_
// variable the page names exists. GPUWERK_UPDATE_DOCS=1 rewrites the tables in the source tree.
TEST(ServerConfigTest, ConfigurationDocMatchesTheDeclarations) {
  const std::filesystem::path path =
      std::filesystem::path(GPUWERK_TEST_SOURCE_DIR) / "docs" / "configuration.md";
  std::stringstream read;
  read << std::ifstream(path).rdbuf();
  std::string doc = read.str();
  ASSERT_FALSE(doc.empty()) << path;

  const std::vector<std::pair<std::string, std::string>> tables = {
      {"server", OptionsMarkdown(ServerOptions())},
      {"up", OptionsMarkdown(UpOnlyOptions())},
      {"agent", OptionsMarkdown(AgentOptions())},
      {"relay", OptionsMarkdown(RelayOptions())},
  };
  std::string updated = doc;
  for (const auto& [name, table] : tables) {
    const std::string begin = "<!-- options " + name + " -->\n";
    const std::string end = "<!-- end options " + name + " -->";
    const size_t b = updated.find(begin);
    const size_t e = updated.find(end);
    ASSERT_NE(b, std::string::npos) << begin;
    ASSERT_NE(e, std::string::npos) << end;
    ASSERT_LT(b, e);
    updated.replace(b + begin.size(), e - b - begin.size(), table);
  }
  if (updated != doc && std::getenv("GPUWERK_UPDATE_DOCS") != nullptr) {
    std::ofstream(path) << updated;
    doc = updated;
  }
  EXPECT_EQ(doc, updated) << "docs/configuration.md differs from the declarations; run "
                             "GPUWERK_UPDATE_DOCS=1 build/asan/src/app/app_test";

  // Nothing documented that does not exist.
  std::set<std::string> flags = {"--config", "--help"};
  std::set<std::string> variables = {"GPUWERK_CONFIG", "GPUWERK_AGENT_CONFIG",
                                     "GPUWERK_RELAY_CONFIG", "GPUWERK_FAULT_POINTS",
                                     "GPUWERK_UPDATE_DOCS"};
  ServerConfig server;
  AgentConfig agent;
  RelayConfig relay;
  for (const auto& options :
       {Bind(UpOptions(), server), Bind(AgentOptions(), agent), Bind(RelayOptions(), relay)}) {
    for (const BoundOption& o : options) {
      flags.insert(o.Flag());
      variables.insert(o.EnvName());
      // A secret's value flag exists to be refused; the page says so by its name.
      if (!o.RefusedFlag().empty()) flags.insert(o.RefusedFlag());
    }
  }
  const std::regex named(R"((?:^|[^\w-])(--[a-z][a-z-]*|GPUWERK_[A-Z_]*[A-Z]))");
  for (auto it = std::sregex_iterator(doc.begin(), doc.end(), named); it != std::sregex_iterator();
       ++it) {
    const std::string name = (*it)[1];
    if (name.starts_with("--")) {
      EXPECT_TRUE(flags.contains(name)) << "docs/configuration.md names " << name;
    } else {
      EXPECT_TRUE(variables.contains(name)) << "docs/configuration.md names " << name;
    }
  }
}

TEST(UpBillingLineTest, NamesTheProviderInUseAndHowOthersAddACard) {
  ServerConfig c;
  const std::string manual = UpBillingLine(c, true, "op@x.test");
  EXPECT_TRUE(manual.starts_with("manual; a payment method was recorded for op@x.test")) << manual;
  EXPECT_NE(manual.find("gpuwerk admin billing set-card"), std::string::npos) << manual;
  c.payment_provider = "stripe";
  const std::string stripe = UpBillingLine(c, false, "op@x.test");
  EXPECT_TRUE(stripe.starts_with("Stripe; op@x.test has a payment method on file")) << stripe;
  EXPECT_NE(stripe.find("gpuwerk billing add-card"), std::string::npos) << stripe;
  EXPECT_EQ(stripe.find("manual;"), std::string::npos) << stripe;
  const std::string stripe_recorded = UpBillingLine(c, true, "op@x.test");
  EXPECT_TRUE(stripe_recorded.starts_with("Stripe; a manual payment method was recorded for"))
      << stripe_recorded;
}

}  // namespace
}  // namespace gpuwerk::app

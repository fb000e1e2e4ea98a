#include "cli/internal/ssh_argv.h"

#include <gtest/gtest.h>

namespace gpuwerk::cli::internal {
namespace {

using nlohmann::json;

json Instance(json ssh) {
  return {{"name", "web"}, {"hostname", "web-x1"}, {"status", "running"}, {"ssh", ssh}};
}

TEST(SshArgvTest, BuiltFromTheFieldsWithTheDestinationAfterDoubleDash) {
  auto argv = SshArgv(Instance({{"host", "127.0.0.1"}, {"port", 2222}, {"user", "web-x1"}}), "web",
                      {"uptime", "-a"});
  ASSERT_TRUE(argv) << argv.error().message;
  EXPECT_EQ(*argv, (std::vector<std::string>{"ssh", "-o", "HostKeyAlias=web-x1", "-o",
                                             "StrictHostKeyChecking=accept-new", "-p", "2222", "--",
                                             "web-x1@127.0.0.1", "uptime", "-a"}));
}

TEST(SshArgvTest, ThePersonsOwnSshOptionsStayOptionsBeforeTheDoubleDash) {
  auto argv = SshArgv(Instance({{"host", "127.0.0.1"}, {"port", 2222}, {"user", "web-x1"}}), "web",
                      {"-i", "/k/id", "-oBatchMode=yes", "-o", "LogLevel=ERROR", "-A",
                       "-L8080:x:80", "hostname", "-f"});
  ASSERT_TRUE(argv) << argv.error().message;
  EXPECT_EQ(*argv, (std::vector<std::string>{
                       "ssh", "-o", "HostKeyAlias=web-x1", "-o", "StrictHostKeyChecking=accept-new",
                       "-p", "2222", "-i", "/k/id", "-oBatchMode=yes", "-o", "LogLevel=ERROR", "-A",
                       "-L8080:x:80", "--", "web-x1@127.0.0.1", "hostname", "-f"}));
}

TEST(SshArgvTest, LeadingSshOptionsReadsValuesAsGetoptDoes) {
  using V = std::vector<std::string>;
  EXPECT_EQ(LeadingSshOptions(V{}), 0u);
  EXPECT_EQ(LeadingSshOptions(V{"hostname"}), 0u);
  EXPECT_EQ(LeadingSshOptions(V{"-i", "k", "ls"}), 2u);
  EXPECT_EQ(LeadingSshOptions(V{"-ik", "ls"}), 1u);
  EXPECT_EQ(LeadingSshOptions(V{"-Ai", "k", "ls"}), 2u);
  EXPECT_EQ(LeadingSshOptions(V{"-v", "-v", "--", "-ls"}), 3u);
  EXPECT_EQ(LeadingSshOptions(V{"-o"}), 1u);
}

// Issue 12: a host that reports `-oProxyCommand=…` (or spaces) as its address must never make
// `gpuwerk ssh` run anything; the server refuses such a sync, and the CLI checks again.
TEST(SshArgvTest, AnAddressThatCouldBeAnOptionIsRefusedAndNothingRuns) {
  for (const char* host :
       {"-oProxyCommand=touch /tmp/pwned", "10.0.0.5 -oProxyCommand=x", "root@10.0.0.5", ""}) {
    auto argv = SshArgv(Instance({{"host", host}, {"port", 2222}, {"user", "root"}}), "web", {});
    ASSERT_FALSE(argv) << host;
    EXPECT_EQ(argv.error().api_code, std::string(*host ? "unexpected_response" : "not_ready"))
        << host;
  }
  auto user =
      SshArgv(Instance({{"host", "10.0.0.5"}, {"port", 2222}, {"user", "-oX=y"}}), "web", {});
  EXPECT_FALSE(user);
  auto port =
      SshArgv(Instance({{"host", "10.0.0.5"}, {"port", 70000}, {"user", "root"}}), "web", {});
  EXPECT_FALSE(port);
}

TEST(SshArgvTest, NoTargetYetIsNotReady) {
  auto argv = SshArgv(Instance(nullptr), "web", {});
  ASSERT_FALSE(argv);
  EXPECT_EQ(argv.error().api_code, "not_ready");
}

}  // namespace
}  // namespace gpuwerk::cli::internal

#include "relay/internal/upstream_login.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>

namespace gpuwerk::relay::internal {
namespace {

using std::chrono_literals::operator""ms;

RelayTarget Target(const std::string& login) {
  RelayTarget t;
  t.instance_id = "i-alpha";
  t.instance_name = "alpha";
  t.hostname = "alpha-aaaaa";
  t.upstream_host = "127.0.0.1";
  t.login = login;
  return t;
}

TEST(UpstreamLoginTest, EachFailureHasItsStableCode) {
  EXPECT_EQ(RefusalCode(UpstreamLoginFailure::kUnreachable), "upstream_unreachable");
  EXPECT_EQ(RefusalCode(UpstreamLoginFailure::kHostKeyMismatch), "upstream_host_key_mismatch");
  EXPECT_EQ(RefusalCode(UpstreamLoginFailure::kAuthFailed), "upstream_auth_failed");
  EXPECT_EQ(RefusalCode(UpstreamLoginFailure::kNoCredential), "relay_credential_unavailable");
}

TEST(UpstreamLoginTest, C07_MissingRelayCredentialSaysSoAndThatTheOwnKeyWasAccepted) {
  const std::string root = RefusalMessage(UpstreamLoginFailure::kAuthFailed, Target("root"));
  EXPECT_NE(root.find("instance alpha (alpha-aaaaa) is not accepting connections yet"),
            std::string::npos)
      << root;
  EXPECT_NE(root.find("the relay credential is missing there"), std::string::npos) << root;
  EXPECT_NE(root.find("Your own key was accepted"), std::string::npos) << root;
  // A login other than root: waiting will not help, and the message says what will.
  const std::string ubuntu = RefusalMessage(UpstreamLoginFailure::kAuthFailed, Target("ubuntu"));
  EXPECT_NE(ubuntu.find("as \"ubuntu\": the relay can log in as root only"), std::string::npos)
      << ubuntu;
  EXPECT_NE(ubuntu.find("use alpha-aaaaa (root) as the SSH user name"), std::string::npos)
      << ubuntu;
  EXPECT_NE(RefusalMessage(UpstreamLoginFailure::kUnreachable, Target("root"))
                .find("its sshd does not answer"),
            std::string::npos);
  EXPECT_NE(RefusalMessage(UpstreamLoginFailure::kHostKeyMismatch, Target("root"))
                .find("unexpected host key"),
            std::string::npos);
  EXPECT_NE(RefusalMessage(UpstreamLoginFailure::kNoCredential, Target("root"))
                .find("cannot make its credential for instance alpha"),
            std::string::npos);
}

TEST(UpstreamLoginTest, NothingListeningIsUnreachable) {
  // A bound socket that does not listen: connecting to its port is refused, and no other
  // process can take the port meanwhile.
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  socklen_t len = sizeof addr;
  ASSERT_EQ(::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  RelayTarget t = Target("root");
  t.upstream_port = ntohs(addr.sin_port);
  auto upstream = LogInUpstream(t, "not a key", "not a certificate", 2000ms);
  ::close(fd);
  ASSERT_FALSE(upstream);
  EXPECT_EQ(upstream.error(), UpstreamLoginFailure::kUnreachable);
}

}  // namespace
}  // namespace gpuwerk::relay::internal

// The container's sshd host key as the agent reads it (agent/host_key.h): from a tar archive the
// engine answers, through DockerEngine's archive download against a stand-in engine socket.
#include "agent/host_key.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <chrono>
#include <filesystem>

#include "agent/docker_engine.h"
#include "agent/testing/one_entry_tar.h"
#include "agent/testing/stand_in_engine.h"

namespace gpuwerk::agent {
namespace {

constexpr const char* kKey =
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl";

using testing::OneEntryTar;

TEST(HostKeyTest, SingleFileFromTarTakesOneRegularFileOnly) {
  const std::string file = std::string(kKey) + " root@alpha\n";
  auto got = SingleFileFromTar(OneEntryTar("ssh_host_ed25519_key.pub", AE_IFREG, file), 4096);
  ASSERT_TRUE(got) << got.error().message;
  EXPECT_EQ(*got, file);
  // A link (the tenant pointing the file elsewhere), a directory, too much, not a tar: refused.
  EXPECT_EQ(
      SingleFileFromTar(OneEntryTar("k.pub", AE_IFLNK, "", "/etc/shadow"), 4096).error().api_code,
      "bad_archive");
  EXPECT_EQ(SingleFileFromTar(OneEntryTar("ssh", AE_IFDIR, ""), 4096).error().api_code,
            "bad_archive");
  EXPECT_EQ(SingleFileFromTar(OneEntryTar("k.pub", AE_IFREG, std::string(5000, 'a')), 4096)
                .error()
                .api_code,
            "bad_archive");
  EXPECT_EQ(SingleFileFromTar("not a tar archive at all", 4096).error().api_code, "bad_archive");
  EXPECT_EQ(SingleFileFromTar("", 4096).error().api_code, "bad_archive");
}

TEST(HostKeyTest, Ed25519KeyLineKeepsTypeAndKeyAndDropsTheComment) {
  EXPECT_EQ(*Ed25519KeyLine(std::string(kKey) + " root@alpha\n"), kKey);
  EXPECT_EQ(*Ed25519KeyLine(std::string("  ") + kKey + "\r\n"), kKey);
  for (const std::string& bad :
       {std::string(""), std::string("ssh-ed25519"), std::string("ssh-ed25519 "),
        std::string("ssh-rsa AAAAB3NzaC1yc2EAAAADAQABAAABAQ root@x"),
        std::string("ssh-ed25519x AAAA"), std::string("ssh-ed25519 AAAA$(id)"),
        std::string(kKey) + "\n" + kKey, "ssh-ed25519 " + std::string(200, 'A')}) {
    auto r = Ed25519KeyLine(bad);
    ASSERT_FALSE(r) << bad;
    EXPECT_EQ(r.error().api_code, "bad_host_key") << bad;
  }
}

TEST(HostKeyTest, ReadSshHostKeyDownloadsTheFileThroughTheEngine) {
  namespace fs = std::filesystem;
  std::string tmpl = (fs::temp_directory_path() / "gpuwerk-hostkey-XXXXXX").string();
  const fs::path dir = ::mkdtemp(tmpl.data());
  const std::string socket = (dir / "engine.sock").string();
  const std::string tar =
      OneEntryTar("ssh_host_ed25519_key.pub", AE_IFREG, std::string(kKey) + " x\n");
  bool missing = false;
  testing::StandInEngine stand_in(socket, [&](const std::string&) -> std::string {
    if (missing) {
      return testing::StandInEngine::Json(
          404, R"({"message":"lstat /etc/ssh/ssh_host_ed25519_key.pub: no such file"})");
    }
    return "HTTP/1.1 200 OK\r\nContent-Type: application/x-tar\r\nConnection: close\r\n"
           "Content-Length: " +
           std::to_string(tar.size()) + "\r\n\r\n" + tar;
  });
  ASSERT_TRUE(stand_in.ok());
  DockerEngine engine({.socket_path = socket, .timeout = std::chrono::seconds(5)});
  auto key = ReadSshHostKey(engine, "c1", std::chrono::milliseconds(0));
  ASSERT_TRUE(key) << key.error().message;
  EXPECT_EQ(*key, kKey);
  EXPECT_EQ(stand_in.requests().front(),
            "GET /v1.41/containers/c1/archive?path=%2Fetc%2Fssh%2Fssh_host_ed25519_key.pub "
            "HTTP/1.1");
  missing = true;
  EXPECT_EQ(ReadSshHostKey(engine, "c1", std::chrono::milliseconds(0)).error().api_code,
            "container_not_found");
  fs::remove_all(dir);
}

}  // namespace
}  // namespace gpuwerk::agent

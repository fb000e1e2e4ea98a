#include "app/server_config.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>

#include "tests/support/temp_dir.h"

namespace gpuwerk::app {
namespace {

TEST(ServerConfigTest, FileThenEnvironment) {
  testing::TempDir dir;
  const auto file = dir.path() / "gpuwerk.toml";
  std::ofstream(file) << "listen = \"127.0.0.1:9000\"\npublic_url = \"https://gpu.example.test\"\n"
                         "http_threads = 8\n";
  ServerConfig c;
  ASSERT_TRUE(LoadConfigFile(file, c));
  EXPECT_EQ(c.listen, "127.0.0.1:9000");
  EXPECT_EQ(c.http_threads, 8);
  ::setenv("GPUWERK_LISTEN", "127.0.0.1:9001", 1);
  ASSERT_TRUE(ApplyEnvironment(c));
  ::unsetenv("GPUWERK_LISTEN");
  EXPECT_EQ(c.listen, "127.0.0.1:9001");
  EXPECT_EQ(c.public_url, "https://gpu.example.test");
  EXPECT_TRUE(Validate(c));
}

TEST(ServerConfigTest, BadFilesAndValuesAreNamed) {
  testing::TempDir dir;
  const auto file = dir.path() / "bad.toml";
  std::ofstream(file) << "listen = \n";
  ServerConfig c;
  auto r = LoadConfigFile(file, c);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().api_code, "invalid_config");
  EXPECT_NE(r.error().message.find("bad.toml:1"), std::string::npos) << r.error().message;

  std::ofstream(file) << "no_such_option = 1\n";
  r = LoadConfigFile(file, c);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("no_such_option"), std::string::npos);

  ::setenv("GPUWERK_HTTP_THREADS", "many", 1);
  r = ApplyEnvironment(c);
  ::unsetenv("GPUWERK_HTTP_THREADS");
  ASSERT_FALSE(r);

  c = ServerConfig{};
  c.mail = "smtp";
  EXPECT_FALSE(Validate(c)) << "smtp without smtp_url";
  c = ServerConfig{};
  c.public_url = "gpu.example.test";
  EXPECT_FALSE(Validate(c));
}

}  // namespace
}  // namespace gpuwerk::app

#include "cli/login_file.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <fstream>
#include <map>

#include "tests/support/temp_dir.h"

namespace gpuwerk::cli {
namespace {

namespace fs = std::filesystem;

EnvLookup MapEnv(std::map<std::string, std::string> vars) {
  return [vars = std::move(vars)](std::string_view name) -> std::optional<std::string> {
    auto it = vars.find(std::string(name));
    if (it == vars.end() || it->second.empty()) return std::nullopt;
    return it->second;
  };
}

mode_t ModeOf(const fs::path& p) {
  struct stat st {};
  EXPECT_EQ(::stat(p.c_str(), &st), 0) << p;
  return st.st_mode & 07777;
}

void WriteText(const fs::path& p, const std::string& text) {
  std::ofstream(p, std::ios::binary) << text;
}

TEST(LoginFilePathTest, PrefersConfigDirThenXdgThenHome) {
  EXPECT_EQ(*LoginFilePath(
                MapEnv({{"GPUWERK_CONFIG_DIR", "/c"}, {"XDG_CONFIG_HOME", "/x"}, {"HOME", "/h"}})),
            fs::path("/c/login.json"));
  EXPECT_EQ(*LoginFilePath(MapEnv({{"XDG_CONFIG_HOME", "/x"}, {"HOME", "/h"}})),
            fs::path("/x/gpuwerk/login.json"));
  EXPECT_EQ(*LoginFilePath(MapEnv({{"HOME", "/h"}})), fs::path("/h/.config/gpuwerk/login.json"));
  EXPECT_EQ(*LoginFilePath(MapEnv({{"GPUWERK_CONFIG_DIR", ""}, {"HOME", "/h"}})),
            fs::path("/h/.config/gpuwerk/login.json"));
}

TEST(LoginFilePathTest, FailsWithoutAnyDirectory) {
  auto path = LoginFilePath(MapEnv({}));
  ASSERT_FALSE(path);
  EXPECT_EQ(path.error().api_code, "no_config_dir");
}

TEST(LoginFileTest, RoundTripsWithMode0600InA0700Directory) {
  testing::TempDir tmp;
  const fs::path path = tmp.path() / "a" / "gpuwerk" / "login.json";
  const Login login{"http://127.0.0.1:8080", "gwt_abcdefghij", "ada@example.com"};
  ASSERT_TRUE(WriteLoginFile(path, login));

  EXPECT_EQ(ModeOf(path), 0600u);
  EXPECT_EQ(ModeOf(path.parent_path()), 0700u);
  EXPECT_EQ(ModeOf(path.parent_path().parent_path()), 0700u);
  auto back = ReadLoginFile(path);
  ASSERT_TRUE(back);
  ASSERT_TRUE(*back);
  EXPECT_EQ(**back, login);

  // No temporary file is left beside it.
  int entries = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(path.parent_path())) ++entries;
  EXPECT_EQ(entries, 1);
}

TEST(LoginFileTest, OverwritesAnExistingFileAndTightensItsMode) {
  testing::TempDir tmp;
  const fs::path path = tmp.path() / "login.json";
  WriteText(path, "{}");
  ::chmod(path.c_str(), 0644);
  const Login login{"https://gpu.example", "gwt_new", ""};
  ASSERT_TRUE(WriteLoginFile(path, login));
  EXPECT_EQ(ModeOf(path), 0600u);
  EXPECT_EQ(**ReadLoginFile(path), login);
  EXPECT_EQ(ModeOf(tmp.path()), 0700u);  // mkdtemp's, left alone
}

TEST(LoginFileTest, MissingFileIsNoLogin) {
  testing::TempDir tmp;
  auto back = ReadLoginFile(tmp.path() / "nope.json");
  ASSERT_TRUE(back);
  EXPECT_FALSE(*back);
}

TEST(LoginFileTest, MalformedFileIsAnErrorThatNamesThePathButNotTheContents) {
  testing::TempDir tmp;
  const fs::path path = tmp.path() / "login.json";
  for (const std::string text : {"not json gwt_secret", R"({"url": "http://x"})",
                                 R"({"url": 5, "token": "gwt_secret"})", "[]"}) {
    WriteText(path, text);
    auto back = ReadLoginFile(path);
    ASSERT_FALSE(back) << text;
    EXPECT_EQ(back.error().api_code, "invalid_login_file");
    EXPECT_NE(back.error().message.find(path.string()), std::string::npos);
    EXPECT_EQ(back.error().message.find("gwt_secret"), std::string::npos);
  }
}

TEST(LoginFileTest, WriteFailsWhenTheDirectoryIsAFile) {
  testing::TempDir tmp;
  WriteText(tmp.path() / "file", "x");
  auto r = WriteLoginFile(tmp.path() / "file" / "login.json", Login{"u", "t", ""});
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().api_code, "login_file_write_failed");
}

TEST(LoginFileTest, RemoveSaysWhetherThereWasOne) {
  testing::TempDir tmp;
  const fs::path path = tmp.path() / "login.json";
  ASSERT_TRUE(WriteLoginFile(path, Login{"u", "t", ""}));
  EXPECT_EQ(RemoveLoginFile(path), true);
  EXPECT_EQ(RemoveLoginFile(path), false);
  EXPECT_FALSE(fs::exists(path));
}

class ResolveTargetTest : public ::testing::Test {
 protected:
  void SaveLogin() {
    ASSERT_TRUE(WriteLoginFile(tmp_.path() / "login.json",
                               Login{"http://file:1", "gwt_file", "file@example.com"}));
  }
  std::map<std::string, std::string> Env(std::map<std::string, std::string> extra = {}) {
    extra["GPUWERK_CONFIG_DIR"] = tmp_.path().string();
    return extra;
  }

  testing::TempDir tmp_;
};

TEST_F(ResolveTargetTest, NotLoggedInWithoutFileOrEnvironment) {
  auto t = ResolveTarget({}, MapEnv(Env()));
  ASSERT_FALSE(t);
  EXPECT_EQ(t.error().api_code, "not_logged_in");
  EXPECT_EQ(t.error().code, core::ErrorCode::kUnauthenticated);
  EXPECT_EQ(t.error().message,
            "not logged in: run 'gpuwerk login' or set GPUWERK_URL and GPUWERK_TOKEN");
}

TEST_F(ResolveTargetTest, ReadsTheLoginFile) {
  SaveLogin();
  auto t = ResolveTarget({}, MapEnv(Env()));
  ASSERT_TRUE(t);
  EXPECT_EQ(t->url, "http://file:1");
  EXPECT_EQ(t->token, "gwt_file");
  EXPECT_EQ(t->email, "file@example.com");
}

TEST_F(ResolveTargetTest, EnvironmentOverridesEachFieldOfTheFile) {
  SaveLogin();
  auto url_only = ResolveTarget({}, MapEnv(Env({{"GPUWERK_URL", "http://env:2"}})));
  ASSERT_TRUE(url_only);
  EXPECT_EQ(url_only->url, "http://env:2");
  EXPECT_EQ(url_only->token, "gwt_file");

  auto token_only = ResolveTarget({}, MapEnv(Env({{"GPUWERK_TOKEN", "gwt_env"}})));
  ASSERT_TRUE(token_only);
  EXPECT_EQ(token_only->url, "http://file:1");
  EXPECT_EQ(token_only->token, "gwt_env");
  EXPECT_EQ(token_only->email, "");
}

TEST_F(ResolveTargetTest, FlagsOverrideEnvironment) {
  SaveLogin();
  auto t = ResolveTarget({.url = "http://flag:3", .token = "gwt_flag"},
                         MapEnv(Env({{"GPUWERK_URL", "http://env:2"}, {"GPUWERK_TOKEN", "x"}})));
  ASSERT_TRUE(t);
  EXPECT_EQ(t->url, "http://flag:3");
  EXPECT_EQ(t->token, "gwt_flag");
}

TEST_F(ResolveTargetTest, EnvironmentAloneNeedsNoFileAndIgnoresABrokenOne) {
  WriteText(tmp_.path() / "login.json", "broken");
  auto t = ResolveTarget(
      {}, MapEnv(Env({{"GPUWERK_URL", "http://env:2"}, {"GPUWERK_TOKEN", "gwt_env"}})));
  ASSERT_TRUE(t);
  EXPECT_EQ(t->url, "http://env:2");
  EXPECT_EQ(t->token, "gwt_env");

  auto no_dirs = ResolveTarget({}, MapEnv({{"GPUWERK_TOKEN", "gwt_env"}}));
  ASSERT_TRUE(no_dirs);
  EXPECT_EQ(no_dirs->url, kDefaultServerUrl);
}

TEST_F(ResolveTargetTest, BrokenFileIsReportedWhenItIsNeeded) {
  WriteText(tmp_.path() / "login.json", "broken");
  auto t = ResolveTarget({}, MapEnv(Env()));
  ASSERT_FALSE(t);
  EXPECT_EQ(t.error().api_code, "invalid_login_file");
}

}  // namespace
}  // namespace gpuwerk::cli

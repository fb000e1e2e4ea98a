// The `gpuwerk` CLI as a person runs it, against a real server: login, keys, tokens, whoami,
// and the exit codes and one-line errors scripts rely on.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <fstream>

#include "tests/integration/server_fixture.h"
#include "tests/support/run_command.h"
#include "tests/support/ssh_keygen.h"

namespace gpuwerk::testing {
namespace {

class CliTest : public ServerTest {
 protected:
  void SetUp() override {
    ServerTest::SetUp();
    if (HasFatalFailure()) return;
    auto b = Browser();
    SignUp(*b, "alice@example.test", "alice password 1");
  }
  /// `gpuwerk ARGS` with its own config dir (the login file), so tests never touch ~/.config.
  CommandResult Gpuwerk(const std::string& args, const std::string& input = "",
                        const std::string& env = "") {
    return RunCommand(dir_.path(),
                      "env -u GPUWERK_URL -u GPUWERK_TOKEN GPUWERK_CONFIG_DIR='" +
                          (dir_.path() / "config").string() + "' " + env + " " + GpuwerkBinary() +
                          " " + args,
                      input);
  }
  CommandResult Login() {
    return Gpuwerk(
        "login --url " + app_->base_url() + " --email alice@example.test --password-stdin",
        "alice password 1\n");
  }
};

// New-user trial: `gpuwerk up --listen BAD` made the data directory and the database before it
// read --listen. Every flag is checked first: bad input changes nothing on disk.
TEST_F(CliTest, UpAndServerWithABadListenLeaveNoDataDirectory) {
  for (const std::string command : {"up", "server"}) {
    for (const std::string flags : {"--listen nonsense", "--listen 127.0.0.1:99999",
                                    "--listen ::1:80", "--ssh-listen nowhere"}) {
      if (command == "server" && flags.starts_with("--ssh-listen")) continue;  // up only
      const std::filesystem::path data = dir_.path() / ("data-" + command);
      auto r = Gpuwerk(command + " --data '" + data.string() + "' " + flags);
      EXPECT_EQ(r.exit_code, 2) << command << " " << flags << ": " << r.err;
      EXPECT_TRUE(r.err.starts_with("gpuwerk: ")) << r.err;
      EXPECT_NE(r.err.find("listen"), std::string::npos) << r.err;
      EXPECT_FALSE(std::filesystem::exists(data)) << command << " " << flags;
    }
  }
}

TEST_F(CliTest, LoginWritesAPrivateLoginFileAndWhoamiUsesIt) {
  auto r = Login();
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("alice@example.test"), std::string::npos) << r.out;
  struct stat st {};
  ASSERT_EQ(::stat((dir_.path() / "config/login.json").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600);
  auto who = Gpuwerk("whoami --json");
  ASSERT_EQ(who.exit_code, 0) << who.err;
  EXPECT_EQ(nlohmann::json::parse(who.out)["email"], "alice@example.test");
  // The CLI holds an API token, not a browser session.
  EXPECT_EQ(nlohmann::json::parse(who.out)["authenticated_by"], "api_token");
}

TEST_F(CliTest, WrongPasswordFailsWithOneLine) {
  auto r =
      Gpuwerk("login --url " + app_->base_url() + " --email alice@example.test --password-stdin",
              "wrong password\n");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("invalid_credentials"), std::string::npos) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
}

TEST_F(CliTest, KeysAddListRemove) {
  ASSERT_EQ(Login().exit_code, 0);
  auto key = GenerateKey(dir_.path(), "laptop");
  auto add = Gpuwerk("keys add laptop " + key.private_path.string() + ".pub");
  ASSERT_EQ(add.exit_code, 0) << add.err;
  const std::string fp = SshKeygenFingerprint(key.private_path.string() + ".pub");
  EXPECT_NE(add.out.find(fp), std::string::npos) << add.out;

  auto from_stdin = Gpuwerk("keys add work -", GenerateKey(dir_.path(), "work").public_line);
  ASSERT_EQ(from_stdin.exit_code, 0) << from_stdin.err;

  auto ls = Gpuwerk("keys ls --json");
  ASSERT_EQ(ls.exit_code, 0) << ls.err;
  auto keys = nlohmann::json::parse(ls.out);
  ASSERT_EQ(keys.size(), 2u);
  // Same second on the test clock, so the order is by id: find laptop by name.
  auto laptop =
      std::find_if(keys.begin(), keys.end(), [](auto& k) { return k["name"] == "laptop"; });
  ASSERT_NE(laptop, keys.end());
  EXPECT_EQ((*laptop)["fingerprint"], fp);
  auto table = Gpuwerk("keys ls");
  EXPECT_NE(table.out.find("NAME"), std::string::npos);
  EXPECT_NE(table.out.find("laptop"), std::string::npos);

  auto dup = Gpuwerk("keys add laptop " + key.private_path.string() + ".pub");
  EXPECT_EQ(dup.exit_code, 1);
  EXPECT_NE(dup.err.find("name_taken"), std::string::npos) << dup.err;

  EXPECT_EQ(Gpuwerk("keys rm laptop").exit_code, 0);
  auto gone = Gpuwerk("keys rm laptop");
  EXPECT_EQ(gone.exit_code, 1);
  EXPECT_NE(gone.err.find("gpuwerk keys ls"), std::string::npos) << gone.err;
  EXPECT_EQ(nlohmann::json::parse(Gpuwerk("keys ls --json").out).size(), 1u);
}

TEST_F(CliTest, C03_PrivateKeyFileIsRefusedBeforeItLeavesTheMachine) {
  ASSERT_EQ(Login().exit_code, 0);
  auto key = GenerateKey(dir_.path(), "secret");
  auto r = Gpuwerk("keys add oops " + key.private_path.string());
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("PRIVATE"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(key.private_path.string() + ".pub"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("Nothing was sent: the key did not leave this machine."), std::string::npos)
      << r.err;
  std::istringstream lines(key.private_text);
  for (std::string line; std::getline(lines, line);) {
    if (line.size() > 20 && line.find("-----") == std::string::npos) {
      EXPECT_EQ(r.err.find(line), std::string::npos);
      EXPECT_EQ(r.out.find(line), std::string::npos);
    }
  }
  EXPECT_EQ(nlohmann::json::parse(Gpuwerk("keys ls --json").out).size(), 0u);
}

TEST_F(CliTest, C01_Utf16KeyFileGetsAClearError) {
  ASSERT_EQ(Login().exit_code, 0);
  auto key = GenerateKey(dir_.path(), "u16");
  std::string utf16 = "\xff\xfe";
  for (char c : key.public_line) utf16 += std::string{c, '\0'};
  std::ofstream(dir_.path() / "u16le.pub", std::ios::binary) << utf16;
  auto r = Gpuwerk("keys add u16 " + (dir_.path() / "u16le.pub").string());
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("invalid_encoding"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("UTF-8"), std::string::npos) << r.err;
}

TEST_F(CliTest, LoggingInAgainRevokesThePreviousToken) {
  ASSERT_EQ(Login().exit_code, 0);
  ASSERT_EQ(Login().exit_code, 0);
  auto ls = Gpuwerk("tokens ls --json");
  ASSERT_EQ(ls.exit_code, 0) << ls.err;
  EXPECT_EQ(nlohmann::json::parse(ls.out).size(), 1u) << ls.out;
}

TEST_F(CliTest, TokensAndLogout) {
  ASSERT_EQ(Login().exit_code, 0);
  auto created = Gpuwerk("tokens create ci");
  ASSERT_EQ(created.exit_code, 0) << created.err;
  const std::string secret = created.out.substr(0, created.out.find('\n'));
  EXPECT_EQ(secret.rfind("gwt_", 0), 0u) << created.out;
  // The new token works for scripts through the environment.
  auto who =
      Gpuwerk("whoami --json", "", "GPUWERK_URL=" + app_->base_url() + " GPUWERK_TOKEN=" + secret);
  ASSERT_EQ(who.exit_code, 0) << who.err;
  auto ls = Gpuwerk("tokens ls --json");
  EXPECT_EQ(nlohmann::json::parse(ls.out).size(), 2u) << ls.out;  // the CLI's own and "ci"
  EXPECT_EQ(Gpuwerk("logout").exit_code, 0);
  auto after = Gpuwerk("keys ls");
  EXPECT_EQ(after.exit_code, 1);
  EXPECT_NE(after.err.find("gpuwerk login"), std::string::npos) << after.err;
}

TEST_F(CliTest, UsageErrorsExitTwoAndUnreachableServerSaysWhatToDo) {
  EXPECT_EQ(Gpuwerk("keys add").exit_code, 2);
  EXPECT_EQ(Gpuwerk("no-such-verb").exit_code, 2);
  auto r = Gpuwerk("keys ls", "", "GPUWERK_URL=http://127.0.0.1:1 GPUWERK_TOKEN=gwt_x");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("cannot reach"), std::string::npos) << r.err;
}

// Issue 11: signup answers alike for a new address and a taken one, and leaves no login: the
// mailed link proves the address and sets the password, and then login works as for anyone.
TEST_F(CliTest, SignupSaysToOpenTheMailedLinkAndLoginWorksAfterIt) {
  auto r =
      Gpuwerk("signup --url " + app_->base_url() + " --email bob@example.test --password-stdin",
              "bob password 1\n");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out,
            "Check the mail of bob@example.test: open the link in it to confirm the address and "
            "set your password, then run 'gpuwerk login --url " +
                app_->base_url() + "'.\n");
  EXPECT_FALSE(std::filesystem::exists(dir_.path() / "config/login.json"));
  const std::string link = LinkToken("bob@example.test", kAddressProofPath);
  ASSERT_FALSE(link.empty());
  ASSERT_EQ(Browser()
                ->PostJson("/api/v1/auth/prove-address/consume",
                           {{"token", link}, {"password", "bob password 2"}})
                .status,
            200);
  auto login =
      Gpuwerk("login --url " + app_->base_url() + " --email bob@example.test --password-stdin",
              "bob password 2\n");
  ASSERT_EQ(login.exit_code, 0) << login.err;
  auto who = Gpuwerk("whoami --json");
  ASSERT_EQ(who.exit_code, 0) << who.err;
  EXPECT_EQ(nlohmann::json::parse(who.out)["email"], "bob@example.test");
  EXPECT_EQ(nlohmann::json::parse(who.out)["authenticated_by"], "api_token");
  // Only the login's API token: the sign-in session it started was ended.
  EXPECT_EQ(nlohmann::json::parse(Gpuwerk("tokens ls --json").out).size(), 1u);

  // Again with the same address: the same answer, and the owner is told by mail.
  auto again =
      Gpuwerk("signup --url " + app_->base_url() + " --email bob@example.test --password-stdin",
              "bob password 3\n");
  EXPECT_EQ(again.exit_code, 0) << again.err;
  EXPECT_EQ(again.out, r.out);
  bool told = false;
  for (const auto& m : Mails("bob@example.test", 2)) {
    told = told || m.subject.find("tried to sign up") != std::string::npos;
  }
  EXPECT_TRUE(told);
}

// docs/accounts.md "Address proof": an unproven account can make no API token, so `gpuwerk
// login` cannot save one; it says to open the mailed link and saves nothing.
TEST_F(CliTest, LoginBeforeTheAddressIsProvenSaysToOpenTheMailedLinkAndSavesNothing) {
  auto signup =
      Gpuwerk("signup --url " + app_->base_url() + " --email carol@example.test --password-stdin",
              "carol password 1\n");
  ASSERT_EQ(signup.exit_code, 0) << signup.err;
  auto login =
      Gpuwerk("login --url " + app_->base_url() + " --email carol@example.test --password-stdin",
              "carol password 1\n");
  EXPECT_EQ(login.exit_code, 1);
  EXPECT_NE(login.err.find("open the link mailed to you at sign-up"), std::string::npos)
      << login.err;
  EXPECT_NE(login.err.find("(email_unverified)"), std::string::npos) << login.err;
  EXPECT_EQ(std::count(login.err.begin(), login.err.end(), '\n'), 1) << login.err;
  EXPECT_FALSE(std::filesystem::exists(dir_.path() / "config/login.json"));
}

TEST_F(CliTest, JsonErrorsAreProblemJsonOnStderr) {
  ASSERT_EQ(Login().exit_code, 0);
  auto r = Gpuwerk("keys rm nope --json");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.out, "");
  ASSERT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  auto problem = nlohmann::json::parse(r.err);
  EXPECT_EQ(problem["code"], "not_found");
  EXPECT_EQ(problem["title"], "not_found");
  EXPECT_EQ(problem["type"], "about:blank");
  // The server's own problem, passed on with its code.
  auto weak = Gpuwerk("keys add bad - --json", "ssh-ed25519 not-base64\n");
  EXPECT_EQ(weak.exit_code, 1);
  EXPECT_EQ(weak.out, "");
  EXPECT_EQ(nlohmann::json::parse(weak.err)["code"], "invalid_public_key") << weak.err;
  auto usage = Gpuwerk("keys add --json");
  EXPECT_EQ(usage.exit_code, 2);
  EXPECT_EQ(nlohmann::json::parse(usage.err)["code"], "missing_argument") << usage.err;
}

TEST_F(CliTest, AMistypedVerbGetsASuggestion) {
  auto r = Gpuwerk("instance ls");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err,
            "gpuwerk: 'instance' is not a command of `gpuwerk`; did you mean `gpuwerk instances "
            "ls`?\n");
  auto key = Gpuwerk("key ls");
  EXPECT_EQ(key.exit_code, 2);
  EXPECT_EQ(key.err,
            "gpuwerk: 'key' is not a command of `gpuwerk`; did you mean `gpuwerk keys ls`?\n");
}

// New-user trial: an unknown flag printed CLI11's own text; the real binary now answers one line
// naming the command's help, exit code 2 (also for `up`, whose options are the server's).
TEST_F(CliTest, AnUnknownFlagIsOneLineNamingTheHelp) {
  auto r = Gpuwerk("instances create alpha --key laptop --foo");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(r.err, "gpuwerk: unknown option --foo; see `gpuwerk instances create --help`\n");
  auto up = Gpuwerk("up --lissten 127.0.0.1:0 --data '" + (dir_.path() / "up-data").string() + "'");
  EXPECT_EQ(up.exit_code, 2);
  EXPECT_EQ(
      up.err,
      "gpuwerk: unknown option --lissten (did you mean --listen?); see `gpuwerk up --help`\n");
  EXPECT_FALSE(std::filesystem::exists(dir_.path() / "up-data"));
}

}  // namespace
}  // namespace gpuwerk::testing

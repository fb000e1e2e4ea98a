// The shared test support itself: the HasApiCode matcher on each kind of value it accepts,
// Eventually's answer when the condition holds, and when it does not in time, and the server
// starters' ListeningChild and StopChild.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "tests/support/eventually.h"
#include "tests/support/http_client.h"
#include "tests/support/listening_child.h"
#include "tests/support/matchers.h"

namespace gpuwerk::testing {
namespace {

using ::testing::Not;

TEST(HasApiCodeTest, MatchesAnErrorByItsApiCode) {
  const core::Error e(core::ErrorCode::kNotFound, "not_found", "no such instance");
  EXPECT_THAT(e, HasApiCode("not_found"));
  EXPECT_THAT(e, Not(HasApiCode("forbidden")));
}

TEST(HasApiCodeTest, MatchesAResultOnlyWhenItHoldsThatError) {
  const core::Result<int> failed =
      core::Fail(core::ErrorCode::kAlreadyExists, "name_taken", "taken");
  const core::Result<int> value = 3;
  EXPECT_THAT(failed, HasApiCode("name_taken"));
  EXPECT_THAT(failed, Not(HasApiCode("not_found")));
  EXPECT_THAT(value, Not(HasApiCode("name_taken")));
  const core::Result<void> done;
  EXPECT_THAT(done, Not(HasApiCode("")));
}

TEST(HasApiCodeTest, MatchesProblemJsonAndAnHttpAnswerCarryingIt) {
  const nlohmann::json problem = {
      {"type", "about:blank"}, {"title", "Conflict"}, {"status", 409}, {"code", "no_capacity"}};
  EXPECT_THAT(problem, HasApiCode("no_capacity"));
  const nlohmann::json numeric_code = {{"code", 3}};
  EXPECT_THAT(numeric_code, Not(HasApiCode("3")));
  EXPECT_THAT(nlohmann::json::array(), Not(HasApiCode("")));
  const HttpResult answer{.status = 409, .body = problem.dump()};
  EXPECT_THAT(answer, HasApiCode("no_capacity"));
  const HttpResult ok{.status = 200, .body = R"({"items":[]})"};
  EXPECT_THAT(ok, Not(HasApiCode("")));
}

TEST(HasApiCodeTest, SaysWhichCodeItGot) {
  const core::Error e(core::ErrorCode::kNotFound, "not_found", "gone");
  ::testing::StringMatchResultListener listener;
  EXPECT_FALSE(::testing::ExplainMatchResult(HasApiCode("forbidden"), e, &listener));
  EXPECT_EQ(listener.str(), "whose api_code is \"not_found\"");
}

TEST(EventuallyTest, AnswersAtOnceWhenTheConditionHolds) {
  int calls = 0;
  EXPECT_TRUE(Eventually([&] { return ++calls == 1; }, std::chrono::seconds(10)));
  EXPECT_EQ(calls, 1);
}

TEST(EventuallyTest, PollsUntilTheConditionHoldsAndGivesUpAfterTheLimit) {
  int calls = 0;
  EXPECT_TRUE(Eventually([&] { return ++calls == 3; }, std::chrono::seconds(10),
                         std::chrono::milliseconds(1)));
  EXPECT_EQ(calls, 3);
  EXPECT_FALSE(
      Eventually([] { return false; }, std::chrono::milliseconds(5), std::chrono::milliseconds(1)));
}

TEST(ListeningChildTest, ReadsThePortTheChildAnnounces) {
  ListeningChild child;
  std::string error;
  ASSERT_TRUE(
      child.Start({"/bin/sh", "-c", "echo listening 4321; exec sleep 60"}, "the child", &error))
      << error;
  EXPECT_EQ(child.port(), 4321);
  child.Stop();
  child.Stop();  // idempotent
}

TEST(ListeningChildTest, SaysWhenTheChildEndsBeforeListeningOrSaysSomethingElse) {
  ListeningChild child;
  std::string error;
  EXPECT_FALSE(child.Start({"/bin/sh", "-c", "exit 3"}, "the child", &error));
  EXPECT_EQ(error, "the child exited before listening (see stderr)");
  EXPECT_FALSE(child.Start({"/bin/sh", "-c", "echo ready; exec sleep 60"}, "the child", &error));
  EXPECT_EQ(error, "unexpected first line from the child: ready\n");
}

TEST(StopChildTest, KillsAChildThatIgnoresTheSignalOnceTheGraceIsOver) {
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::signal(SIGTERM, SIG_IGN);  // kept across exec
    ::close(ready[0]);
    if (::write(ready[1], "x", 1) != 1) ::_exit(126);
    ::execl("/bin/sleep", "/bin/sleep", "60", static_cast<char*>(nullptr));
    ::_exit(127);
  }
  ::close(ready[1]);
  char byte = 0;
  ASSERT_EQ(::read(ready[0], &byte, 1), 1);  // SIGTERM is ignored from here on
  ::close(ready[0]);
  const std::optional<int> status = StopChild(pid, SIGTERM, std::chrono::milliseconds(100));
  ASSERT_TRUE(status.has_value());
  ASSERT_TRUE(WIFSIGNALED(*status));
  EXPECT_EQ(WTERMSIG(*status), SIGKILL);
  EXPECT_EQ(StopChild(pid, SIGTERM, std::chrono::milliseconds(100)), std::nullopt);  // reaped
}

TEST(StopChildTest, AChildThatHeedsTheSignalEndsByIt) {
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::execl("/bin/sleep", "/bin/sleep", "60", static_cast<char*>(nullptr));
    ::_exit(127);
  }
  const std::optional<int> status = StopChild(pid, SIGTERM, std::chrono::seconds(30));
  ASSERT_TRUE(status.has_value());
  ASSERT_TRUE(WIFSIGNALED(*status));
  EXPECT_EQ(WTERMSIG(*status), SIGTERM);
}

}  // namespace
}  // namespace gpuwerk::testing

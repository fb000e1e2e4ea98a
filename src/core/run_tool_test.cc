#include "core/run_tool.h"

#include <gtest/gtest.h>

#include <csignal>
#include <string>

namespace gpuwerk::core {
namespace {

ToolOutcome MustRun(ToolRun run) {
  auto outcome = RunTool(std::move(run));
  EXPECT_TRUE(outcome.has_value()) << outcome.error().message;
  return outcome.value_or(ToolOutcome{});
}

TEST(RunToolTest, ReportsTheExitCode) {
  const ToolOutcome outcome = MustRun({.argv = {"sh", "-c", "exit 3"}});
  EXPECT_EQ(outcome.end, ToolOutcome::End::kExited);
  EXPECT_EQ(outcome.exit_code, 3);
}

TEST(RunToolTest, CapturesStdoutAndStderrApartOrMerged) {
  const ToolOutcome apart = MustRun({.argv = {"sh", "-c", "echo out; echo err >&2"}});
  EXPECT_EQ(apart.exit_code, 0);
  EXPECT_EQ(apart.output, "out\n");
  EXPECT_EQ(apart.error_output, "err\n");

  const ToolOutcome merged = MustRun(
      {.argv = {"sh", "-c", "echo out; echo err >&2"}, .stderr_mode = ToolRun::Stderr::kMerged});
  EXPECT_EQ(merged.output, "out\nerr\n");
  EXPECT_EQ(merged.error_output, "");

  const ToolOutcome dropped = MustRun({.argv = {"sh", "-c", "echo out; echo err >&2"},
                                       .stderr_mode = ToolRun::Stderr::kDiscard,
                                       .capture_output = false});
  EXPECT_EQ(dropped.output, "");
  EXPECT_EQ(dropped.error_output, "");
}

TEST(RunToolTest, FeedsStdinAndInputFilesOnDescriptorsThreeOn) {
  const ToolOutcome outcome = MustRun({.argv = {"sh", "-c", "cat; cat /dev/fd/3; cat /dev/fd/4"},
                                       .stdin_data = "from stdin\n",
                                       .input_files = {"file three\n", "file four\n"}});
  EXPECT_EQ(outcome.exit_code, 0);
  EXPECT_EQ(outcome.output, "from stdin\nfile three\nfile four\n");
}

TEST(RunToolTest, KeepsAtMostMaxOutputBytes) {
  const ToolOutcome outcome =
      MustRun({.argv = {"head", "-c", "100000", "/dev/zero"}, .max_output_bytes = 10});
  EXPECT_EQ(outcome.exit_code, 0);
  EXPECT_EQ(outcome.output, std::string(10, '\0'));
}

TEST(RunToolTest, KillsAToolThatOutlivesItsTimeout) {
  const ToolOutcome outcome =
      MustRun({.argv = {"sleep", "600"}, .timeout = std::chrono::milliseconds(50)});
  EXPECT_EQ(outcome.end, ToolOutcome::End::kTimedOut);
  EXPECT_EQ(outcome.exit_code, -1);
}

TEST(RunToolTest, ReportsASignal) {
  const ToolOutcome outcome = MustRun({.argv = {"sh", "-c", "kill -TERM $$"}});
  EXPECT_EQ(outcome.end, ToolOutcome::End::kSignalled);
  EXPECT_EQ(outcome.signal, SIGTERM);
}

TEST(RunToolTest, TheEnvironmentIsCleanWhateverTheCallerHas) {
  ASSERT_EQ(::setenv("GPUWERK_RUN_TOOL_SECRET", "leak", 1), 0);
  const ToolOutcome outcome = MustRun({.argv = {"env"}});
  ::unsetenv("GPUWERK_RUN_TOOL_SECRET");
  EXPECT_EQ(outcome.exit_code, 0);
  EXPECT_EQ(outcome.output, std::string(kToolPath) + "\n" + std::string(kToolLocale) + "\n");
}

TEST(RunToolTest, AProgramThatCannotStartIsAnError) {
  auto outcome = RunTool({.argv = {"/nonexistent/gpuwerk-no-such-tool"}});
  if (outcome.has_value()) {
    EXPECT_EQ(outcome->exit_code, 127);  // a C library that reports the failed exec late
  } else {
    EXPECT_EQ(outcome.error().api_code, "tool_not_started");
    EXPECT_EQ(outcome.error().code, ErrorCode::kUnavailable);
  }
  auto empty = RunTool({});
  ASSERT_FALSE(empty.has_value());
  EXPECT_EQ(empty.error().api_code, "tool_argv_empty");
}

}  // namespace
}  // namespace gpuwerk::core

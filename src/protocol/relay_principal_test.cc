#include "protocol/relay_principal.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace gpuwerk::protocol {
namespace {

TEST(RelayPrincipalTest, NamesTheInstanceAndRefusesWhatCouldBreakTheOption) {
  EXPECT_EQ(RelayInstancePrincipal("ins_2f7qk3x7q"), "gpuwerk-instance-ins_2f7qk3x7q");
  EXPECT_EQ(RelayInstancePrincipal("i-alpha.1"), "gpuwerk-instance-i-alpha.1");
  EXPECT_EQ(RelayInstancePrincipal(std::string(64, 'a')),
            "gpuwerk-instance-" + std::string(64, 'a'));
  // A comma would name two principals, a quote would end principals="…", a blank the option.
  for (const std::string& bad :
       std::vector<std::string>{"", "a,b", "a\"b", "a b", "a\nb", "a*", std::string(65, 'a')}) {
    EXPECT_EQ(RelayInstancePrincipal(bad), std::nullopt) << bad;
  }
}

}  // namespace
}  // namespace gpuwerk::protocol

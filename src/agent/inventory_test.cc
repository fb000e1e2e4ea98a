#include "agent/inventory.h"

#include <gtest/gtest.h>

#include <string>

namespace gpuwerk::agent {
namespace {

TEST(InventoryTest, MissingNvmlIsUnavailableWithNoGpus) {
  Inventory inv;
  inv.gpus.push_back({.name = "stale"});
  DiscoverGpus(inv, "libgpuwerk-no-such-nvml.so.1");
  EXPECT_TRUE(inv.gpus.empty());
  EXPECT_TRUE(inv.nvml.starts_with("unavailable: ")) << inv.nvml;
  EXPECT_NE(inv.nvml.find("libgpuwerk-no-such-nvml.so.1"), std::string::npos) << inv.nvml;
}

TEST(InventoryTest, LibraryWithoutNvmlSymbolsIsUnavailable) {
  Inventory inv;
  DiscoverGpus(inv, "libc.so.6");
  EXPECT_TRUE(inv.gpus.empty());
  EXPECT_EQ(inv.nvml, "unavailable: libc.so.6 has no nvmlInit_v2");
}

TEST(InventoryTest, HostFactsAreSane) {
  const Inventory inv = DiscoverHost();
  EXPECT_GE(inv.cpus, 1);
  EXPECT_LE(inv.cpus, 4096);
  EXPECT_GT(inv.memory_bytes, 64ull << 20);
  EXPECT_LT(inv.memory_bytes, 1ull << 50);
  for (const auto& a : inv.addresses) {
    EXPECT_FALSE(a.starts_with("127.")) << a;
    EXPECT_EQ(std::count(a.begin(), a.end(), '.'), 3) << a;
  }
}

TEST(InventoryTest, JsonHasTheProtocolFields) {
  Inventory inv;
  inv.gpus.push_back({.name = "NVIDIA GB10", .uuid = "GPU-1", .memory_bytes = 1024});
  inv.memory_bytes = 2048;
  inv.cpus = 20;
  inv.addresses = {"10.0.0.5"};
  const nlohmann::json j = ToJson(inv);
  EXPECT_EQ(j["gpus"][0]["name"], "NVIDIA GB10");
  EXPECT_EQ(j["gpus"][0]["uuid"], "GPU-1");
  EXPECT_EQ(j["gpus"][0]["memory_bytes"], 1024);
  EXPECT_EQ(j["memory_bytes"], 2048);
  EXPECT_EQ(j["cpus"], 20);
  EXPECT_EQ(j["addresses"][0], "10.0.0.5");
  EXPECT_TRUE(j["rail_addresses"].is_array());
  EXPECT_EQ(j["nvml"], "ok");
}

}  // namespace
}  // namespace gpuwerk::agent

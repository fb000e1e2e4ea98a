#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace gpuwerk::agent {

/// One GPU as NVML reports it.
struct GpuInfo {
  std::string name;           ///< nvmlDeviceGetName, e.g. "NVIDIA GB10"
  std::string uuid;           ///< nvmlDeviceGetUUID, e.g. "GPU-8f6c…"
  uint64_t memory_bytes = 0;  ///< nvmlDeviceGetMemoryInfo total, bytes
};

/// What the host has: the sync request's `inventory` (docs/agent-protocol.md).
struct Inventory {
  std::vector<GpuInfo> gpus;
  uint64_t memory_bytes = 0;  ///< physical memory, bytes (sysconf _SC_PHYS_PAGES × page size)
  int cpus = 0;               ///< online CPUs (sysconf _SC_NPROCESSORS_ONLN)
  std::vector<std::string> addresses;       ///< the host's IPv4 addresses, loopback skipped
  std::vector<std::string> rail_addresses;  ///< fabric (rail) addresses; none found yet
  std::string nvml = "ok";                  ///< "ok" or "unavailable: <reason>"
};

/// Lists the host's GPUs through NVML, loaded at run time with dlopen("libnvidia-ml.so.1") so
/// the agent runs (without GPUs) where no NVIDIA driver is installed. Calls, as documented in
/// the NVML API Reference (https://docs.nvidia.com/deploy/nvml-api/): nvmlInit_v2,
/// nvmlDeviceGetCount_v2, nvmlDeviceGetHandleByIndex_v2, nvmlDeviceGetName, nvmlDeviceGetUUID,
/// nvmlDeviceGetMemoryInfo, nvmlShutdown. `library` names the shared object to load (tests pass
/// one that does not exist). On any failure `nvml` is "unavailable: <reason>" (the dlerror text,
/// the missing symbol, or the NVML return code) and `gpus` is empty; never throws.
/// Thread-safe as far as NVML is (it is, per its reference).
void DiscoverGpus(Inventory& inventory, const char* library = "libnvidia-ml.so.1");

/// Physical memory, online CPUs and IPv4 addresses (getifaddrs, loopback skipped) of this host.
/// GPUs are left empty and `nvml` as is: see DiscoverGpus. Thread-safe.
Inventory DiscoverHost();

/// DiscoverHost followed by DiscoverGpus(`nvml_library`).
Inventory DiscoverInventory(const char* nvml_library = "libnvidia-ml.so.1");

/// The JSON object of the sync request's `inventory`, field names as in docs/agent-protocol.md.
nlohmann::json ToJson(const Inventory& inventory);

}  // namespace gpuwerk::agent

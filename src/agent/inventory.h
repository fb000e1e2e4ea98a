#pragma once

#include "protocol/agent_sync.h"

namespace gpuwerk::agent {

/// One GPU as NVML reports it (nvmlDeviceGetName, nvmlDeviceGetUUID, total memory in bytes).
using GpuInfo = protocol::Gpu;

/// What the host has: the sync request's `inventory` (docs/agent-protocol.md). DiscoverHost and
/// DiscoverGpus fill all but `ssh_address`, which the Agent sets from its options.
using Inventory = protocol::Inventory;

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

}  // namespace gpuwerk::agent

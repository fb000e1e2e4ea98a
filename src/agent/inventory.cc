#include "agent/inventory.h"

#include <arpa/inet.h>
#include <dlfcn.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <unistd.h>

#include <algorithm>
#include <string>

namespace gpuwerk::agent {
namespace {

// The few NVML types and prototypes used, as the NVML API Reference documents them
// (https://docs.nvidia.com/deploy/nvml-api/): no NVML header is installed here.
using nvmlReturn_t = int;  // enum nvmlReturn_enum; NVML_SUCCESS = 0
using nvmlDevice_t = struct nvmlDevice_st*;
struct nvmlMemory_t {
  unsigned long long total;  // bytes
  unsigned long long free;
  unsigned long long used;
};
constexpr nvmlReturn_t kNvmlSuccess = 0;
constexpr unsigned kNvmlDeviceNameBufferSize = 96;  // NVML_DEVICE_NAME_V2_BUFFER_SIZE
constexpr unsigned kNvmlDeviceUuidBufferSize = 96;  // NVML_DEVICE_UUID_V2_BUFFER_SIZE

using InitFn = nvmlReturn_t (*)();
using ShutdownFn = nvmlReturn_t (*)();
using GetCountFn = nvmlReturn_t (*)(unsigned*);
using GetHandleFn = nvmlReturn_t (*)(unsigned, nvmlDevice_t*);
using GetStringFn = nvmlReturn_t (*)(nvmlDevice_t, char*, unsigned);
using GetMemoryFn = nvmlReturn_t (*)(nvmlDevice_t, nvmlMemory_t*);

template <class Fn>
Fn Symbol(void* lib, const char* name, std::string& missing) {
  void* p = ::dlsym(lib, name);
  if (p == nullptr && missing.empty()) missing = name;
  return reinterpret_cast<Fn>(p);
}

}  // namespace

void DiscoverGpus(Inventory& inventory, const char* library) {
  inventory.gpus.clear();
  void* lib = ::dlopen(library, RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    const char* why = ::dlerror();
    inventory.nvml = std::string("unavailable: ") + (why != nullptr ? why : "dlopen failed");
    return;
  }
  std::string missing;
  auto init = Symbol<InitFn>(lib, "nvmlInit_v2", missing);
  auto shutdown = Symbol<ShutdownFn>(lib, "nvmlShutdown", missing);
  auto count = Symbol<GetCountFn>(lib, "nvmlDeviceGetCount_v2", missing);
  auto handle = Symbol<GetHandleFn>(lib, "nvmlDeviceGetHandleByIndex_v2", missing);
  auto name = Symbol<GetStringFn>(lib, "nvmlDeviceGetName", missing);
  auto uuid = Symbol<GetStringFn>(lib, "nvmlDeviceGetUUID", missing);
  auto memory = Symbol<GetMemoryFn>(lib, "nvmlDeviceGetMemoryInfo", missing);
  if (!missing.empty()) {
    inventory.nvml = "unavailable: " + std::string(library) + " has no " + missing;
    ::dlclose(lib);
    return;
  }
  if (nvmlReturn_t rc = init(); rc != kNvmlSuccess) {
    inventory.nvml = "unavailable: nvmlInit_v2 returned " + std::to_string(rc);
    ::dlclose(lib);
    return;
  }
  unsigned n = 0;
  std::string failure;
  if (nvmlReturn_t rc = count(&n); rc != kNvmlSuccess) {
    failure = "nvmlDeviceGetCount_v2 returned " + std::to_string(rc);
  }
  for (unsigned i = 0; failure.empty() && i < n; ++i) {
    nvmlDevice_t dev = nullptr;
    char name_buf[kNvmlDeviceNameBufferSize] = {};
    char uuid_buf[kNvmlDeviceUuidBufferSize] = {};
    nvmlMemory_t mem{};
    if (nvmlReturn_t rc = handle(i, &dev); rc != kNvmlSuccess) {
      failure =
          "nvmlDeviceGetHandleByIndex_v2(" + std::to_string(i) + ") returned " + std::to_string(rc);
      break;
    }
    GpuInfo gpu;
    if (name(dev, name_buf, sizeof(name_buf)) == kNvmlSuccess) gpu.name = name_buf;
    if (uuid(dev, uuid_buf, sizeof(uuid_buf)) == kNvmlSuccess) gpu.uuid = uuid_buf;
    // Unified-memory GPUs (e.g. GB10) may not report memory: 0 then.
    if (memory(dev, &mem) == kNvmlSuccess) gpu.memory_bytes = mem.total;
    inventory.gpus.push_back(std::move(gpu));
  }
  shutdown();
  ::dlclose(lib);
  if (!failure.empty()) {
    inventory.gpus.clear();
    inventory.nvml = "unavailable: " + failure;
    return;
  }
  inventory.nvml = "ok";
}

Inventory DiscoverHost() {
  Inventory inv;
  const long pages = ::sysconf(_SC_PHYS_PAGES);
  const long page_size = ::sysconf(_SC_PAGESIZE);
  if (pages > 0 && page_size > 0) {
    inv.memory_bytes = static_cast<uint64_t>(pages) * static_cast<uint64_t>(page_size);
  }
  inv.cpus = static_cast<int>(std::max(1L, ::sysconf(_SC_NPROCESSORS_ONLN)));
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) == 0) {
    for (ifaddrs* a = list; a != nullptr; a = a->ifa_next) {
      if (a->ifa_addr == nullptr || a->ifa_addr->sa_family != AF_INET) continue;
      if ((a->ifa_flags & IFF_LOOPBACK) != 0) continue;
      char buf[INET_ADDRSTRLEN] = {};
      const auto* sin = reinterpret_cast<const sockaddr_in*>(a->ifa_addr);
      if (::inet_ntop(AF_INET, &sin->sin_addr, buf, sizeof(buf)) == nullptr) continue;
      if (std::find(inv.addresses.begin(), inv.addresses.end(), buf) == inv.addresses.end()) {
        inv.addresses.emplace_back(buf);
      }
    }
    ::freeifaddrs(list);
  }
  return inv;
}

Inventory DiscoverInventory(const char* nvml_library) {
  Inventory inv = DiscoverHost();
  DiscoverGpus(inv, nvml_library);
  return inv;
}

}  // namespace gpuwerk::agent

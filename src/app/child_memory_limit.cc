#include "app/child_memory_limit.h"

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <vector>

namespace gpuwerk::app {
namespace {

namespace fs = std::filesystem;

std::string ReadText(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

/// Writes `value` to the control file `path` (one write(2), as cgroup files want). "" on
/// success, else why not.
std::string WriteControl(const fs::path& path, const std::string& value) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) return path.filename().string() + ": " + std::strerror(errno);
  const ssize_t n = ::write(fd, value.data(), value.size());
  const int err = errno;
  ::close(fd);
  if (n != static_cast<ssize_t>(value.size())) {
    return path.filename().string() + ": " + std::strerror(err);
  }
  return "";
}

std::vector<std::string_view> Split(std::string_view text, char sep) {
  std::vector<std::string_view> out;
  size_t start = 0;
  while (true) {
    const size_t end = text.find(sep, start);
    out.push_back(text.substr(start, end == std::string_view::npos ? end : end - start));
    if (end == std::string_view::npos) return out;
    start = end + 1;
  }
}

bool HasItem(std::string_view list, std::string_view item, char sep) {
  for (std::string_view x : Split(list, sep)) {
    if (x == item) return true;
  }
  return false;
}

/// The words of a space-separated list (cgroup.controllers, cgroup.subtree_control).
bool HasWord(std::string_view text, std::string_view word) {
  size_t start = 0;
  while (start < text.size()) {
    while (start < text.size() && (text[start] == ' ' || text[start] == '\n')) ++start;
    size_t end = start;
    while (end < text.size() && text[end] != ' ' && text[end] != '\n') ++end;
    if (text.substr(start, end - start) == word) return true;
    start = end;
  }
  return false;
}

/// A mountinfo field with its octal escapes (`\040` for a blank) undone.
std::string Unescape(std::string_view field) {
  std::string out;
  for (size_t i = 0; i < field.size(); ++i) {
    auto octal = [&](size_t k) { return field[k] >= '0' && field[k] <= '7'; };
    if (field[i] == '\\' && i + 3 < field.size() && octal(i + 1) && octal(i + 2) && octal(i + 3)) {
      out.push_back(static_cast<char>((field[i + 1] - '0') * 64 + (field[i + 2] - '0') * 8 +
                                      (field[i + 3] - '0')));
      i += 3;
    } else {
      out.push_back(field[i]);
    }
  }
  return out;
}

/// Removes the empty `gpuwerk-relay-*` groups in `dir` that earlier runs left (rmdir refuses
/// one that still holds a process).
void RemoveLeftGroups(const fs::path& dir, const std::string& keep) {
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.starts_with("gpuwerk-relay-") && name != keep && entry.is_directory(ec)) {
      ::rmdir(entry.path().c_str());
    }
  }
}

/// The cgroup directory of this process for `controller` ("" for v2), or nullopt; `path_out`
/// (when given) gets its path in the hierarchy.
std::optional<fs::path> OwnCgroupDir(std::string_view controller, std::string* path_out = nullptr) {
  const std::optional<std::string> path = CgroupPathOf(ReadText("/proc/self/cgroup"), controller);
  if (!path) return std::nullopt;
  if (path_out != nullptr) *path_out = *path;
  return CgroupDirOf(ReadText("/proc/self/mountinfo"), controller, *path);
}

/// Moves every process listed in `procs` (cgroup.procs text) into `leaf`; "" or why not.
std::string MoveProcesses(std::string_view procs, const fs::path& leaf) {
  if (::mkdir(leaf.c_str(), 0755) != 0 && errno != EEXIST) {
    return "cannot make the leaf group " + leaf.string() + " (" + std::strerror(errno) + ")";
  }
  for (std::string_view pid : Split(procs, '\n')) {
    if (pid.empty()) continue;
    if (std::string err = WriteControl(leaf / "cgroup.procs", std::string(pid)); !err.empty()) {
      // A process that ended meanwhile is no obstacle; any other failure is.
      std::error_code ec;
      if (fs::exists(fs::path("/proc") / std::string(pid), ec)) {
        return "cannot move process " + std::string(pid) + " into " + leaf.string() + " (" + err +
               ")";
      }
    }
  }
  return "";
}

/// A cgroup v2 group `name` with memory.max = bytes; "" and the group, or why not. `moved` is
/// set to the leaf group this process moved into (cgroup v2's no-internal-processes rule).
std::string PrepareV2(int64_t bytes, const std::string& name, fs::path& group, fs::path& moved) {
  std::string cgroup_path;
  const std::optional<fs::path> dir = OwnCgroupDir("", &cgroup_path);
  if (!dir) return "no cgroup v2 hierarchy holds this process";
  const std::string procs = ReadText(*dir / "cgroup.procs");
  const CgroupV2Plan plan = PlanCgroupV2(*dir, cgroup_path, ReadText(*dir / "cgroup.controllers"),
                                         ReadText(*dir / "cgroup.subtree_control"), procs, name);
  if (!plan.refusal.empty()) return plan.refusal;
  if (!plan.leaf.empty()) {
    if (std::string err = MoveProcesses(procs, plan.leaf); !err.empty()) return err;
    moved = plan.leaf;
  }
  if (plan.enable_memory) {
    if (std::string err = WriteControl(*dir / "cgroup.subtree_control", "+memory"); !err.empty()) {
      return "cannot enable the cgroup v2 memory controller for a child group (" + err + ")";
    }
  }
  group = plan.group;
  if (::mkdir(group.c_str(), 0755) != 0 && errno != EEXIST) {
    return "cannot make the cgroup v2 group (" + std::string(std::strerror(errno)) + ")";
  }
  RemoveLeftGroups(*dir, name);
  if (std::string err = WriteControl(group / "memory.max", std::to_string(bytes)); !err.empty()) {
    ::rmdir(group.c_str());
    return "cannot set the cgroup v2 memory limit (" + err + ")";
  }
  // Best effort: no swap to spill into, and an OOM kill takes the whole group.
  std::error_code ec;
  if (fs::exists(group / "memory.swap.max", ec)) (void)WriteControl(group / "memory.swap.max", "0");
  if (fs::exists(group / "memory.oom.group", ec))
    (void)WriteControl(group / "memory.oom.group", "1");
  return "";
}

/// A cgroup v1 memory group `name` with memory.limit_in_bytes = bytes; "" and the group, or why.
std::string PrepareV1(int64_t bytes, const std::string& name, fs::path& group) {
  const std::optional<fs::path> dir = OwnCgroupDir("memory");
  if (!dir) return "no cgroup v1 memory hierarchy holds this process";
  group = *dir / name;
  if (::mkdir(group.c_str(), 0755) != 0 && errno != EEXIST) {
    return "cannot make a cgroup v1 memory group (" + std::string(std::strerror(errno)) + ")";
  }
  RemoveLeftGroups(*dir, name);
  const std::string value = std::to_string(bytes);
  if (std::string err = WriteControl(group / "memory.limit_in_bytes", value); !err.empty()) {
    ::rmdir(group.c_str());
    return "cannot set the cgroup v1 memory limit (" + err + ")";
  }
  std::error_code ec;
  if (fs::exists(group / "memory.memsw.limit_in_bytes", ec)) {
    (void)WriteControl(group / "memory.memsw.limit_in_bytes", value);  // no swap beyond it
  }
  return "";
}

/// The limit when no group could be had (`why`): RLIMIT_AS of `bytes`, unless a sanitizer build.
ChildMemoryLimit AddressSpaceLimit(int64_t bytes, bool sanitizer_build, const std::string& why) {
  if (sanitizer_build) {
    return {.kind = MemoryLimitKind::kNone,
            .bytes = 0,
            .cgroup = {},
            .note = why +
                    "; an address-space limit (RLIMIT_AS) is skipped in this sanitizer build, "
                    "where AddressSanitizer reserves terabytes of address space: no memory limit"};
  }
  return {.kind = MemoryLimitKind::kAddressSpace,
          .bytes = bytes,
          .cgroup = {},
          .note = why +
                  "; RLIMIT_AS instead (virtual address space: each relay connection's "
                  "thread reserves 8 MiB of stack in it)"};
}

/// Sets `limit` (kAddressSpace) on `pid` with prlimit(2); `limit` itself, or kNone saying why not.
ChildMemoryLimit SetAddressSpace(pid_t pid, ChildMemoryLimit limit) {
  if (limit.kind != MemoryLimitKind::kAddressSpace) return limit;
  const rlimit rl{.rlim_cur = static_cast<rlim_t>(limit.bytes),
                  .rlim_max = static_cast<rlim_t>(limit.bytes)};
  if (::prlimit(pid, RLIMIT_AS, &rl, nullptr) != 0) {
    return {.kind = MemoryLimitKind::kNone,
            .bytes = 0,
            .cgroup = {},
            .note = limit.note + "; prlimit(RLIMIT_AS) failed (" + std::strerror(errno) +
                    "): no memory limit"};
  }
  return limit;
}

/// The `oom_kill` count of a memory.events or memory.oom_control text.
int64_t OomKillCount(const std::string& text) {
  std::istringstream in(text);
  std::string key;
  int64_t value = 0;
  while (in >> key >> value) {
    if (key == "oom_kill") return value;
  }
  return 0;
}

}  // namespace

std::string_view MemoryLimitKindName(MemoryLimitKind kind) {
  switch (kind) {
    case MemoryLimitKind::kCgroupV2:
      return "cgroup v2";
    case MemoryLimitKind::kCgroupV1:
      return "cgroup v1";
    case MemoryLimitKind::kAddressSpace:
      return "RLIMIT_AS";
    case MemoryLimitKind::kNone:
      break;
  }
  return "none";
}

bool IsSanitizerBuild() {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  return true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
  return true;
#else
  return false;
#endif
#else
  return false;
#endif
}

std::optional<std::string> CgroupPathOf(std::string_view proc_cgroup, std::string_view controller) {
  for (std::string_view line : Split(proc_cgroup, '\n')) {
    const size_t first = line.find(':');
    if (first == std::string_view::npos) continue;
    const size_t second = line.find(':', first + 1);
    if (second == std::string_view::npos) continue;
    const std::string_view id = line.substr(0, first);
    const std::string_view controllers = line.substr(first + 1, second - first - 1);
    const std::string_view path = line.substr(second + 1);
    const bool match = controller.empty() ? id == "0" && controllers.empty()
                                          : HasItem(controllers, controller, ',');
    if (!match) continue;
    if (!path.starts_with("/") || path.find("/..") != std::string_view::npos) return std::nullopt;
    return std::string(path);
  }
  return std::nullopt;
}

std::optional<fs::path> CgroupDirOf(std::string_view mountinfo, std::string_view controller,
                                    std::string_view cgroup_path) {
  for (std::string_view line : Split(mountinfo, '\n')) {
    const size_t dash = line.find(" - ");
    if (dash == std::string_view::npos) continue;
    const std::vector<std::string_view> before = Split(line.substr(0, dash), ' ');
    const std::vector<std::string_view> after = Split(line.substr(dash + 3), ' ');
    if (before.size() < 5 || after.size() < 3) continue;
    const std::string_view type = after[0];
    const bool match = controller.empty() ? type == "cgroup2"
                                          : type == "cgroup" && HasItem(after[2], controller, ',');
    if (!match) continue;
    const std::string root = Unescape(before[3]);
    const std::string mount_point = Unescape(before[4]);
    std::string_view rest = cgroup_path;
    if (root != "/") {
      if (!rest.starts_with(root) || (rest.size() > root.size() && rest[root.size()] != '/')) {
        continue;
      }
      rest.remove_prefix(root.size());
    }
    while (rest.starts_with("/")) rest.remove_prefix(1);
    fs::path dir(mount_point);
    if (!rest.empty()) dir /= std::string(rest);
    return dir;
  }
  return std::nullopt;
}

CgroupV2Plan PlanCgroupV2(const fs::path& dir, std::string_view cgroup_path,
                          std::string_view controllers, std::string_view subtree_control,
                          std::string_view procs, const std::string& name) {
  CgroupV2Plan plan;
  if (!HasWord(controllers, "memory")) {
    plan.refusal = "cgroup v2 has no memory controller here";
    return plan;
  }
  plan.group = dir / name;
  if (HasWord(subtree_control, "memory")) return plan;  // enabled already: nothing to move
  plan.enable_memory = true;
  const bool root = cgroup_path == "/";
  bool has_processes = false;
  for (std::string_view pid : Split(procs, '\n')) has_processes = has_processes || !pid.empty();
  if (!root && has_processes) plan.leaf = dir / std::string(kUpLeafCgroup);
  return plan;
}

ChildMemoryLimiter ChildMemoryLimiter::Prepare(int64_t bytes, const std::string& name,
                                               bool sanitizer_build) {
  ChildMemoryLimiter out;
  out.sanitizer_build_ = sanitizer_build;
  fs::path group;
  fs::path moved;
  const std::string v2 = PrepareV2(bytes, name, group, moved);
  if (v2.empty()) {
    out.limit_ = {.kind = MemoryLimitKind::kCgroupV2,
                  .bytes = bytes,
                  .cgroup = group,
                  .note = "memory.max of a cgroup v2 group of its own"};
    if (!moved.empty()) {
      out.limit_.note += " (this process first moved into " + moved.string() +
                         ": cgroup v2 lets only a group without processes enable the memory "
                         "controller for its children)";
    }
    return out;
  }
  const std::string v1 = PrepareV1(bytes, name, group);
  if (v1.empty()) {
    out.limit_ = {
        .kind = MemoryLimitKind::kCgroupV1,
        .bytes = bytes,
        .cgroup = group,
        .note = "memory.limit_in_bytes of a cgroup v1 memory group of its own (" + v2 + ")"};
    return out;
  }
  out.limit_ = AddressSpaceLimit(bytes, sanitizer_build, v2 + "; " + v1);
  return out;
}

ChildMemoryLimit ChildMemoryLimiter::Apply(pid_t pid) const {
  if (limit_.kind == MemoryLimitKind::kCgroupV2 || limit_.kind == MemoryLimitKind::kCgroupV1) {
    const std::string err = WriteControl(limit_.cgroup / "cgroup.procs", std::to_string(pid));
    if (err.empty()) return limit_;
    return SetAddressSpace(
        pid, AddressSpaceLimit(limit_.bytes, sanitizer_build_,
                               "cannot move the process into its group (" + err + ")"));
  }
  return SetAddressSpace(pid, limit_);
}

int64_t ChildMemoryLimiter::OomKills() const {
  switch (limit_.kind) {
    case MemoryLimitKind::kCgroupV2:
      return OomKillCount(ReadText(limit_.cgroup / "memory.events"));
    case MemoryLimitKind::kCgroupV1:
      return OomKillCount(ReadText(limit_.cgroup / "memory.oom_control"));
    default:
      return 0;
  }
}

void ChildMemoryLimiter::Remove() {
  if (!limit_.cgroup.empty()) ::rmdir(limit_.cgroup.c_str());
}

}  // namespace gpuwerk::app

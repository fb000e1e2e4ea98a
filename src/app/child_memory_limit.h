#pragma once

#include <sys/types.h>

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

namespace gpuwerk::app {

/// How a child process's memory is limited (docs/ssh.md "Running it": `gpuwerk up`'s relay).
enum class MemoryLimitKind {
  kNone,          ///< no limit could be set (ChildMemoryLimit::note says why)
  kCgroupV2,      ///< a cgroup v2 group of its own with `memory.max` (and `memory.swap.max` 0)
  kCgroupV1,      ///< a cgroup v1 memory group of its own with `memory.limit_in_bytes`
  kAddressSpace,  ///< RLIMIT_AS (setrlimit(2)): the process's virtual address space
};

/// "cgroup v2", "cgroup v1", "RLIMIT_AS" or "none".
std::string_view MemoryLimitKindName(MemoryLimitKind kind);

/// What limits a child's memory.
struct ChildMemoryLimit {
  MemoryLimitKind kind = MemoryLimitKind::kNone;
  int64_t bytes = 0;             ///< the limit, bytes; 0 for kNone
  std::filesystem::path cgroup;  ///< the group's directory (kCgroupV2, kCgroupV1), else empty
  std::string note;              ///< for the log: why this kind (why no better one), one line
};

/// The cgroup path of this process in one hierarchy, from the text of /proc/self/cgroup
/// (cgroups(7): `ID:CONTROLLERS:PATH` lines): the unified (v2) hierarchy's (`0::PATH`) when
/// `controller` is empty, else the v1 hierarchy whose controller list holds `controller`.
/// nullopt when there is none, or its path leaves the cgroup namespace ("/.." ).
std::optional<std::string> CgroupPathOf(std::string_view proc_cgroup, std::string_view controller);

/// Where the hierarchy above is mounted, from the text of /proc/self/mountinfo (proc(5): mount
/// point field 5, root field 4, after " - " the type and super options): the `cgroup2` mount when
/// `controller` is empty, else the `cgroup` mount whose super options hold `controller`; the
/// directory of `cgroup_path` under it (octal escapes such as `\040` undone). nullopt when no
/// such mount shows `cgroup_path` (its root is not an ancestor of it).
std::optional<std::filesystem::path> CgroupDirOf(std::string_view mountinfo,
                                                 std::string_view controller,
                                                 std::string_view cgroup_path);

/// The leaf group that `gpuwerk up` moves its cgroup's processes into when cgroup v2's "no
/// internal processes" rule needs it (PlanCgroupV2).
inline constexpr std::string_view kUpLeafCgroup = "gpuwerk-up";

/// What preparing a cgroup v2 group `name` for a child takes, in this process's cgroup v2
/// directory `dir`, decided from what is read there (pure; ChildMemoryLimiter::Prepare does it).
struct CgroupV2Plan {
  /// Why cgroup v2 cannot be used ("" when it can): no memory controller in `controllers`.
  std::string refusal;
  /// Move every process of `dir` (its `cgroup.procs`) into this leaf group first, making it
  /// (empty: no move needed). cgroup v2's "no internal processes" rule (cgroup-v2.rst, "No
  /// Internal Process Constraint"): a non-root group that holds processes cannot enable a
  /// controller for its children, so writing "+memory" to its `cgroup.subtree_control` fails
  /// with EBUSY while `up` itself is in it. Only when the memory controller is not enabled yet,
  /// the group is not the hierarchy's root (the root is exempt) and holds processes.
  std::filesystem::path leaf;
  /// Write "+memory" to `dir`/cgroup.subtree_control (after the move).
  bool enable_memory = false;
  /// The child's group, `dir`/`name`.
  std::filesystem::path group;
};

/// The plan for `dir` (a cgroup v2 directory whose path in the hierarchy is `cgroup_path`, "/"
/// for the root) from the texts of its `cgroup.controllers`, `cgroup.subtree_control` and
/// `cgroup.procs` (one pid a line).
CgroupV2Plan PlanCgroupV2(const std::filesystem::path& dir, std::string_view cgroup_path,
                          std::string_view controllers, std::string_view subtree_control,
                          std::string_view procs, const std::string& name);

/// Limits the memory of child processes, one at a time (`gpuwerk up`'s relay and its restarts):
/// Prepare once, Apply to each child while it waits before exec (so nothing it allocates escapes
/// the limit), Remove at the end.
///
/// Prepare tries, in order: (1) a cgroup v2 group `name` under this process's cgroup, with
/// `memory.max` = bytes (enabling the memory controller in this cgroup's `cgroup.subtree_control`
/// when it is not yet; where cgroup v2's "no internal processes" rule forbids that, because this
/// cgroup holds processes and is not the root, the cgroup's processes, this one among them, are
/// first moved into a leaf group `kUpLeafCgroup` beside the child's: PlanCgroupV2),
/// `memory.swap.max` 0 and `memory.oom.group` 1 where present; (2) on hosts whose memory controller
/// is still on cgroup v1 (hybrid setups), a v1 memory group `name` with `memory.limit_in_bytes`
/// (and `memory.memsw.limit_in_bytes` where present); (3) RLIMIT_AS of `bytes` set on the child
/// with prlimit(2), except in sanitizer builds
/// (`sanitizer_build`), where AddressSanitizer reserves terabytes of address space at start and
/// any such limit would stop the child from starting: then no limit (kNone), and the note says
/// so. A group `name` left by an earlier run is reused; other empty `gpuwerk-relay-*` groups
/// beside it are removed.
///
/// Not thread-safe; one owner.
class ChildMemoryLimiter {
 public:
  /// Prepares a limit of `bytes` (> 0). Never fails: what could not be set falls through to the
  /// next kind, down to kNone.
  static ChildMemoryLimiter Prepare(int64_t bytes, const std::string& name, bool sanitizer_build);

  /// What Apply sets on each child.
  const ChildMemoryLimit& limit() const { return limit_; }
  /// Puts child `pid` under the limit: into the group (writing its pid to `cgroup.procs`), or
  /// its RLIMIT_AS. Returns what applies to it: a group that refuses the move falls back to
  /// RLIMIT_AS (or none, as above) for this child, and says why in `note`.
  ChildMemoryLimit Apply(pid_t pid) const;
  /// How many times the kernel's OOM killer acted in the group so far (`oom_kill` of
  /// `memory.events`, v2, or `memory.oom_control`, v1); 0 without a group or a count.
  int64_t OomKills() const;
  /// Removes the group (once its processes are gone: rmdir(2) of an empty cgroup).
  void Remove();

 private:
  ChildMemoryLimit limit_;
  bool sanitizer_build_ = false;
};

/// Whether this binary was built with a sanitizer (AddressSanitizer or ThreadSanitizer).
bool IsSanitizerBuild();

}  // namespace gpuwerk::app

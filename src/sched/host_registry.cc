#include "sched/host_registry.h"

#include "audit/audit_log.h"
#include "core/encoding.h"
#include "core/host_address.h"
#include "sched/internal/gpu_type_table.h"
#include "sched/internal/host_pair_table.h"
#include "sched/internal/host_table.h"
#include "sched/internal/launch.h"
#include "sched/internal/observed_container_table.h"
#include "sched/internal/placement_table.h"

namespace gpuwerk::sched {

using internal::HostTable;

std::string HostTokenHash(std::string_view token) { return core::HexEncode(core::Sha256(token)); }

core::Result<void> ValidateDnsLabel(std::string_view name, std::string_view what) {
  auto fail = [&] {
    return core::InvalidArgument("invalid_name",
                                 std::string(what) +
                                     " must be 1 to 63 characters of a-z, 0-9 and '-', not "
                                     "starting or ending with '-' (a DNS label).");
  };
  if (name.empty() || name.size() > 63 || name.front() == '-' || name.back() == '-') {
    return fail();
  }
  for (char c : name) {
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-')) return fail();
  }
  return {};
}

core::Result<void> CheckSshRegistration(const SshRegistration& ssh) {
  if (!core::IsHostAddress(ssh.address)) {
    return core::InvalidArgument(
        "invalid_ssh_address",
        "The SSH address must be an IP address (IPv6 without brackets) or a DNS name, such as "
        "10.0.0.5 or spark-a.internal: the address the host's agent publishes sshd ports on. It "
        "cannot start with '-' or hold blanks, '@', '/' or control characters.");
  }
  if (ssh.port_low < 1 || ssh.port_high > 65535 || ssh.port_low > ssh.port_high) {
    return core::InvalidArgument(
        "invalid_ssh_ports",
        "The SSH port range must be LOW-HIGH with 1 <= LOW <= HIGH <= 65535 (e.g. 32768-60999): "
        "the ports the host's published sshd ports may use.");
  }
  return {};
}

namespace {

/// A host's registration as an audit detail: {"address", "ports": "LOW-HIGH"}, or null.
nlohmann::json SshDetail(const std::string& address, int64_t low, int64_t high) {
  if (address.empty()) return nullptr;
  return {{"address", address}, {"ports", std::to_string(low) + "-" + std::to_string(high)}};
}

}  // namespace

core::Result<NewHost> HostRegistry::Add(const std::string& actor_id, std::string_view name,
                                        std::string_view gpu_type, bool gpu_required,
                                        const std::string& source_address,
                                        const std::optional<SshRegistration>& ssh) {
  GPUWERK_TRY(ValidateDnsLabel(name, "A host name"));
  if (ssh) GPUWERK_TRY(CheckSshRegistration(*ssh));
  const std::optional<SshRegistration>& checked = ssh;
  NewHost out;
  out.token = "gwh_" + core::RandomToken(rng_);
  out.host = Host{.id = core::NewId(rng_, "hst"),
                  .name = std::string(name),
                  .gpu_type = std::string(gpu_type),
                  .gpu_required = gpu_required,
                  .created_at = clock_.NowUnix()};
  if (checked) {
    out.host.ssh_address = checked->address;
    out.host.ssh_port_low = checked->port_low;
    out.host.ssh_port_high = checked->port_high;
  }
  GPUWERK_TRY(db_.Write([&](store::Transaction& tx) -> core::Result<void> {
    GPUWERK_ASSIGN_OR_RETURN(auto type, internal::GpuTypeTable::Find(tx, out.host.gpu_type));
    if (!type) {
      return core::Fail(core::Error(core::ErrorCode::kInvalidArgument, "unknown_gpu_type",
                                    "There is no GPU type by that name.")
                            .WithDetail("gpu_type", out.host.gpu_type));
    }
    GPUWERK_ASSIGN_OR_RETURN(auto clash, HostTable::FindByName(tx, out.host.name));
    if (clash) {
      return core::Fail(core::ErrorCode::kAlreadyExists, "name_taken",
                        "A host named '" + out.host.name + "' is already registered.");
    }
    GPUWERK_TRY(HostTable::Insert(tx, out.host, HostTokenHash(out.token)));
    return audit::RecordAudit(
        tx, clock_, rng_,
        {.actor_id = actor_id,
         .action = "host.add",
         .target = out.host.id,
         .source_address = source_address,
         .detail = {{"name", out.host.name},
                    {"gpu_type", out.host.gpu_type},
                    {"gpu_required", gpu_required},
                    {"ssh", SshDetail(out.host.ssh_address, out.host.ssh_port_low,
                                      out.host.ssh_port_high)}}});
  }));
  return out;
}

core::Result<NewHost> HostRegistry::AddOrRotateToken(const std::string& actor_id,
                                                     std::string_view name,
                                                     std::string_view gpu_type, bool gpu_required,
                                                     const std::string& source_address,
                                                     const std::optional<SshRegistration>& ssh) {
  if (ssh) GPUWERK_TRY(CheckSshRegistration(*ssh));
  const std::optional<SshRegistration>& checked = ssh;
  GPUWERK_ASSIGN_OR_RETURN(auto existing, db_.Read([&](store::Transaction& tx) {
    return HostTable::FindByName(tx, std::string(name));
  }));
  if (!existing) return Add(actor_id, name, gpu_type, gpu_required, source_address, checked);
  NewHost out;
  out.host = std::move(*existing);
  if (out.host.gpu_type != gpu_type) {
    return core::Fail(core::ErrorCode::kFailedPrecondition, "gpu_type_mismatch",
                      "The host '" + out.host.name + "' is registered as " + out.host.gpu_type +
                          ", not " + std::string(gpu_type) + ".");
  }
  out.token = "gwh_" + core::RandomToken(rng_);
  out.host.gpu_required = gpu_required;
  GPUWERK_TRY(db_.Write([&](store::Transaction& tx) -> core::Result<void> {
    GPUWERK_TRY(HostTable::SetToken(tx, out.host.id, HostTokenHash(out.token), gpu_required));
    nlohmann::json detail = {{"name", out.host.name}, {"gpu_required", gpu_required}};
    if (checked) {
      GPUWERK_TRY(HostTable::SetSsh(tx, out.host.id, *checked));
      out.host.ssh_address = checked->address;
      out.host.ssh_port_low = checked->port_low;
      out.host.ssh_port_high = checked->port_high;
      detail["ssh"] = SshDetail(checked->address, checked->port_low, checked->port_high);
    }
    return audit::RecordAudit(tx, clock_, rng_,
                              {.actor_id = actor_id,
                               .action = "host.token_rotated",
                               .target = out.host.id,
                               .source_address = source_address,
                               .detail = std::move(detail)});
  }));
  return out;
}

core::Result<Host> HostRegistry::SetSsh(const std::string& actor_id, std::string_view name,
                                        const SshRegistration& ssh,
                                        const std::string& source_address) {
  GPUWERK_TRY(CheckSshRegistration(ssh));
  const SshRegistration& checked = ssh;
  GPUWERK_TRY(db_.Write([&](store::Transaction& tx) -> core::Result<void> {
    GPUWERK_ASSIGN_OR_RETURN(auto host, HostTable::FindByName(tx, std::string(name)));
    if (!host) return core::NotFound("Host");
    GPUWERK_TRY(HostTable::SetSsh(tx, host->id, checked));
    return audit::RecordAudit(
        tx, clock_, rng_,
        {.actor_id = actor_id,
         .action = "host.set_ssh",
         .target = host->id,
         .source_address = source_address,
         .detail = {
             {"name", host->name},
             {"before", SshDetail(host->ssh_address, host->ssh_port_low, host->ssh_port_high)},
             {"after", SshDetail(checked.address, checked.port_low, checked.port_high)}}});
  }));
  return Get(name);
}

core::Result<HostPage> HostRegistry::List(int page) {
  GPUWERK_TRY(CheckPage(page));
  return db_.Read([&](store::Transaction& tx) -> core::Result<HostPage> {
    GPUWERK_ASSIGN_OR_RETURN(auto listed,
                             HostTable::PageWithPlacementAndPair(tx, kPageSize, PageOffset(page)));
    return HostPage{.items = std::move(listed.first),
                    .page = page,
                    .pages = PageCount(listed.second),
                    .total = listed.second};
  });
}

core::Result<Host> HostRegistry::Get(std::string_view name) {
  return db_.Read([&](store::Transaction& tx) -> core::Result<Host> {
    GPUWERK_ASSIGN_OR_RETURN(auto host, HostTable::FindWithPlacementAndPair(tx, std::string(name)));
    if (!host) return core::NotFound("Host");
    return std::move(*host);
  });
}

core::Result<Host> HostRegistry::AuthenticateAgent(std::string_view token) {
  auto unauthenticated = [] {
    return core::Fail(core::ErrorCode::kUnauthenticated, "unauthenticated",
                      "A valid host token is required.");
  };
  if (!token.starts_with("gwh_") || token.size() > 256) return unauthenticated();
  return db_.Read([&](store::Transaction& tx) -> core::Result<Host> {
    GPUWERK_ASSIGN_OR_RETURN(auto host, HostTable::FindByTokenHash(tx, HostTokenHash(token)));
    if (!host) return unauthenticated();
    return std::move(*host);
  });
}

core::Result<void> HostRegistry::SetDrained(const std::string& actor_id, std::string_view name,
                                            bool drained, const std::string& source_address) {
  return db_.Write([&](store::Transaction& tx) -> core::Result<void> {
    GPUWERK_ASSIGN_OR_RETURN(auto host, HostTable::FindByName(tx, std::string(name)));
    if (!host) return core::NotFound("Host");
    GPUWERK_TRY(HostTable::SetDrained(tx, host->id, drained));
    return audit::RecordAudit(tx, clock_, rng_,
                              {.actor_id = actor_id,
                               .action = drained ? "host.drain" : "host.undrain",
                               .target = host->id,
                               .source_address = source_address,
                               .detail = {{"name", std::string(name)}}});
  });
}

core::Result<Host> HostRegistry::Remove(const std::string& actor_id, std::string_view name,
                                        const std::string& source_address) {
  return db_.Write([&](store::Transaction& tx) -> core::Result<Host> {
    GPUWERK_ASSIGN_OR_RETURN(auto found, HostTable::FindByName(tx, std::string(name)));
    if (!found) return core::NotFound("Host");
    Host host = std::move(*found);
    GPUWERK_ASSIGN_OR_RETURN(auto pair, internal::HostPairTable::PairOfHost(tx, host.id));
    // The host itself, or its partner: a 2x instance holds both.
    std::vector<std::string> hosts{host.id};
    if (pair) {
      GPUWERK_ASSIGN_OR_RETURN(auto linked, internal::HostPairTable::Load(tx, *pair));
      if (linked) {
        for (const auto& m : linked->members) hosts.push_back(m.host_id);
      }
    }
    GPUWERK_ASSIGN_OR_RETURN(auto placed, internal::PlacementTable::InstanceOnAny(tx, hosts));
    if (placed) {
      return core::Fail(core::Error(core::ErrorCode::kFailedPrecondition, "host_in_use",
                                    "An instance is placed on the host '" + host.name +
                                        "'; it can be removed once that instance is deleted "
                                        "(drain the host first so that it gets no new one).")
                            .WithDetail("instance_id", *placed));
    }
    if (pair) {
      host.pair_id = *pair;
      GPUWERK_TRY(internal::HostPairTable::Delete(tx, host.pair_id));
    }
    GPUWERK_TRY(internal::ObservedContainerTable::DeleteOnHost(tx, host.id));
    GPUWERK_TRY(HostTable::Delete(tx, host.id));
    nlohmann::json detail = {{"name", host.name}, {"gpu_type", host.gpu_type}};
    if (pair) detail["unlinked_pair_id"] = host.pair_id;
    GPUWERK_TRY(audit::RecordAudit(tx, clock_, rng_,
                                   {.actor_id = actor_id,
                                    .action = "host.remove",
                                    .target = host.id,
                                    .source_address = source_address,
                                    .detail = std::move(detail)}));
    return host;
  });
}

}  // namespace gpuwerk::sched

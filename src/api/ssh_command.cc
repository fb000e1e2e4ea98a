#include "api/ssh_command.h"

#include "core/host_address.h"

namespace gpuwerk::api {

void SshCommandFormat::SetRelay(std::string domain, std::string host, uint16_t port) {
  std::lock_guard lock(mu_);
  domain_ = std::move(domain);
  host_ = std::move(host);
  port_ = port;
}

std::optional<SshTarget> SshCommandFormat::TargetFor(const sched::Instance& in) const {
  if (in.deleted_at || in.ssh_port <= 0 || in.ssh_port > 65535 || in.ssh_address.empty()) {
    return std::nullopt;
  }
  std::lock_guard lock(mu_);
  if (port_ == 0) {
    if (!core::IsHostAddress(in.ssh_address)) return std::nullopt;
    return SshTarget{
        .host = in.ssh_address, .port = static_cast<uint16_t>(in.ssh_port), .user = "root"};
  }
  return SshTarget{.host = domain_.empty() ? host_ : in.hostname + "." + domain_,
                   .port = port_,
                   .user = in.hostname};
}

std::string SshCommandFormat::For(const sched::Instance& in) const {
  const auto t = TargetFor(in);
  if (!t) return "";
  const std::string port = t->port == 22 ? "" : "-p " + std::to_string(t->port) + " ";
  const std::string host = t->host.find(':') != std::string::npos ? "[" + t->host + "]" : t->host;
  return "ssh " + port + t->user + "@" + host;
}

}  // namespace gpuwerk::api

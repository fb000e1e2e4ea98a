#include "api/ssh_command.h"

namespace gpuwerk::api {

void SshCommandFormat::SetRelay(std::string domain, std::string host, uint16_t port) {
  std::lock_guard lock(mu_);
  domain_ = std::move(domain);
  host_ = std::move(host);
  port_ = port;
}

std::string SshCommandFormat::For(const sched::Instance& in) const {
  if (in.deleted_at || in.ssh_port <= 0 || in.ssh_address.empty()) return "";
  std::lock_guard lock(mu_);
  if (port_ == 0) {
    return "ssh -p " + std::to_string(in.ssh_port) + " root@" + in.ssh_address;
  }
  const std::string port = port_ == 22 ? "" : "-p " + std::to_string(port_) + " ";
  if (!domain_.empty()) return "ssh " + port + in.hostname + "@" + in.hostname + "." + domain_;
  const std::string host = host_.find(':') != std::string::npos ? "[" + host_ + "]" : host_;
  return "ssh " + port + in.hostname + "@" + host;
}

}  // namespace gpuwerk::api

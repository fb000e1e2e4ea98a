#include "relay/relay_certificates.h"

#include <stdlib.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <system_error>

#include "core/run_tool.h"
#include "core/strings.h"
#include "protocol/relay_principal.h"
#include "relay/internal/libssh_calls.h"
#include "relay/internal/ssh_handles.h"

namespace gpuwerk::relay {
namespace {

namespace fs = std::filesystem;
using core::ErrorCode;
using core::Fail;

std::unexpected<core::Error> BadRequest(const std::string& why) {
  return Fail(ErrorCode::kInvalidArgument, "invalid_certificate_request", why);
}

std::unexpected<core::Error> SigningFailed(const std::string& why) {
  return Fail(ErrorCode::kUnavailable, "certificate_signing_failed",
              "the relay cannot sign its certificate: " + why);
}

bool IsPrincipal(std::string_view p) {
  if (p.empty() || p.size() > 256) return false;
  for (char c : p) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '_' || c == '.' || c == '-';
    if (!ok) return false;
  }
  return true;
}

bool IsPrintableAscii(std::string_view s) {
  for (char c : s) {
    if (c < 0x20 || c > 0x7e) return false;
  }
  return true;
}

bool IsBase64(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '+' || c == '/' || c == '=';
    if (!ok) return false;
  }
  return true;
}

std::string Hex(int64_t v) {
  std::ostringstream out;
  out << "0x" << std::hex << v;
  return out.str();
}

/// A private temporary directory (0700), removed with the object.
class TempDir {
 public:
  TempDir() {
    std::error_code ec;
    std::string tmpl = (fs::temp_directory_path(ec) / "gpuwerk-relay-cert-XXXXXX").string();
    if (ec) tmpl = "/tmp/gpuwerk-relay-cert-XXXXXX";
    if (::mkdtemp(tmpl.data()) != nullptr) path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    if (!path_.empty()) fs::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

/// Runs ssh-keygen's `argv` (core::RunTool: no shell, a clean environment, stdin empty) and
/// returns its exit status and its merged stdout and stderr, or an error when it cannot run or
/// outlives `timeout` (then it is killed).
core::Result<core::ToolOutcome> Run(std::vector<std::string> argv,
                                    std::chrono::milliseconds timeout) {
  const std::string program = argv.empty() ? std::string() : argv[0];
  core::ToolRun run;
  run.argv = std::move(argv);
  run.stderr_mode = core::ToolRun::Stderr::kMerged;
  run.timeout = timeout;
  auto outcome = core::RunTool(std::move(run));
  if (!outcome) return SigningFailed(outcome.error().message);
  switch (outcome->end) {
    case core::ToolOutcome::End::kTimedOut:
      return SigningFailed(program + " did not finish in time");
    case core::ToolOutcome::End::kSignalled:
      return SigningFailed(program + " was killed");
    case core::ToolOutcome::End::kExited:
      break;
  }
  return outcome;
}

/// The first non-empty line of `text` (of its first 64 lines; at most 4 KiB), for error
/// messages.
std::string FirstLine(const std::string& text) {
  std::istringstream in(text);
  std::string line;
  for (int i = 0; i < 64 && std::getline(in, line); ++i) {
    if (!line.empty()) return line.substr(0, 4096);
  }
  return "";
}

}  // namespace

core::Result<std::string> SignUserCertificate(const fs::path& ca_key_path,
                                              std::string_view public_line,
                                              const UserCertificateFields& fields,
                                              std::chrono::milliseconds timeout,
                                              const std::string& ssh_keygen) {
  std::istringstream words{std::string(public_line)};
  std::string type, blob;
  words >> type >> blob;
  if (type != "ssh-ed25519" || !IsBase64(blob)) {
    return BadRequest("the key to certify is not an ssh-ed25519 public key line");
  }
  if (fields.principals.empty()) return BadRequest("a certificate needs a principal");
  std::string principals;
  for (const std::string& p : fields.principals) {
    if (!IsPrincipal(p)) {
      return BadRequest("the principal \"" + core::BoundedPrintable(p, 64) +
                        "\" is not made of [A-Za-z0-9_.-]");
    }
    principals += (principals.empty() ? "" : ",") + p;
  }
  if (fields.key_id.empty() || !IsPrintableAscii(fields.key_id)) {
    return BadRequest("the key id must be printable ASCII");
  }
  for (const auto& o : fields.extensions) {
    if (!IsPrintableAscii(o) || o.empty()) return BadRequest("an extension is not printable");
  }
  for (const auto& o : fields.critical_options) {
    if (!IsPrintableAscii(o) || o.empty()) return BadRequest("a critical option is not printable");
  }
  std::string validity;
  if (fields.valid_after == 0 && fields.valid_before == 0) {
    validity = "always:forever";
  } else if (fields.valid_after <= 0 || fields.valid_before <= fields.valid_after) {
    return BadRequest("the validity must end after it starts");
  } else {
    validity = Hex(fields.valid_after) + ":" + Hex(fields.valid_before);
  }
  TempDir dir;
  if (dir.path().empty()) {
    return SigningFailed(std::string("no temporary directory: ") + std::strerror(errno));
  }
  const fs::path key = dir.path() / "key.pub";
  {
    std::ofstream out(key);
    out << type << " " << blob << " gpuwerk-relay\n";
    if (!out) return SigningFailed("cannot write " + key.string());
  }
  std::vector<std::string> argv = {
      ssh_keygen, "-q",          "-s", fs::absolute(ca_key_path).string(),
      "-I",       fields.key_id, "-n", principals,
      "-V",       validity,      "-z", std::to_string(fields.serial),
      "-O",       "clear"};
  for (const auto& e : fields.extensions) argv.insert(argv.end(), {"-O", e});
  for (const auto& o : fields.critical_options) argv.insert(argv.end(), {"-O", o});
  argv.push_back(key.string());
  GPUWERK_ASSIGN_OR_RETURN(const core::ToolOutcome outcome, Run(std::move(argv), timeout));
  const int status = outcome.exit_code;
  if (status == 127) return SigningFailed("cannot run " + ssh_keygen);
  if (status != 0) {
    return SigningFailed(ssh_keygen + " -s " + ca_key_path.string() + " failed (exit " +
                         std::to_string(status) +
                         "): " + core::BoundedPrintable(FirstLine(outcome.output)));
  }
  std::ifstream in(dir.path() / "key-cert.pub");
  std::string line;
  std::getline(in, line);
  while (!line.empty() && (line.back() == '\n' || line.back() == '\r' || line.back() == ' ')) {
    line.pop_back();
  }
  if (!line.starts_with("ssh-ed25519-cert-v01@openssh.com ")) {
    return SigningFailed(ssh_keygen + " wrote no certificate");
  }
  return line;
}

core::Result<std::string> MakeProbeCertificate(const fs::path& ca_key_path,
                                               std::chrono::milliseconds timeout,
                                               const std::string& ssh_keygen) {
  ssh_key raw = nullptr;
  if (ssh_pki_generate(SSH_KEYTYPE_ED25519, 0, &raw) != SSH_OK || raw == nullptr) {
    return core::Internal("cannot generate the probe certificate's key");
  }
  internal::SshKeyPtr throwaway(raw);
  const std::string blob = internal::PublicKeyBase64(throwaway.get());
  throwaway.reset();  // its private half is gone: the certificate can never log in
  if (blob.empty()) return core::Internal("cannot export the probe certificate's key");
  UserCertificateFields fields;
  fields.key_id = std::string(protocol::kRelayProbePrincipal);
  fields.principals = {std::string(protocol::kRelayProbePrincipal)};
  fields.critical_options = {"force-command=/bin/false"};
  return SignUserCertificate(ca_key_path, "ssh-ed25519 " + blob, fields, timeout, ssh_keygen);
}

RelayCertificates::RelayCertificates(Options options) : options_(std::move(options)) {}

int64_t RelayCertificates::NowUnix() const {
  return (options_.clock != nullptr ? options_.clock : &system_clock_)->NowUnix();
}

core::Result<std::string> RelayCertificates::For(const std::string& instance_id) {
  const auto principal = protocol::RelayInstancePrincipal(instance_id);
  if (!principal) {
    return BadRequest("the instance id \"" + core::BoundedPrintable(instance_id, 64) +
                      "\" makes no certificate principal");
  }
  const int64_t now = NowUnix();
  uint64_t serial = 0;
  {
    std::lock_guard lock(mu_);
    auto it = cache_.find(instance_id);
    if (it != cache_.end() && now + options_.renew_before.count() < it->second.valid_before) {
      return it->second.line;
    }
    serial = ++next_serial_;
  }
  UserCertificateFields fields;
  fields.key_id = "gpuwerk-relay " + instance_id;
  fields.principals = {*principal};
  fields.valid_after = now - options_.backdate.count();
  fields.valid_before = now + options_.lifetime.count();
  fields.serial = (static_cast<uint64_t>(now) << 20) ^ serial;
  fields.extensions = RelayCertificateExtensions();
  auto line = SignUserCertificate(options_.ca_key_path, options_.relay_public_line, fields,
                                  options_.timeout, options_.ssh_keygen);
  if (!line) return line;
  std::lock_guard lock(mu_);
  ++signings_;
  if (cache_.size() >= options_.max_cached) {
    std::erase_if(cache_, [&](const auto& e) { return e.second.valid_before <= now; });
    if (cache_.size() >= options_.max_cached) cache_.clear();
  }
  cache_[instance_id] = Cached{*line, fields.valid_before};
  return line;
}

uint64_t RelayCertificates::signings() const {
  std::lock_guard lock(mu_);
  return signings_;
}

}  // namespace gpuwerk::relay

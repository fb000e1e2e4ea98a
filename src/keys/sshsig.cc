#include "keys/sshsig.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <thread>
#include <vector>

#include "core/encoding.h"
#include "core/strings.h"

namespace gpuwerk::keys {
namespace {

constexpr std::string_view kBegin = "-----BEGIN SSH SIGNATURE-----";
constexpr std::string_view kEnd = "-----END SSH SIGNATURE-----";

std::unexpected<core::Error> InvalidSignature(std::string why) {
  return core::Fail(
      core::ErrorCode::kInvalidArgument, "invalid_signature",
      "The signature does not prove that you hold this key's private key: " + std::move(why) +
          ". Sign the challenge with ssh-keygen -Y sign -n gpuwerk-key-claim -f "
          "KEYFILE (gpuwerk keys claim does it for you).");
}

std::unexpected<core::Error> Unavailable(std::string why) {
  return core::Fail(core::ErrorCode::kUnavailable, "signature_check_unavailable",
                    "The server cannot check signatures right now (" + std::move(why) +
                        "); try again later or ask the operator.");
}

bool IsBase64Char(char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '+' ||
         c == '/' || c == '=';
}

/// The armor normalised to "BEGIN\nbody lines\nEND\n", or nullopt when it is anything else.
std::optional<std::string> NormaliseArmor(std::string_view text) {
  text = core::Trim(text, core::kWhitespace);
  if (!text.starts_with(kBegin) || !text.ends_with(kEnd)) return std::nullopt;
  std::string_view body = text.substr(kBegin.size(), text.size() - kBegin.size() - kEnd.size());
  std::string out = std::string(kBegin) + "\n";
  size_t chars = 0;
  size_t pos = 0;
  while (pos <= body.size()) {
    size_t end = body.find('\n', pos);
    if (end == std::string_view::npos) end = body.size();
    std::string_view line = core::Trim(body.substr(pos, end - pos), core::kWhitespace);
    pos = end + 1;
    if (line.empty()) continue;
    for (char c : line) {
      if (!IsBase64Char(c)) return std::nullopt;
    }
    chars += line.size();
    out.append(line).push_back('\n');
  }
  if (chars == 0) return std::nullopt;
  out.append(kEnd).push_back('\n');
  return out;
}

/// A sealed memory file holding `data` (not close-on-exec: the child gets it by dup2).
int MemoryFile(const char* name, std::string_view data) {
  const int fd = ::memfd_create(name, MFD_CLOEXEC);
  if (fd < 0) return -1;
  size_t written = 0;
  while (written < data.size()) {
    const ssize_t n = ::write(fd, data.data() + written, data.size() - written);
    if (n <= 0) {
      ::close(fd);
      return -1;
    }
    written += static_cast<size_t>(n);
  }
  ::lseek(fd, 0, SEEK_SET);
  return fd;
}

}  // namespace

core::Result<void> VerifySshSignature(const PublicKey& key, std::string_view sig_namespace,
                                      std::string_view message, std::string_view armored_signature,
                                      std::chrono::milliseconds timeout,
                                      const std::string& ssh_keygen) {
  if (armored_signature.size() > kMaxArmoredSignature) {
    return InvalidSignature("it is larger than any SSH signature");
  }
  const std::optional<std::string> armor = NormaliseArmor(armored_signature);
  if (!armor) return InvalidSignature("it is not an armored SSH signature (BEGIN SSH SIGNATURE)");
  // Only `key` may have made it, for `sig_namespace` only. The list holds the key's type and
  // blob, never its comment.
  const std::string allowed = "claimant namespaces=\"" + std::string(sig_namespace) + "\" " +
                              key.type + " " + core::Base64Encode(key.blob) + "\n";
  std::array<int, 3> fds = {MemoryFile("gpuwerk-sig-message", message),
                            MemoryFile("gpuwerk-sig-allowed", allowed),
                            MemoryFile("gpuwerk-sig", *armor)};
  const int devnull = ::open("/dev/null", O_WRONLY | O_CLOEXEC);
  auto close_all = [&] {
    for (int fd : fds) {
      if (fd >= 0) ::close(fd);
    }
    if (devnull >= 0) ::close(devnull);
  };
  if (fds[0] < 0 || fds[1] < 0 || fds[2] < 0 || devnull < 0) {
    close_all();
    return Unavailable(std::string("no memory file: ") + std::strerror(errno));
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, fds[0], 0);
  posix_spawn_file_actions_adddup2(&actions, devnull, 1);
  posix_spawn_file_actions_adddup2(&actions, devnull, 2);
  posix_spawn_file_actions_adddup2(&actions, fds[1], 3);
  posix_spawn_file_actions_adddup2(&actions, fds[2], 4);
  std::vector<std::string> argv = {ssh_keygen, "-Y",        "verify",
                                   "-f",       "/dev/fd/3", "-I",
                                   "claimant", "-n",        std::string(sig_namespace),
                                   "-s",       "/dev/fd/4"};
  std::vector<char*> args;
  for (std::string& a : argv) args.push_back(a.data());
  args.push_back(nullptr);
  std::string path = "PATH=/usr/local/bin:/usr/bin:/bin";
  std::string lang = "LC_ALL=C";
  char* env[] = {path.data(), lang.data(), nullptr};
  pid_t pid = 0;
  const int rc = ::posix_spawnp(&pid, args[0], &actions, nullptr, args.data(), env);
  posix_spawn_file_actions_destroy(&actions);
  close_all();
  if (rc != 0) return Unavailable("cannot run " + ssh_keygen + ": " + std::strerror(rc));
  int status = 0;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    const pid_t done = ::waitpid(pid, &status, WNOHANG);
    if (done == pid) break;
    if (done < 0 && errno != EINTR) return Unavailable("lost the signature check's process");
    if (std::chrono::steady_clock::now() >= deadline) {
      ::kill(pid, SIGKILL);
      while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
      }
      return Unavailable("the signature check did not finish in time");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  if (!WIFEXITED(status)) return Unavailable("the signature check was killed");
  if (WEXITSTATUS(status) == 0) return {};
  if (WEXITSTATUS(status) == 127) return Unavailable("cannot run " + ssh_keygen);
  return InvalidSignature("it is not this key's signature over this challenge in namespace " +
                          std::string(sig_namespace));
}

}  // namespace gpuwerk::keys

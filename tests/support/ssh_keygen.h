#pragma once

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace gpuwerk::testing {

/// A key pair made by the real `ssh-keygen` in `dir`.
struct GeneratedKey {
  std::filesystem::path private_path;
  std::string public_line;  ///< the .pub file's contents
  std::string private_text;
};

inline std::string ReadFile(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

/// Runs `ssh-keygen -q -N '' -t <type> [-b bits] [extra] -C <comment> -f dir/name`.
inline GeneratedKey GenerateKey(const std::filesystem::path& dir, const std::string& name,
                                const std::string& type = "ed25519", int bits = 0,
                                const std::string& extra = "") {
  GeneratedKey k;
  k.private_path = dir / name;
  std::string cmd = "ssh-keygen -q -N '' -t " + type + (bits ? " -b " + std::to_string(bits) : "") +
                    " " + extra + " -C " + name + "@test -f '" + k.private_path.string() +
                    "' </dev/null >/dev/null 2>&1";
  if (std::system(cmd.c_str()) != 0) return k;
  k.public_line = ReadFile(k.private_path.string() + ".pub");
  k.private_text = ReadFile(k.private_path);
  return k;
}

/// What `ssh-keygen -lf <file>` prints for the key in `pub_path`: "<bits> SHA256:… comment (TYPE)".
inline std::string SshKeygenFingerprint(const std::filesystem::path& pub_path) {
  std::string cmd = "ssh-keygen -lf '" + pub_path.string() + "' 2>/dev/null";
  std::string out;
  if (FILE* f = ::popen(cmd.c_str(), "r")) {
    char buf[512];
    while (std::fgets(buf, sizeof buf, f)) out += buf;
    ::pclose(f);
  }
  std::istringstream in(out);
  std::string bits, fp;
  in >> bits >> fp;
  return fp;
}

}  // namespace gpuwerk::testing

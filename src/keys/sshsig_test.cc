// VerifySshSignature against the real OpenSSH: signatures made by `ssh-keygen -Y sign` verify for
// their key, message and namespace only; malformed or oversized armor is refused before anything
// runs; a missing ssh-keygen is "unavailable", never "valid".
#include "keys/sshsig.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <string>

#include "tests/support/ssh_keygen.h"
#include "tests/support/temp_dir.h"

namespace gpuwerk::keys {
namespace {

using testing::GenerateKey;
using testing::ReadFile;

class SshSigTest : public ::testing::Test {
 protected:
  std::string Sign(const std::filesystem::path& key, const std::string& ns,
                   const std::string& message) {
    const auto file = dir_.path() / ("m" + std::to_string(++n_));
    {
      std::ofstream out(file, std::ios::binary);
      out << message;
    }
    const std::string cmd = "ssh-keygen -q -Y sign -n '" + ns + "' -f '" + key.string() + "' '" +
                            file.string() + "' </dev/null >/dev/null 2>&1";
    if (std::system(cmd.c_str()) != 0) return "";
    return ReadFile(file.string() + ".sig");
  }
  PublicKey Parsed(const std::string& line) {
    auto k = ParsePublicKey(line);
    EXPECT_TRUE(k) << (k ? "" : k.error().message);
    return k ? *k : PublicKey{};
  }
  testing::TempDir dir_;
  int n_ = 0;
};

TEST_F(SshSigTest, OnlyTheKeysSignatureOverTheMessageInTheNamespaceVerifies) {
  for (auto [type, bits] : {std::pair{"ed25519", 0}, {"ecdsa", 256}, {"rsa", 2048}}) {
    auto key = GenerateKey(dir_.path(), std::string("k-") + type, type, bits);
    auto other = GenerateKey(dir_.path(), std::string("o-") + type, type, bits);
    ASSERT_FALSE(key.public_line.empty()) << type;
    const PublicKey pub = Parsed(key.public_line);
    const std::string message = "gpuwerk key claim\nnonce abc\n";
    const std::string good = Sign(key.private_path, "gpuwerk-key-claim", message);
    ASSERT_FALSE(good.empty()) << type;
    EXPECT_TRUE(VerifySshSignature(pub, kKeyClaimNamespace, message, good)) << type;
    // CRLF and blanks around the armor are tolerated.
    std::string crlf;
    for (char c : good) crlf += c == '\n' ? std::string("\r\n") : std::string(1, c);
    EXPECT_TRUE(VerifySshSignature(pub, kKeyClaimNamespace, message, "\n " + crlf + " \n")) << type;
    auto expect_invalid = [&](const core::Result<void>& r, const char* what) {
      ASSERT_FALSE(r) << type << ": " << what;
      EXPECT_EQ(r.error().api_code, "invalid_signature") << type << ": " << what;
    };
    expect_invalid(VerifySshSignature(pub, kKeyClaimNamespace, message + "x", good),
                   "another message");
    expect_invalid(VerifySshSignature(pub, "git", message, good), "another namespace");
    expect_invalid(VerifySshSignature(pub, kKeyClaimNamespace, message,
                                      Sign(other.private_path, "gpuwerk-key-claim", message)),
                   "another key");
    expect_invalid(VerifySshSignature(pub, kKeyClaimNamespace, message,
                                      Sign(key.private_path, "git", message)),
                   "signed in another namespace");
  }
}

TEST_F(SshSigTest, MalformedOrOversizedArmorIsRefusedBeforeAnythingRuns) {
  auto key = GenerateKey(dir_.path(), "k");
  const PublicKey pub = Parsed(key.public_line);
  for (const std::string& bad :
       {std::string(""), std::string("hello"), std::string("-----BEGIN SSH SIGNATURE-----\n"),
        std::string("-----BEGIN SSH SIGNATURE-----\n-----END SSH SIGNATURE-----"),
        std::string("-----BEGIN SSH SIGNATURE-----\nAAAA$(reboot)\n-----END SSH SIGNATURE-----"),
        "-----BEGIN SSH SIGNATURE-----\n" + std::string(kMaxArmoredSignature, 'A') +
            "\n-----END SSH SIGNATURE-----"}) {
    // A program that does not exist would say "unavailable": "invalid" proves nothing ran.
    auto r = VerifySshSignature(pub, kKeyClaimNamespace, "m", bad, std::chrono::seconds(10),
                                "/nonexistent/ssh-keygen");
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().api_code, "invalid_signature") << bad.substr(0, 60);
  }
}

TEST_F(SshSigTest, AMissingSshKeygenIsUnavailableNeverValid) {
  auto key = GenerateKey(dir_.path(), "k");
  const PublicKey pub = Parsed(key.public_line);
  const std::string good = Sign(key.private_path, "gpuwerk-key-claim", "m");
  ASSERT_FALSE(good.empty());
  auto r = VerifySshSignature(pub, kKeyClaimNamespace, "m", good, std::chrono::seconds(10),
                              "/nonexistent/ssh-keygen");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().api_code, "signature_check_unavailable");
}

}  // namespace
}  // namespace gpuwerk::keys

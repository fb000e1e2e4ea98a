// The relay's certificates (docs/ssh.md "Upstream: the relay credential"), read back with
// OpenSSH's own `ssh-keygen -L`. Hermetic: a FakeClock dates them, keys live in a temp dir.
#include "relay/relay_certificates.h"

#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "core/clock.h"
#include "relay/ssh_key_file.h"
#include "tests/support/run_command.h"
#include "tests/support/temp_dir.h"

namespace gpuwerk::relay {
namespace {

using gpuwerk::testing::RunCommand;
using gpuwerk::testing::TempDir;

class RelayCertificatesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto ca = LoadOrCreateEd25519Key(dir_.path() / "relay_ca", "gpuwerk-relay-ca");
    ASSERT_TRUE(ca) << ca.error().message;
    ca_ = *ca;
    auto key = LoadOrCreateEd25519Key(dir_.path() / "relay_key", "gpuwerk-relay");
    ASSERT_TRUE(key) << key.error().message;
    key_ = *key;
  }

  RelayCertificates::Options Options() {
    return {.ca_key_path = ca_.path, .relay_public_line = key_.public_line, .clock = &clock_};
  }

  /// `ssh-keygen -L` of a certificate line, times in UTC.
  std::string Inspect(const std::string& line) {
    std::ofstream(dir_.path() / "cert.pub") << line << "\n";
    auto r = RunCommand(dir_.path(), "TZ=UTC ssh-keygen -L -f cert.pub");
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return r.out;
  }

  TempDir dir_;
  SshKeyFile ca_, key_;
  core::FakeClock clock_{1'800'000'000};  // 2027-01-15T08:00:00Z
};

TEST_F(RelayCertificatesTest, F1_SignsTheRelayKeyForOneInstanceFromAMinuteAgoForFiveMinutes) {
  RelayCertificates certificates(Options());
  auto line = certificates.For("ins_2f7qk3x7q");
  ASSERT_TRUE(line) << line.error().message;
  EXPECT_TRUE(line->starts_with("ssh-ed25519-cert-v01@openssh.com AAAA")) << *line;
  const std::string shown = Inspect(*line);
  EXPECT_NE(shown.find("Type: ssh-ed25519-cert-v01@openssh.com user certificate"),
            std::string::npos)
      << shown;
  EXPECT_NE(shown.find("Signing CA: ED25519 " + ca_.fingerprint), std::string::npos) << shown;
  EXPECT_NE(shown.find("Key ID: \"gpuwerk-relay ins_2f7qk3x7q\""), std::string::npos) << shown;
  EXPECT_NE(shown.find("Valid: from 2027-01-15T07:59:00 to 2027-01-15T08:05:00"), std::string::npos)
      << shown;
  EXPECT_NE(shown.find("Principals: \n                gpuwerk-instance-ins_2f7qk3x7q\n"),
            std::string::npos)
      << shown;
  EXPECT_NE(shown.find("Critical Options: (none)"), std::string::npos) << shown;
  for (const char* ext :
       {"permit-pty", "permit-port-forwarding", "permit-agent-forwarding", "permit-user-rc"}) {
    EXPECT_NE(shown.find(ext), std::string::npos) << ext << "\n" << shown;
  }
  EXPECT_EQ(shown.find("X11"), std::string::npos) << shown;
  // It certifies the relay key: the certificate's public key is the relay key's.
  auto fp = RunCommand(dir_.path(), "ssh-keygen -l -f cert.pub");
  EXPECT_NE(fp.out.find(key_.fingerprint), std::string::npos) << fp.out << key_.fingerprint;
}

TEST_F(RelayCertificatesTest, ACertificateIsReusedUntilAMinuteBeforeItsEnd) {
  RelayCertificates certificates(Options());
  auto first = certificates.For("ins_a");
  ASSERT_TRUE(first) << first.error().message;
  EXPECT_EQ(certificates.For("ins_a").value_or(""), *first);
  EXPECT_EQ(certificates.signings(), 1u);
  clock_.Advance(std::chrono::seconds(239));  // 61 s left
  EXPECT_EQ(certificates.For("ins_a").value_or(""), *first);
  EXPECT_EQ(certificates.signings(), 1u);
  clock_.Advance(std::chrono::seconds(1));  // 60 s left: renewed
  auto second = certificates.For("ins_a");
  ASSERT_TRUE(second) << second.error().message;
  EXPECT_NE(*second, *first);
  EXPECT_EQ(certificates.signings(), 2u);
  EXPECT_NE(Inspect(*second).find("Valid: from 2027-01-15T08:03:00 to 2027-01-15T08:09:00"),
            std::string::npos);
  // Another instance has its own.
  auto other = certificates.For("ins_b");
  ASSERT_TRUE(other);
  EXPECT_NE(*other, *second);
  EXPECT_EQ(certificates.signings(), 3u);
}

TEST_F(RelayCertificatesTest, AnIdThatMakesNoPrincipalGetsNoCertificate) {
  RelayCertificates certificates(Options());
  for (const std::string id : {"ins_a,ins_b", "ins\"a", "", "ins a"}) {
    auto line = certificates.For(id);
    ASSERT_FALSE(line) << id;
    EXPECT_EQ(line.error().api_code, "invalid_certificate_request") << id;
  }
  EXPECT_EQ(certificates.signings(), 0u);
}

TEST_F(RelayCertificatesTest, WithoutSshKeygenSigningIsUnavailable) {
  RelayCertificates::Options options = Options();
  options.ssh_keygen = (dir_.path() / "no-such-ssh-keygen").string();
  RelayCertificates certificates(options);
  auto line = certificates.For("ins_a");
  ASSERT_FALSE(line);
  EXPECT_EQ(line.error().api_code, "certificate_signing_failed");
  auto probe = MakeProbeCertificate(ca_.path, std::chrono::seconds(10), options.ssh_keygen);
  ASSERT_FALSE(probe);
  EXPECT_EQ(probe.error().api_code, "certificate_signing_failed");
}

TEST_F(RelayCertificatesTest, TheProbeCertificateNamesOnlyTheProbePrincipalAndForcesFalse) {
  auto probe = MakeProbeCertificate(ca_.path);
  ASSERT_TRUE(probe) << probe.error().message;
  const std::string shown = Inspect(*probe);
  EXPECT_NE(shown.find("Signing CA: ED25519 " + ca_.fingerprint), std::string::npos) << shown;
  EXPECT_NE(shown.find("Valid: forever"), std::string::npos) << shown;
  EXPECT_NE(shown.find("Principals: \n                gpuwerk-relay-probe\n"), std::string::npos)
      << shown;
  EXPECT_NE(shown.find("force-command /bin/false"), std::string::npos) << shown;
  EXPECT_NE(shown.find("Extensions: (none)"), std::string::npos) << shown;
  // Its key is not the relay key (nobody holds its private half).
  EXPECT_EQ(RunCommand(dir_.path(), "ssh-keygen -l -f cert.pub").out.find(key_.fingerprint),
            std::string::npos);
}

}  // namespace
}  // namespace gpuwerk::relay

#include "agent/authorized_keys.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace gpuwerk::agent {
namespace {

namespace fs = std::filesystem;

constexpr const char* kKey1 =
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl alice@laptop";
constexpr const char* kKey2 =
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIBvc1Bz0u3yYJbpw6C9MxNQW6ZLzkp4hH8pEjxrKQbYi bob";

std::string Slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

/// A temp dir, removed at the end.
class TempDir {
 public:
  TempDir() {
    std::string tmpl = (fs::temp_directory_path() / "gpuwerk-agent-XXXXXX").string();
    path_ = ::mkdtemp(tmpl.data());
  }
  ~TempDir() { fs::remove_all(path_); }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

TEST(AuthorizedKeysTest, C04_EachKeyOnItsOwnLineEndingInNewline) {
  EXPECT_EQ(AuthorizedKeysFile({kKey1, kKey2}), std::string(kKey1) + "\n" + kKey2 + "\n");
  EXPECT_EQ(AuthorizedKeysFile({}), "");
}

TEST(AuthorizedKeysTest, C01_NoCarriageReturnAndNoBlankLines) {
  const std::string file =
      AuthorizedKeysFile({std::string("  ") + kKey1 + "\r\n", "", std::string(kKey2) + "\r"});
  EXPECT_EQ(file, std::string(kKey1) + "\n" + kKey2 + "\n");
  EXPECT_EQ(file.find('\r'), std::string::npos);
}

TEST(AuthorizedKeysTest, C04_SeveralLinesInOneElementBecomeSeveralLines) {
  EXPECT_EQ(AuthorizedKeysFile({std::string(kKey1) + "\r\n" + kKey2}),
            std::string(kKey1) + "\n" + kKey2 + "\n");
}

TEST(AuthorizedKeysTest, ArchiveIsDeterministicUstar) {
  const std::string tar = AuthorizedKeysTar({kKey1});
  EXPECT_EQ(tar, AuthorizedKeysTar({kKey1}));
  ASSERT_GE(tar.size(), 1024u);
  EXPECT_EQ(tar.size() % 512, 0u);
  EXPECT_EQ(tar.substr(257, 6), std::string("ustar\0", 6));  // POSIX ustar magic
}

TEST(AuthorizedKeysTest, C05_TarExtractsWithRootOwnerAndStrictModes) {
  TempDir dir;
  const fs::path archive = dir.path() / "keys.tar";
  {
    std::ofstream out(archive, std::ios::binary);
    out << AuthorizedKeysTar({kKey1, std::string(kKey2) + "\r\n"}, 1'700'000'000);
  }
  // The listing, as GNU tar reads the headers: owners and modes as recorded.
  const fs::path listing = dir.path() / "listing.txt";
  ASSERT_EQ(
      std::system(
          ("tar --numeric-owner -tvf " + archive.string() + " > " + listing.string()).c_str()),
      0);
  const std::string text = Slurp(listing);
  EXPECT_NE(text.find("drwx------ 0/0"), std::string::npos) << text;
  EXPECT_NE(text.find("root/.ssh/\n"), std::string::npos) << text;
  EXPECT_NE(text.find("-rw------- 0/0"), std::string::npos) << text;
  EXPECT_NE(text.find("root/.ssh/authorized_keys\n"), std::string::npos) << text;
  EXPECT_NE(text.find("2023-11-1"), std::string::npos) << text;  // 1'700'000'000 s

  // Extracted (as root, tar keeps the recorded owner; as anyone, the modes).
  const fs::path root = dir.path() / "root";
  fs::create_directory(root);
  ASSERT_EQ(std::system(("tar --same-permissions --same-owner -xf " + archive.string() + " -C " +
                         root.string())
                            .c_str()),
            0);
  struct stat st {};
  ASSERT_EQ(::stat((root / "root/.ssh").c_str(), &st), 0);
  EXPECT_TRUE(S_ISDIR(st.st_mode));
  EXPECT_EQ(st.st_mode & 07777, 0700u);
  ASSERT_EQ(::stat((root / "root/.ssh/authorized_keys").c_str(), &st), 0);
  EXPECT_TRUE(S_ISREG(st.st_mode));
  EXPECT_EQ(st.st_mode & 07777, 0600u);
  if (::geteuid() == 0) {
    EXPECT_EQ(st.st_uid, 0u);
    EXPECT_EQ(st.st_gid, 0u);
  }
  const std::string file = Slurp(root / "root/.ssh/authorized_keys");
  EXPECT_EQ(file, std::string(kKey1) + "\n" + kKey2 + "\n");
  EXPECT_EQ(file.find('\r'), std::string::npos);
}

// Issue 12 finding 9: the keys are the agent's own file on the host, which every container
// mounts read-only; writing them runs nothing anywhere. Modes as sshd's StrictModes wants
// (C05), the whole file replaced at once, and the sshd drop-in that names it.
TEST(AuthorizedKeysTest, Finding9_AgentKeysAreWrittenOnTheHostWithStrictModes) {
  TempDir dir;
  auto paths = AgentKeysPathsFor(dir.path(), "gpuwerk-ins_a-0");
  ASSERT_TRUE(paths) << paths.error().message;
  EXPECT_EQ(paths->dir, dir.path() / "containers" / "gpuwerk-ins_a-0");
  EXPECT_EQ(paths->drop_in, dir.path() / "sshd-keys.conf");
  ASSERT_TRUE(WriteAgentKeys(*paths, {kKey1, std::string(kKey2) + "\r\n"}));
  struct stat st {};
  ASSERT_EQ(::lstat(paths->dir.c_str(), &st), 0);
  EXPECT_TRUE(S_ISDIR(st.st_mode));
  EXPECT_EQ(st.st_mode & 07777, 0700u);
  ASSERT_EQ(::lstat((paths->dir / "authorized_keys").c_str(), &st), 0);
  EXPECT_TRUE(S_ISREG(st.st_mode));
  EXPECT_EQ(st.st_mode & 07777, 0600u);
  const ino_t first = st.st_ino;
  EXPECT_EQ(Slurp(paths->dir / "authorized_keys"), std::string(kKey1) + "\n" + kKey2 + "\n");
  EXPECT_EQ(Slurp(paths->drop_in),
            "# Written by the gpuwerk agent and mounted read-only: sshd reads the keys gpuwerk "
            "manages first,\n# then root's own ~/.ssh/authorized_keys.\n"
            "AuthorizedKeysFile /etc/ssh/gpuwerk/authorized_keys .ssh/authorized_keys\n");
  auto held = AgentKeysHold(*paths, {kKey2});
  ASSERT_TRUE(held);
  EXPECT_TRUE(*held);
  // Rewritten: a new file renamed over the old (a reader never sees half of one), nothing left.
  ASSERT_TRUE(WriteAgentKeys(*paths, {kKey2}));
  ASSERT_EQ(::lstat((paths->dir / "authorized_keys").c_str(), &st), 0);
  EXPECT_NE(st.st_ino, first);
  EXPECT_EQ(Slurp(paths->dir / "authorized_keys"), std::string(kKey2) + "\n");
  held = AgentKeysHold(*paths, {kKey1, kKey2});
  ASSERT_TRUE(held);
  EXPECT_FALSE(*held);
  size_t entries = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(paths->dir)) ++entries;
  EXPECT_EQ(entries, 1u);
  // The two mounts, both read-only.
  const std::vector<BindMount> binds = AgentKeysBinds(*paths);
  ASSERT_EQ(binds.size(), 2u);
  EXPECT_EQ(binds[0].source, paths->dir.string());
  EXPECT_EQ(binds[0].target, "/etc/ssh/gpuwerk");
  EXPECT_EQ(binds[1].target, "/etc/ssh/sshd_config.d/00-gpuwerk-keys.conf");
  EXPECT_TRUE(binds[0].read_only && binds[1].read_only);
  RemoveAgentKeys(*paths);
  EXPECT_FALSE(fs::exists(paths->dir));
  held = AgentKeysHold(*paths, {kKey2});
  ASSERT_TRUE(held);
  EXPECT_FALSE(*held);
}

// A container's directory that is a symlink (not something the agent makes) is refused, not
// followed; a container name that is not a plain path component is refused.
TEST(AuthorizedKeysTest, Finding9_AgentKeysRefuseSymlinksAndOddNames) {
  TempDir dir;
  fs::create_directories(dir.path() / "containers");
  fs::create_directories(dir.path() / "elsewhere");
  fs::create_directory_symlink(dir.path() / "elsewhere", dir.path() / "containers" / "c1");
  auto paths = AgentKeysPathsFor(dir.path(), "c1");
  ASSERT_TRUE(paths);
  auto written = WriteAgentKeys(*paths, {kKey1});
  ASSERT_FALSE(written);
  EXPECT_EQ(written.error().api_code, "authorized_keys_write_failed");
  EXPECT_FALSE(fs::exists(dir.path() / "elsewhere" / "authorized_keys"));
  for (const char* name : {"", ".", "..", "../x", "a/b", "-rf", ".hidden", "a\nb", "a:b"}) {
    auto bad = AgentKeysPathsFor(dir.path(), name);
    ASSERT_FALSE(bad) << name;
    EXPECT_EQ(bad.error().api_code, "invalid_container_name") << name;
  }
  auto relative = AgentKeysPathsFor("keys", "c1");
  ASSERT_FALSE(relative);
  EXPECT_EQ(relative.error().api_code, "invalid_keys_dir");
}

TEST(AuthorizedKeysTest, SplitsOptionsFromTheKey) {
  auto plain = SplitAuthorizedKeyLine(std::string("  ") + kKey1 + "\n");
  EXPECT_EQ(plain.options, "");
  EXPECT_EQ(plain.key, kKey1);
  auto restricted = SplitAuthorizedKeyLine(std::string("from=\"10.0.0.2,10.1.*\",no-pty ") + kKey2);
  EXPECT_EQ(restricted.options, "from=\"10.0.0.2,10.1.*\",no-pty");
  EXPECT_EQ(restricted.key, kKey2);
  // Blanks and escaped quotes inside a quoted option do not end the options.
  auto quoted = SplitAuthorizedKeyLine(std::string(R"(command="echo \"a b\"",no-pty   )") + kKey1);
  EXPECT_EQ(quoted.options, R"(command="echo \"a b\"",no-pty)");
  EXPECT_EQ(quoted.key, kKey1);
  auto ecdsa = SplitAuthorizedKeyLine("ecdsa-sha2-nistp256 AAAAE2V x");
  EXPECT_EQ(ecdsa.options, "");
  auto no_key = SplitAuthorizedKeyLine("no-pty");
  EXPECT_EQ(no_key.options, "no-pty");
  EXPECT_EQ(no_key.key, "");
}

TEST(AuthorizedKeysTest, FromPatternsAreCheckedForWhatWouldBreakTheOption) {
  for (const char* good : {"10.0.0.2", "10.0.0.2,10.0.1.0/24", "10.*,!10.0.0.9", "relay-?.lan",
                           "fd00::2,fe80::1%eth0", "*"}) {
    EXPECT_TRUE(ValidateFromPatterns(good)) << good;
  }
  for (const char* bad :
       {"", "10.0.0.2 10.0.0.3", "10.0.0.2\"", "10.0.0.2\n", "10.0.0.2\t", "10.0.0.2,", ",10.0.0.2",
        "10.0.0.2,,10.0.0.3", "!", "10.!0.0.1", "a\"\ncommand=\"x", "10.0.0.2;rm"}) {
    auto r = ValidateFromPatterns(bad);
    ASSERT_FALSE(r) << bad;
    EXPECT_EQ(r.error().code, core::ErrorCode::kInvalidArgument);
    EXPECT_EQ(r.error().api_code, "invalid_relay_from");
  }
  auto quote = ValidateFromPatterns("10.0.0.2\"");
  ASSERT_FALSE(quote);
  EXPECT_NE(quote.error().message.find("double quote"), std::string::npos) << quote.error().message;
  auto newline = ValidateFromPatterns("10.0.0.2\n");
  ASSERT_FALSE(newline);
  EXPECT_NE(newline.error().message.find("newline"), std::string::npos) << newline.error().message;
}

TEST(AuthorizedKeysTest, RelayLineGetsFromAndNoOtherRestriction) {
  const std::string relay = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIG9y gpuwerk-relay";
  auto line = RestrictRelayKeyLine(relay + "\n", "10.0.0.2,10.88.0.1");
  ASSERT_TRUE(line) << line.error().message;
  EXPECT_EQ(*line, "from=\"10.0.0.2,10.88.0.1\" " + relay);
  // As sshd reads it: the options, then the key; nothing that stops ptys, forwarding or agents.
  auto parts = SplitAuthorizedKeyLine(*line);
  EXPECT_EQ(parts.options, "from=\"10.0.0.2,10.88.0.1\"");
  EXPECT_EQ(parts.key, relay);
  // In the file: one line, ending in a newline.
  EXPECT_EQ(AuthorizedKeysFile({kKey1, *line}), std::string(kKey1) + "\n" + *line + "\n");
  // No patterns: unchanged.
  auto unchanged = RestrictRelayKeyLine(" " + relay, "");
  ASSERT_TRUE(unchanged);
  EXPECT_EQ(*unchanged, relay);
  // A line with options of its own gets from= first among them.
  auto with_options = RestrictRelayKeyLine("no-X11-forwarding " + relay, "10.0.0.2");
  ASSERT_TRUE(with_options);
  EXPECT_EQ(*with_options, "from=\"10.0.0.2\",no-X11-forwarding " + relay);
  // Refused: bad patterns, a second from=, no key.
  auto bad = RestrictRelayKeyLine(relay, "10.0.0.2\" command=\"sh");
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().api_code, "invalid_relay_from");
  auto twice = RestrictRelayKeyLine("from=\"10.0.0.3\" " + relay, "10.0.0.2");
  ASSERT_FALSE(twice);
  EXPECT_EQ(twice.error().api_code, "invalid_relay_from");
  auto empty = RestrictRelayKeyLine("  ", "10.0.0.2");
  ASSERT_FALSE(empty);
  EXPECT_EQ(empty.error().api_code, "invalid_relay_key");
}

// The relay CA (docs/ssh.md "Upstream: the relay credential"; issue 12 finding 1).
constexpr const char* kRelayCa =
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHvkUHXRnfrlMrJul9DlxqoohCvQpwbilMVvKb9zKJCL";
constexpr const char* kProbeCertificate =
    "ssh-ed25519-cert-v01@openssh.com "
    "AAAAIHNzaC1lZDI1NTE5LWNlcnQtdjAxQG9wZW5zc2guY29tAAAAIINWWWYd2VrzLGm2P2OmMEnQ+v3M"
    "qf9ovXUxpi00woRkAAAAILasSjwbGeKRjEfJ7v+MgbLqT/oxyTcH1XLicE2uWpdwAAAAAAAAAAAAAAAB"
    "AAAABXByb2JlAAAAFwAAABNncHV3ZXJrLXJlbGF5LXByb2JlAAAAAAAAAAD//////////wAAAAAAAACC"
    "AAAAFXBlcm1pdC1YMTEtZm9yd2FyZGluZwAAAAAAAAAXcGVybWl0LWFnZW50LWZvcndhcmRpbmcAAAAA"
    "AAAAFnBlcm1pdC1wb3J0LWZvcndhcmRpbmcAAAAAAAAACnBlcm1pdC1wdHkAAAAAAAAADnBlcm1pdC11"
    "c2VyLXJjAAAAAAAAAAAAAAAzAAAAC3NzaC1lZDI1NTE5AAAAIHvkUHXRnfrlMrJul9DlxqoohCvQpwbi"
    "lMVvKb9zKJCLAAAAUwAAAAtzc2gtZWQyNTUxOQAAAEBjgAKVyW7RqGjIhkJCIqFZ6RFfQGPP3VAlRrNc"
    "lTh/El+LUAbw5rKEm670xFQEZGGEeLa8pCiSruDLdnvpoKcF";

TEST(AuthorizedKeysTest, F1_TheRelayCaIsTrustedForOneInstancesPrincipalOnly) {
  auto ca = ParseRelayCaLine(std::string("  ") + kRelayCa + " gpuwerk-relay-ca\n");
  ASSERT_TRUE(ca) << ca.error().message;
  EXPECT_EQ(*ca, kRelayCa);
  auto line = RelayCaKeyLine(*ca, "ins_2f7qk3x7q", "");
  ASSERT_TRUE(line) << line.error().message;
  EXPECT_EQ(*line, "cert-authority,principals=\"gpuwerk-instance-ins_2f7qk3x7q\" " +
                       std::string(kRelayCa) + " gpuwerk-relay-ca");
  auto from = RelayCaKeyLine(*ca, "ins_a", "10.0.0.2,10.88.0.1");
  ASSERT_TRUE(from) << from.error().message;
  EXPECT_EQ(*from,
            "cert-authority,principals=\"gpuwerk-instance-ins_a\",from=\"10.0.0.2,10.88.0.1\" " +
                std::string(kRelayCa) + " gpuwerk-relay-ca");
  // As sshd reads it: the options, then the CA's key.
  EXPECT_EQ(SplitAuthorizedKeyLine(*from).key, std::string(kRelayCa) + " gpuwerk-relay-ca");
  // The probe line: the probe principal, restricted to /bin/false, without from=.
  EXPECT_EQ(RelayCaProbeLine(*ca),
            "cert-authority,principals=\"gpuwerk-relay-probe\",restrict,command=\"/bin/false\" " +
                std::string(kRelayCa) + " gpuwerk-relay-ca-probe");
  // An id that could end the option or name two principals makes no line.
  for (const std::string id : {"ins_a,ins_b", "ins\"a", "ins a", ""}) {
    auto bad = RelayCaKeyLine(*ca, id, "");
    ASSERT_FALSE(bad) << id;
    EXPECT_EQ(bad.error().api_code, "invalid_instance_id") << id;
  }
  auto bad_from = RelayCaKeyLine(*ca, "ins_a", "10.0.0.2\" command=\"sh");
  ASSERT_FALSE(bad_from);
  EXPECT_EQ(bad_from.error().api_code, "invalid_relay_from");
  // Not a CA line: options, another type, a blob that is not an ed25519 key, nothing.
  for (const std::string& bad :
       {std::string("from=\"10.0.0.2\" ") + kRelayCa, std::string("ssh-rsa AAAAB3NzaC1yc2E="),
        std::string("ssh-ed25519 AAAAB3NzaC1yc2E="), std::string("ssh-ed25519 !!"),
        std::string(kProbeCertificate), std::string()}) {
    auto refused = ParseRelayCaLine(bad);
    ASSERT_FALSE(refused) << bad;
    EXPECT_EQ(refused.error().api_code, "invalid_relay_ca") << bad;
  }
}

TEST(AuthorizedKeysTest, TheProbeCertificateIsACertificateLine) {
  auto probe =
      ParseRelayProbeCertificate(std::string(kProbeCertificate) + " gpuwerk-relay-probe\n");
  ASSERT_TRUE(probe) << probe.error().message;
  EXPECT_EQ(*probe, kProbeCertificate);
  for (const std::string& bad :
       {std::string(kRelayCa), std::string("ssh-ed25519-cert-v01@openssh.com AAAA"),
        std::string("restrict ") + kProbeCertificate}) {
    auto refused = ParseRelayProbeCertificate(bad);
    ASSERT_FALSE(refused) << bad;
    EXPECT_EQ(refused.error().api_code, "invalid_relay_ca_probe") << bad;
  }
}

}  // namespace
}  // namespace gpuwerk::agent

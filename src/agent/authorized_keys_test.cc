#include "agent/authorized_keys.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

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

}  // namespace
}  // namespace gpuwerk::agent

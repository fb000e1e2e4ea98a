#include "keys/key_pair.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "keys/public_key.h"

namespace gpuwerk::keys {
namespace {

namespace fs = std::filesystem;

/// Counts up from a start byte: two Rngs with the same start make the same keys.
class CountingRng final : public core::Rng {
 public:
  explicit CountingRng(unsigned char start) : next_(start) {}
  void Fill(void* out, size_t n) override {
    auto* p = static_cast<unsigned char*>(out);
    for (size_t i = 0; i < n; ++i) p[i] = next_++;
  }

 private:
  unsigned char next_;
};

/// The output of `command`, or "" when it fails.
std::string Output(const std::string& command) {
  std::string out;
  FILE* f = ::popen(command.c_str(), "r");
  if (f == nullptr) return out;
  std::array<char, 512> buf{};
  size_t n = 0;
  while ((n = std::fread(buf.data(), 1, buf.size(), f)) > 0) out.append(buf.data(), n);
  return ::pclose(f) == 0 ? out : std::string();
}

TEST(KeyPairTest, OpenSshReadsThePrivateKeyAndDerivesThePublicLine) {
  core::SodiumRng rng;
  auto pair = MakeEd25519KeyPair(rng, "gpuwerk-worker-ins_test");
  ASSERT_TRUE(pair) << pair.error().message;
  EXPECT_TRUE(pair->private_openssh.starts_with("-----BEGIN OPENSSH PRIVATE KEY-----\n"));
  EXPECT_TRUE(pair->private_openssh.ends_with("-----END OPENSSH PRIVATE KEY-----\n"));
  EXPECT_TRUE(pair->public_line.ends_with(" gpuwerk-worker-ins_test"));
  // The project's own parser takes the public line (R-4 shapes).
  auto parsed = ParsePublicKey(pair->public_line);
  ASSERT_TRUE(parsed) << parsed.error().message;

  const fs::path dir =
      fs::temp_directory_path() / ("gpuwerk-key-pair-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const fs::path key = dir / "id_ed25519";
  {
    std::ofstream f(key);
    f << pair->private_openssh;
  }
  ::chmod(key.c_str(), 0600);
  const std::string derived = Output("ssh-keygen -y -f " + key.string() + " 2>/dev/null");
  fs::remove_all(dir);
  ASSERT_FALSE(derived.empty()) << "ssh-keygen could not read the private key";
  const std::string two_fields = pair->public_line.substr(0, pair->public_line.rfind(' '));
  EXPECT_TRUE(derived.starts_with(two_fields)) << derived << " vs " << pair->public_line;
}

TEST(KeyPairTest, EachPairIsItsOwnAndTheSameSeedGivesTheSameKey) {
  CountingRng a(1), b(1), c(99);
  auto ka = MakeEd25519KeyPair(a, "x");
  auto kb = MakeEd25519KeyPair(b, "x");
  auto kc = MakeEd25519KeyPair(c, "x");
  ASSERT_TRUE(ka && kb && kc);
  EXPECT_EQ(ka->public_line, kb->public_line);
  EXPECT_NE(ka->public_line, kc->public_line);
}

TEST(KeyPairTest, RefusesACommentThatIsNotOneWord) {
  core::SodiumRng rng;
  for (const char* bad : {"", "two words", "new\nline", "\x1b[31m"}) {
    auto pair = MakeEd25519KeyPair(rng, bad);
    ASSERT_FALSE(pair) << bad;
    EXPECT_EQ(pair.error().api_code, "invalid_key_comment");
  }
  EXPECT_FALSE(MakeEd25519KeyPair(rng, std::string(65, 'a')));
}

}  // namespace
}  // namespace gpuwerk::keys

#include "keys/public_key.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "core/encoding.h"
#include "keys/internal/ssh_wire.h"

namespace gpuwerk::keys {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::Not;

// ---------------------------------------------------------------------------------------------
// Helpers: a temp dir, running ssh-keygen / puttygen, reading their output.

struct CommandResult {
  int exit_code = -1;
  std::string output;  // stdout only
};

CommandResult Run(const std::string& command) {
  CommandResult result;
  FILE* pipe = ::popen((command + " 2>/dev/null").c_str(), "r");
  if (pipe == nullptr) return result;
  std::array<char, 4096> buffer{};
  size_t n = 0;
  while ((n = std::fread(buffer.data(), 1, buffer.size(), pipe)) > 0) {
    result.output.append(buffer.data(), n);
  }
  const int status = ::pclose(pipe);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return result;
}

bool HaveProgram(const std::string& name) {
  return Run("command -v " + name + " >/dev/null").exit_code == 0;
}

std::string Quote(const fs::path& p) { return "'" + p.string() + "'"; }

std::string ReadFile(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

void WriteFile(const fs::path& p, std::string_view data) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out.write(data.data(), static_cast<std::streamsize>(data.size()));
}

/// What `ssh-keygen -l` printed: "<bits> SHA256:<b64> <comment> (<TYPE>)".
struct KeygenFingerprint {
  int bits = 0;
  std::string fingerprint;
  std::string comment;
  std::string label;
};

/// A private temp dir with key generation helpers; removed with everything in it on destruction.
class KeyLab {
 public:
  KeyLab() {
    const char* tmp = std::getenv("TMPDIR");
    std::string templ =
        std::string(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") + "/gpuwerk_keys_test_XXXXXX";
    if (::mkdtemp(templ.data()) != nullptr) dir_ = templ;
  }
  ~KeyLab() {
    std::error_code ec;
    if (!dir_.empty()) fs::remove_all(dir_, ec);
  }
  KeyLab(const KeyLab&) = delete;
  KeyLab& operator=(const KeyLab&) = delete;

  const fs::path& dir() const { return dir_; }
  fs::path Path(const std::string& name) const { return dir_ / name; }

  /// Runs ssh-keygen to make a key pair `name` / `name.pub`; `args` e.g. "-t rsa -b 2048".
  /// Returns false when ssh-keygen failed (e.g. a type this OpenSSH no longer makes).
  bool Generate(const std::string& name, const std::string& args,
                const std::string& comment = "alice@example.test",
                const std::string& passphrase = "") {
    return Run("ssh-keygen -q -N '" + passphrase + "' " + args + " -C '" + comment + "' -f " +
               Quote(Path(name)) + " </dev/null")
               .exit_code == 0;
  }

  std::string Read(const std::string& name) const { return ReadFile(Path(name)); }
  void Write(const std::string& name, std::string_view data) const { WriteFile(Path(name), data); }

  /// `ssh-keygen -lf <name>`; fingerprint empty when ssh-keygen refused the file.
  KeygenFingerprint Fingerprint(const std::string& name) const {
    KeygenFingerprint fp;
    const auto r = Run("ssh-keygen -l -E sha256 -f " + Quote(Path(name)));
    if (r.exit_code != 0) return fp;
    std::string line = r.output.substr(0, r.output.find('\n'));
    std::istringstream in(line);
    in >> fp.bits >> fp.fingerprint;
    std::string rest;
    std::getline(in, rest);
    const size_t open = rest.rfind(" (");
    if (open != std::string::npos && rest.ends_with(')')) {
      fp.label = rest.substr(open + 2, rest.size() - open - 3);
      rest = rest.substr(0, open);
    }
    fp.comment = rest.empty() ? rest : rest.substr(1);
    return fp;
  }

  /// Converts `name` with `ssh-keygen -i -m <format>` into an OpenSSH line and fingerprints
  /// that line with `ssh-keygen -l`: what ssh-keygen itself makes of a foreign format.
  KeygenFingerprint ImportedFingerprint(const std::string& name, const std::string& format) {
    const auto r = Run("ssh-keygen -i -m " + format + " -f " + Quote(Path(name)));
    if (r.exit_code != 0) return {};
    Write(name + ".imported", r.output);
    return Fingerprint(name + ".imported");
  }

  /// Output of an ssh-keygen (or other) command run in this dir, empty on failure.
  std::string Capture(const std::string& command) const {
    const auto r = Run("cd " + Quote(dir_) + " && " + command);
    return r.exit_code == 0 ? r.output : std::string();
  }

 private:
  fs::path dir_;
};

#define ASSERT_KEYGEN()                                                                \
  do {                                                                                 \
    ASSERT_TRUE(HaveProgram("ssh-keygen")) << "ssh-keygen (openssh-client) is needed"; \
  } while (0)

/// Asserts that `r` failed with kInvalidArgument and `api_code`.
#define EXPECT_KEY_ERROR(r, api)                                           \
  do {                                                                     \
    const auto& r_ = (r);                                                  \
    ASSERT_FALSE(r_.has_value()) << "expected " << (api) << ", got a key"; \
    EXPECT_EQ(r_.error().code, core::ErrorCode::kInvalidArgument);         \
    EXPECT_EQ(r_.error().api_code, (api)) << r_.error().message;           \
    EXPECT_FALSE(r_.error().message.empty());                              \
  } while (0)

std::vector<std::string> NonEmptyLines(std::string_view text) {
  std::vector<std::string> lines;
  std::string current;
  for (char c : text) {
    if (c == '\n' || c == '\r') {
      if (!current.empty()) lines.push_back(current);
      current.clear();
    } else {
      current.push_back(c);
    }
  }
  if (!current.empty()) lines.push_back(current);
  return lines;
}

/// The base64 field of an OpenSSH line.
std::string Base64Field(const std::string& line) {
  std::istringstream in(line);
  std::string type, b64;
  in >> type >> b64;
  return b64;
}

std::string Blob(const std::string& line) { return *core::Base64Decode(Base64Field(line)); }

std::string ToUtf16(std::string_view ascii, bool little_endian, bool bom) {
  std::string out;
  if (bom) out = little_endian ? std::string("\xFF\xFE") : std::string("\xFE\xFF");
  for (char c : ascii) {
    if (little_endian) {
      out.push_back(c);
      out.push_back('\0');
    } else {
      out.push_back('\0');
      out.push_back(c);
    }
  }
  return out;
}

std::string Wire(std::initializer_list<std::string_view> fields) {
  std::string blob;
  for (auto f : fields) internal::AppendString(blob, f);
  return blob;
}

std::string LineOf(std::string_view type, std::string_view blob, std::string_view comment = "") {
  std::string line = std::string(type) + " " + core::Base64Encode(blob);
  if (!comment.empty()) line += " " + std::string(comment);
  return line + "\n";
}

/// Wraps DER into PEM with 64-column lines (RFC 7468).
std::string Pem(std::string_view label, std::string_view der) {
  const std::string b64 = core::Base64Encode(der);
  std::string out = "-----BEGIN " + std::string(label) + "-----\n";
  for (size_t i = 0; i < b64.size(); i += 64) out += b64.substr(i, 64) + "\n";
  return out + "-----END " + std::string(label) + "-----\n";
}

// ---------------------------------------------------------------------------------------------
// Every accepted type, generated by ssh-keygen, against what ssh-keygen itself reports.

struct KeySpec {
  std::string name;
  std::string args;
  int bits;
  std::string label;
};

void PrintTo(const KeySpec& spec, std::ostream* os) { *os << spec.name; }

class SshKeygenAgreement : public ::testing::TestWithParam<KeySpec> {};

TEST_P(SshKeygenAgreement, FingerprintBitsAndFormatsMatchSshKeygen) {
  ASSERT_KEYGEN();
  const KeySpec& spec = GetParam();
  KeyLab lab;
  ASSERT_FALSE(lab.dir().empty());
  ASSERT_TRUE(lab.Generate("id", spec.args, "alice@example.test"));
  const std::string pub = lab.Read("id.pub");
  const KeygenFingerprint want = lab.Fingerprint("id.pub");
  ASSERT_THAT(want.fingerprint, HasSubstr("SHA256:"));
  EXPECT_EQ(want.bits, spec.bits);
  EXPECT_EQ(want.label, spec.label);

  auto key = ParsePublicKey(pub);
  ASSERT_TRUE(key.has_value()) << key.error().api_code << ": " << key.error().message;
  EXPECT_EQ(key->Fingerprint(), want.fingerprint);
  EXPECT_EQ(key->bits, want.bits);
  EXPECT_EQ(key->TypeLabel(), want.label);
  EXPECT_EQ(key->comment, "alice@example.test");
  EXPECT_EQ(key->Line(), pub);  // ssh-keygen's own line is already normal

  // The normalised line is read back by ssh-keygen to the same fingerprint, and by us.
  lab.Write("normal.pub", key->Line());
  EXPECT_EQ(lab.Fingerprint("normal.pub").fingerprint, want.fingerprint);
  auto again = ParsePublicKey(key->Line());
  ASSERT_TRUE(again.has_value());
  EXPECT_EQ(*again, *key);

  // RFC 4716 export.
  const std::string rfc4716 = lab.Capture("ssh-keygen -e -f id.pub");
  ASSERT_THAT(rfc4716, HasSubstr("---- BEGIN SSH2 PUBLIC KEY ----"));
  lab.Write("id.rfc4716", rfc4716);
  auto from_rfc4716 = ParsePublicKey(rfc4716);
  ASSERT_TRUE(from_rfc4716.has_value()) << from_rfc4716.error().message;
  EXPECT_EQ(from_rfc4716->Fingerprint(), want.fingerprint);
  EXPECT_EQ(from_rfc4716->Fingerprint(),
            lab.ImportedFingerprint("id.rfc4716", "RFC4716").fingerprint);
  EXPECT_EQ(from_rfc4716->bits, want.bits);
  EXPECT_THAT(from_rfc4716->comment, HasSubstr("converted by"));

  // PEM exports, where ssh-keygen makes them: PKCS#8 SubjectPublicKeyInfo for RSA and ECDSA,
  // PKCS#1 for RSA.
  if (spec.label == "RSA" || spec.label == "ECDSA") {
    const std::string spki = lab.Capture("ssh-keygen -e -m PKCS8 -f id.pub");
    ASSERT_THAT(spki, HasSubstr("-----BEGIN PUBLIC KEY-----"));
    lab.Write("id.pkcs8", spki);
    auto from_spki = ParsePublicKey(spki);
    ASSERT_TRUE(from_spki.has_value()) << from_spki.error().message;
    EXPECT_EQ(from_spki->Fingerprint(), want.fingerprint);
    EXPECT_EQ(from_spki->Fingerprint(), lab.ImportedFingerprint("id.pkcs8", "PKCS8").fingerprint);
    EXPECT_EQ(from_spki->bits, want.bits);
    EXPECT_EQ(from_spki->type, key->type);
    EXPECT_EQ(from_spki->comment, "");
  }
  if (spec.label == "RSA") {
    const std::string pkcs1 = lab.Capture("ssh-keygen -e -m PEM -f id.pub");
    ASSERT_THAT(pkcs1, HasSubstr("-----BEGIN RSA PUBLIC KEY-----"));
    lab.Write("id.pkcs1", pkcs1);
    auto from_pkcs1 = ParsePublicKey(pkcs1);
    ASSERT_TRUE(from_pkcs1.has_value()) << from_pkcs1.error().message;
    EXPECT_EQ(from_pkcs1->Fingerprint(), want.fingerprint);
    EXPECT_EQ(from_pkcs1->Fingerprint(), lab.ImportedFingerprint("id.pkcs1", "PEM").fingerprint);
    EXPECT_EQ(from_pkcs1->blob, key->blob);
  }
}

INSTANTIATE_TEST_SUITE_P(AllTypes, SshKeygenAgreement,
                         ::testing::Values(KeySpec{"ed25519", "-t ed25519", 256, "ED25519"},
                                           KeySpec{"ecdsa256", "-t ecdsa -b 256", 256, "ECDSA"},
                                           KeySpec{"ecdsa384", "-t ecdsa -b 384", 384, "ECDSA"},
                                           KeySpec{"ecdsa521", "-t ecdsa -b 521", 521, "ECDSA"},
                                           KeySpec{"rsa2048", "-t rsa -b 2048", 2048, "RSA"},
                                           KeySpec{"rsa4096", "-t rsa -b 4096", 4096, "RSA"}),
                         [](const ::testing::TestParamInfo<KeySpec>& info) {
                           return info.param.name;
                         });

// Security-key types cannot be generated without a token, so their blobs are built by hand
// (OpenSSH PROTOCOL.u2f) from real keys and checked against `ssh-keygen -l`.
TEST(SshKeyParse, SecurityKeyTypesMatchSshKeygen) {
  ASSERT_KEYGEN();
  KeyLab lab;
  ASSERT_TRUE(lab.Generate("ed", "-t ed25519"));
  ASSERT_TRUE(lab.Generate("ec", "-t ecdsa -b 256"));

  const std::string ed_blob = Blob(lab.Read("ed.pub"));
  const std::string ec_blob = Blob(lab.Read("ec.pub"));
  internal::WireReader ed_reader(ed_blob);
  ed_reader.ReadString();
  const std::string ed_pk(*ed_reader.ReadString());
  internal::WireReader ec_reader(ec_blob);
  ec_reader.ReadString();
  ec_reader.ReadString();
  const std::string ec_point(*ec_reader.ReadString());

  struct Case {
    std::string type;
    std::string blob;
    std::string label;
  };
  const std::vector<Case> cases = {
      {"sk-ssh-ed25519@openssh.com", Wire({"sk-ssh-ed25519@openssh.com", ed_pk, "ssh:"}),
       "ED25519-SK"},
      {"sk-ecdsa-sha2-nistp256@openssh.com",
       Wire({"sk-ecdsa-sha2-nistp256@openssh.com", "nistp256", ec_point, "ssh:"}), "ECDSA-SK"},
  };
  for (const auto& c : cases) {
    const std::string line = LineOf(c.type, c.blob, "bob@example.test");
    lab.Write("sk.pub", line);
    const KeygenFingerprint want = lab.Fingerprint("sk.pub");
    ASSERT_THAT(want.fingerprint, HasSubstr("SHA256:")) << c.type;
    auto key = ParsePublicKey(line);
    ASSERT_TRUE(key.has_value()) << c.type << ": " << key.error().message;
    EXPECT_EQ(key->type, c.type);
    EXPECT_EQ(key->Fingerprint(), want.fingerprint);
    EXPECT_EQ(key->bits, want.bits);
    EXPECT_EQ(key->bits, 256);
    EXPECT_EQ(key->TypeLabel(), want.label);
    EXPECT_EQ(key->TypeLabel(), c.label);
    EXPECT_EQ(key->comment, "bob@example.test");
    EXPECT_EQ(key->Line(), line);

    // Without the application string the blob is incomplete.
    std::string cut = c.blob.substr(0, c.blob.size() - 8);
    EXPECT_KEY_ERROR(ParsePublicKey(LineOf(c.type, cut)), "invalid_public_key");
  }
}

// ---------------------------------------------------------------------------------------------
// Cases from docs/cases.md.

TEST(SshKeyParse, C01_crlf_and_bom) {
  ASSERT_KEYGEN();
  KeyLab lab;
  ASSERT_TRUE(lab.Generate("id", "-t ed25519"));
  const std::string pub = lab.Read("id.pub");  // "ssh-ed25519 AAAA... alice@example.test\n"
  const std::string fp = lab.Fingerprint("id.pub").fingerprint;
  std::string bare = pub.substr(0, pub.size() - 1);
  const std::string b64 = Base64Field(bare);

  const std::vector<std::string> variants = {
      bare,
      bare + "\r\n",
      bare + "\r",
      "\xEF\xBB\xBF" + bare + "\r\n",
      "\xEF\xBB\xBF" + bare,
      "\r\n\r\n  " + bare + "  \r\n\r\n",
      "\n\n\t" + bare + "\t\n\n",
      "ssh-ed25519\t" + b64 + "\talice@example.test\r\n",
      "ssh-ed25519  \t " + b64 + "   alice@example.test   ",
      "\r\r" + bare + "\r\r",
      "# my laptop\r\n" + bare + "\r\n",
  };
  for (const auto& text : variants) {
    auto key = ParsePublicKey(text);
    ASSERT_TRUE(key.has_value()) << key.error().api_code << " for variant of size " << text.size();
    EXPECT_EQ(key->Fingerprint(), fp);
    EXPECT_EQ(key->comment, "alice@example.test");
    EXPECT_EQ(key->Line(), pub);
    EXPECT_EQ(key->Line().find('\r'), std::string::npos);
  }

  // A CRLF file is read the same by ssh-keygen (the reference) and by us.
  lab.Write("crlf.pub", bare + "\r\n");
  EXPECT_EQ(lab.Fingerprint("crlf.pub").fingerprint, fp);

  // UTF-16 (as Notepad saves "Unicode") is refused with a hint to save as UTF-8.
  for (const auto& text : {ToUtf16(pub, true, true), ToUtf16(pub, false, true),
                           ToUtf16(pub, true, false), ToUtf16(bare + "\r\n", true, true)}) {
    auto key = ParsePublicKey(text);
    EXPECT_KEY_ERROR(key, "invalid_encoding");
    EXPECT_THAT(key.error().message, HasSubstr("UTF-8"));
  }
  // A UTF-16 BOM alone is an encoding error too, not an empty key.
  EXPECT_KEY_ERROR(ParsePublicKey("\xFF\xFE"), "invalid_encoding");
}

TEST(SshKeyParse, C02_rfc4716_and_pem) {
  ASSERT_KEYGEN();
  KeyLab lab;
  ASSERT_TRUE(lab.Generate("rsa", "-t rsa -b 2048"));
  ASSERT_TRUE(lab.Generate("ed", "-t ed25519"));
  ASSERT_TRUE(lab.Generate("ec", "-t ecdsa -b 521"));
  const std::string rsa_fp = lab.Fingerprint("rsa.pub").fingerprint;
  const std::string ed_fp = lab.Fingerprint("ed.pub").fingerprint;
  const std::string ec_fp = lab.Fingerprint("ec.pub").fingerprint;

  // RFC 4716 as ssh-keygen -e writes it, with CRLF line ends as a Windows editor saves it.
  {
    std::string block = lab.Capture("ssh-keygen -e -f rsa.pub");
    std::string crlf;
    for (char c : block) crlf += (c == '\n') ? std::string("\r\n") : std::string(1, c);
    auto key = ParsePublicKey(crlf);
    ASSERT_TRUE(key.has_value()) << key.error().message;
    EXPECT_EQ(key->Fingerprint(), rsa_fp);
    EXPECT_EQ(key->comment,
              "2048-bit RSA, converted by " + key->comment.substr(key->comment.find("by ") + 3));
    EXPECT_EQ(key->Line().find('"'), std::string::npos);
    EXPECT_EQ(key->Line().back(), '\n');
  }

  // RFC 4716 as PuTTYgen shows it (64-column folding, quoted Comment).
  if (HaveProgram("puttygen")) {
    const std::string block = lab.Capture(
        "puttygen rsa -O public -C 'rsa-key-20240101 laptop' -o rsa.ssh2 && cat rsa.ssh2");
    ASSERT_THAT(block, HasSubstr("---- BEGIN SSH2 PUBLIC KEY ----"));
    auto key = ParsePublicKey(block);
    ASSERT_TRUE(key.has_value()) << key.error().message;
    EXPECT_EQ(key->Fingerprint(), rsa_fp);
    EXPECT_EQ(key->Fingerprint(), lab.ImportedFingerprint("rsa.ssh2", "RFC4716").fingerprint);
    EXPECT_EQ(key->comment, "rsa-key-20240101 laptop");
  }

  // Hand-folded RFC 4716: a Comment header continued with '\', other headers, short lines,
  // leading whitespace; ssh-keygen -i reads it to the same key.
  {
    const std::string b64 = Base64Field(lab.Read("ed.pub"));
    std::string block =
        "\n---- BEGIN SSH2 PUBLIC KEY ----\n"
        "Subject: alice\n"
        "x-Private-Tag: something: with colons\n"
        "Comment: \"work laptop, \\\n"
        "second half\"\n";
    for (size_t i = 0; i < b64.size(); i += 20) block += b64.substr(i, 20) + "\n";
    block += "---- END SSH2 PUBLIC KEY ----\n\n";
    lab.Write("ed.folded", block);
    auto key = ParsePublicKey(block);
    ASSERT_TRUE(key.has_value()) << key.error().message;
    EXPECT_EQ(key->Fingerprint(), ed_fp);
    EXPECT_EQ(key->Fingerprint(), lab.ImportedFingerprint("ed.folded", "RFC4716").fingerprint);
    EXPECT_EQ(key->comment, "work laptop, second half");
    EXPECT_EQ(key->Line(), "ssh-ed25519 " + b64 + " work laptop, second half\n");
    auto with_note = ParsePublicKey("# from PuTTYgen\r\n" + block);
    ASSERT_TRUE(with_note.has_value());
    EXPECT_EQ(*with_note, *key);

    // Missing END line, a body that is cut off, and a second block.
    const std::string no_end = block.substr(0, block.find("---- END"));
    EXPECT_KEY_ERROR(ParsePublicKey(no_end), "invalid_public_key");
    std::string cut = block;
    cut.erase(cut.find("---- END") - 10, 9);
    EXPECT_KEY_ERROR(ParsePublicKey(cut), "invalid_public_key");
    EXPECT_KEY_ERROR(ParsePublicKey(block + block), "multiple_keys");
  }

  // PEM SubjectPublicKeyInfo (RSA and ECDSA) and PKCS#1 (RSA), checked against ssh-keygen -i.
  {
    lab.Write("rsa.spki", lab.Capture("ssh-keygen -e -m PKCS8 -f rsa.pub"));
    lab.Write("rsa.pkcs1", lab.Capture("ssh-keygen -e -m PEM -f rsa.pub"));
    lab.Write("ec.spki", lab.Capture("ssh-keygen -e -m PKCS8 -f ec.pub"));
    struct PemCase {
      std::string file, format, want;
    };
    for (const auto& c : std::vector<PemCase>{{"rsa.spki", "PKCS8", rsa_fp},
                                              {"rsa.pkcs1", "PEM", rsa_fp},
                                              {"ec.spki", "PKCS8", ec_fp}}) {
      const std::string text = lab.Read(c.file);
      auto key = ParsePublicKey(text);
      ASSERT_TRUE(key.has_value()) << c.file << ": " << key.error().message;
      EXPECT_EQ(key->Fingerprint(), c.want) << c.file;
      EXPECT_EQ(key->Fingerprint(), lab.ImportedFingerprint(c.file, c.format).fingerprint);
      // Surrounding blanks and CRLF are tolerated here too.
      std::string crlf = "\r\n";
      for (char ch : text) crlf += (ch == '\n') ? std::string("\r\n") : std::string(1, ch);
      auto again = ParsePublicKey(crlf + "  \r\n");
      ASSERT_TRUE(again.has_value()) << c.file;
      EXPECT_EQ(again->Fingerprint(), c.want);
    }
  }

  // Ed25519 SubjectPublicKeyInfo (RFC 8410), which this ssh-keygen cannot export: built by hand.
  {
    const std::string blob = Blob(lab.Read("ed.pub"));
    internal::WireReader reader(blob);
    reader.ReadString();
    const std::string pk(*reader.ReadString());
    const std::string der =
        std::string("\x30\x2a\x30\x05\x06\x03\x2b\x65\x70\x03\x21\x00", 12) + pk;
    auto key = ParsePublicKey(Pem("PUBLIC KEY", der));
    ASSERT_TRUE(key.has_value()) << key.error().message;
    EXPECT_EQ(key->type, "ssh-ed25519");
    EXPECT_EQ(key->Fingerprint(), ed_fp);

    // Trailing bytes after the DER, a damaged DER, a mismatched END label.
    EXPECT_KEY_ERROR(ParsePublicKey(Pem("PUBLIC KEY", der + "x")), "invalid_public_key");
    EXPECT_KEY_ERROR(ParsePublicKey(Pem("PUBLIC KEY", der.substr(0, 20))), "invalid_public_key");
    std::string wrong_end = Pem("PUBLIC KEY", der);
    wrong_end.replace(wrong_end.find("-----END PUBLIC"), 15, "-----END RSA PUBLIC");
    EXPECT_KEY_ERROR(ParsePublicKey(wrong_end), "invalid_public_key");
    EXPECT_KEY_ERROR(ParsePublicKey(Pem("CERTIFICATE", der)), "invalid_public_key");
  }
}

TEST(SshKeyParse, C03_private_key_refused) {
  ASSERT_KEYGEN();
  KeyLab lab;
  ASSERT_TRUE(lab.Generate("openssh", "-t ed25519"));
  ASSERT_TRUE(lab.Generate("openssh_rsa", "-t rsa -b 2048", "x", "correct horse"));
  ASSERT_TRUE(lab.Generate("pkcs1", "-t rsa -b 2048 -m PEM"));
  ASSERT_TRUE(lab.Generate("sec1", "-t ecdsa -b 256 -m PEM"));
  ASSERT_TRUE(lab.Generate("pkcs8", "-t rsa -b 2048 -m PKCS8"));
  ASSERT_TRUE(lab.Generate("pkcs8enc", "-t ecdsa -b 384 -m PKCS8", "x", "correct horse"));

  struct Case {
    std::string name;
    std::string text;
    std::string marker;  // what the file must start with, to know we test what we think
  };
  std::vector<Case> cases = {
      {"openssh", lab.Read("openssh"), "-----BEGIN OPENSSH PRIVATE KEY-----"},
      {"openssh_rsa", lab.Read("openssh_rsa"), "-----BEGIN OPENSSH PRIVATE KEY-----"},
      {"pkcs1", lab.Read("pkcs1"), "-----BEGIN RSA PRIVATE KEY-----"},
      {"sec1", lab.Read("sec1"), "-----BEGIN EC PRIVATE KEY-----"},
      {"pkcs8", lab.Read("pkcs8"), "-----BEGIN PRIVATE KEY-----"},
      {"pkcs8enc", lab.Read("pkcs8enc"), "-----BEGIN ENCRYPTED PRIVATE KEY-----"},
  };
  if (lab.Generate("dsa", "-t dsa -m PEM")) {
    cases.push_back({"dsa", lab.Read("dsa"), "-----BEGIN DSA PRIVATE KEY-----"});
  }
  if (HaveProgram("puttygen")) {
    for (const std::string name : {"openssh", "pkcs1"}) {
      const std::string ppk = lab.Capture("puttygen " + name + " -O private -o " + name +
                                          ".ppk && cat " + name + ".ppk");
      cases.push_back({name + ".ppk", ppk, "PuTTY-User-Key-File-"});
    }
  } else {
    std::cerr << "puttygen not found: skipping the PuTTY part of C03\n";
  }

  const std::string pub = lab.Read("openssh.pub");
  for (const auto& c : cases) {
    ASSERT_TRUE(c.text.starts_with(c.marker)) << c.name;
    const std::vector<std::string> inputs = {
        c.text,
        "\xEF\xBB\xBF" + c.text,
        pub + c.text,           // a public key with the private one after it
        c.text.substr(0, 200),  // only the start of it
        ToUtf16(c.text, true, true),
        std::string(20000, 'A') + "\n" + c.text,  // over the size limit: still refused as private
    };
    for (const auto& input : inputs) {
      auto r = ParsePublicKey(input);
      EXPECT_KEY_ERROR(r, "private_key_pasted");
      EXPECT_THAT(r.error().message, HasSubstr("PRIVATE"));
      EXPECT_THAT(r.error().message, HasSubstr("exposed"));
      EXPECT_THAT(r.error().message, HasSubstr(".pub"));
      const std::string details = r.error().details.dump();
      for (const auto& line : NonEmptyLines(c.text)) {
        if (line.size() < 8) continue;
        EXPECT_THAT(r.error().message, Not(HasSubstr(line))) << c.name;
        EXPECT_THAT(details, Not(HasSubstr(line))) << c.name;
      }
    }
  }

  // The body of an OpenSSH private key without its armour lines.
  const auto body = NonEmptyLines(lab.Read("openssh"));
  ASSERT_GE(body.size(), 3u);
  EXPECT_KEY_ERROR(ParsePublicKey(body[1] + "\n" + body[2]), "private_key_pasted");
}

TEST(SshKeyParse, C04_two_keys_glued) {
  ASSERT_KEYGEN();
  KeyLab lab;
  ASSERT_TRUE(lab.Generate("ed", "-t ed25519", "me@host"));
  ASSERT_TRUE(lab.Generate("rsa", "-t rsa -b 2048", "you@host"));
  ASSERT_TRUE(lab.Generate("nocomment", "-t ecdsa -b 256", ""));
  std::string ed = lab.Read("ed.pub");
  std::string rsa = lab.Read("rsa.pub");
  std::string bare = lab.Read("nocomment.pub");
  ed.pop_back();
  bare = bare.substr(0, bare.find_last_not_of(" \n") + 1);  // ssh-keygen -C '' leaves "b64 \n"
  const std::string ed_b64 = Base64Field(ed);

  const std::vector<std::string> glued = {
      ed + rsa,        // "... me@hostssh-rsa AAAA... you@host\n"
      bare + rsa,      // "...AAAAxyz=ssh-rsa AAAA..." (no comment)
      ed + " " + rsa,  // two keys on one line
      ed + "\t" + rsa,
      ed + "\n" + rsa,  // two lines
      ed + "\r\n" + rsa + "\r\n",
      "\n" + rsa + "\n\n" + ed + "\n",
      "ssh-ed25519 " + ed_b64 + "ssh-dss AAAAB3NzaC1kc3MAAACB",  // glued to a DSA key
      ed + "\n" + lab.Capture("ssh-keygen -e -f rsa.pub"),       // a line, then an RFC 4716 block
      ed + "ssh-ed25519-cert-v01@openssh.com AAAAIHNzaC1lZDI1NTE5LWNlcnQt",
      ed + "ssh-rsa\x0b" + rsa,  // a control character that would become a space in Line()
      "---- BEGIN SSH2 PUBLIC KEY ----\nComment: \"x ssh-rsa " + Base64Field(rsa) + "\"\n" +
          ed_b64 + "\n---- END SSH2 PUBLIC KEY ----\n",
  };
  for (const auto& text : glued) {
    auto r = ParsePublicKey(text);
    EXPECT_KEY_ERROR(r, "multiple_keys");
    EXPECT_THAT(r.error().message, HasSubstr("one key at a time"));
  }

  // Every line we write ends with exactly one "\n", so appending never glues keys.
  for (const std::string& input : {ed, ed + "\n", ed + "\n\n\n", bare, bare + "\r\n"}) {
    auto key = ParsePublicKey(input);
    ASSERT_TRUE(key.has_value());
    const std::string line = key->Line();
    ASSERT_FALSE(line.empty());
    EXPECT_EQ(line.back(), '\n');
    EXPECT_EQ(line.find('\n'), line.size() - 1);
  }
  auto no_comment = ParsePublicKey(bare);
  ASSERT_TRUE(no_comment.has_value());
  EXPECT_EQ(no_comment->comment, "");
  EXPECT_EQ(no_comment->Line(), bare + "\n");
  // A comment set by hand with a line break still yields one line.
  PublicKey edited = *no_comment;
  edited.comment = "two\nlines\r";
  EXPECT_EQ(edited.Line(), bare + " two lines\n");
}

// ---------------------------------------------------------------------------------------------
// Refusals.

TEST(SshKeyParse, DsaRefused) {
  ASSERT_KEYGEN();
  KeyLab lab;
  std::string dsa_line;
  std::string dsa_spki;
  if (lab.Generate("dsa", "-t dsa")) {
    dsa_line = lab.Read("dsa.pub");
    dsa_spki = lab.Capture("ssh-keygen -e -m PKCS8 -f dsa.pub");
  } else {
    // This OpenSSH no longer makes DSA keys: a hand-built ssh-dss blob (p, q, g, y).
    dsa_line = LineOf("ssh-dss",
                      Wire({"ssh-dss", std::string(129, '\x11'), std::string(21, '\x22'),
                            std::string(128, '\x33'), std::string(128, '\x44')}),
                      "old@host");
  }
  auto r = ParsePublicKey(dsa_line);
  EXPECT_KEY_ERROR(r, "unsupported_key_type");
  EXPECT_THAT(r.error().message, HasSubstr("DSA"));
  EXPECT_THAT(r.error().message, HasSubstr("ssh-keygen -t ed25519"));
  if (!dsa_spki.empty()) {
    ASSERT_THAT(dsa_spki, HasSubstr("-----BEGIN PUBLIC KEY-----"));
    auto p = ParsePublicKey(dsa_spki);
    EXPECT_KEY_ERROR(p, "unsupported_key_type");
    EXPECT_THAT(p.error().message, HasSubstr("DSA"));
    const std::string rfc4716 = lab.Capture("ssh-keygen -e -f dsa.pub");
    EXPECT_KEY_ERROR(ParsePublicKey(rfc4716), "unsupported_key_type");
  }
}

TEST(SshKeyParse, Rsa1024IsWeak) {
  ASSERT_KEYGEN();
  KeyLab lab;
  ASSERT_TRUE(lab.Generate("rsa", "-t rsa -b 1024"));
  auto r = ParsePublicKey(lab.Read("rsa.pub"));
  EXPECT_KEY_ERROR(r, "weak_key");
  EXPECT_THAT(r.error().message, HasSubstr("2048"));
  EXPECT_KEY_ERROR(ParsePublicKey(lab.Capture("ssh-keygen -e -m PKCS8 -f rsa.pub")), "weak_key");
  EXPECT_KEY_ERROR(ParsePublicKey(lab.Capture("ssh-keygen -e -m PEM -f rsa.pub")), "weak_key");
  EXPECT_KEY_ERROR(ParsePublicKey(lab.Capture("ssh-keygen -e -f rsa.pub")), "weak_key");
}

TEST(SshKeyParse, TruncatedBase64IsInvalid) {
  ASSERT_KEYGEN();
  KeyLab lab;
  ASSERT_TRUE(lab.Generate("ed", "-t ed25519"));
  ASSERT_TRUE(lab.Generate("rsa", "-t rsa -b 2048"));
  for (const std::string name : {"ed.pub", "rsa.pub"}) {
    const std::string line = lab.Read(name);
    const std::string type = line.substr(0, line.find(' '));
    const std::string b64 = Base64Field(line);
    // Every cut of the base64, with and without the comment after it.
    for (size_t len = 1; len < b64.size() - 2; len += (len < 100 ? 1 : 7)) {
      for (const std::string& suffix : {std::string(), std::string(" alice@example.test")}) {
        auto r = ParsePublicKey(type + " " + b64.substr(0, len) + suffix);
        EXPECT_KEY_ERROR(r, "invalid_public_key");
      }
    }
    EXPECT_KEY_ERROR(ParsePublicKey(type), "invalid_public_key");
    EXPECT_KEY_ERROR(ParsePublicKey(type + " " + b64.substr(0, 40) + "!!" + b64.substr(42)),
                     "invalid_public_key");
  }
}

TEST(SshKeyParse, TypeAndBlobMustAgree) {
  ASSERT_KEYGEN();
  KeyLab lab;
  ASSERT_TRUE(lab.Generate("ed", "-t ed25519"));
  ASSERT_TRUE(lab.Generate("ec", "-t ecdsa -b 256"));
  const std::string ed_b64 = Base64Field(lab.Read("ed.pub"));
  const std::string ec_b64 = Base64Field(lab.Read("ec.pub"));
  EXPECT_KEY_ERROR(ParsePublicKey("ssh-rsa " + ed_b64 + " x"), "key_type_mismatch");
  EXPECT_KEY_ERROR(ParsePublicKey("ecdsa-sha2-nistp384 " + ec_b64), "key_type_mismatch");
  EXPECT_KEY_ERROR(ParsePublicKey("ssh-ed25519 " + ec_b64), "key_type_mismatch");
  EXPECT_KEY_ERROR(ParsePublicKey("sk-ssh-ed25519@openssh.com " + ed_b64), "key_type_mismatch");

  // The curve inside an ECDSA blob must match its type too.
  const std::string ec_blob = *core::Base64Decode(ec_b64);
  internal::WireReader reader(ec_blob);
  reader.ReadString();
  reader.ReadString();
  const std::string point(*reader.ReadString());
  EXPECT_KEY_ERROR(ParsePublicKey(LineOf("ecdsa-sha2-nistp256",
                                         Wire({"ecdsa-sha2-nistp256", "nistp384", point}))),
                   "key_type_mismatch");
}

TEST(SshKeyParse, HandBuiltBlobsAreCheckedField_by_field) {
  const std::string pk(32, '\x07');
  // The P-256 base point G (SEC 2 §2.4.2): a point on the curve.
  const std::string point =
      "\x04" + *core::Base64Decode(
                   "axfR8uEsQkf4vOblY6RA8ncDfYEt6zOg9KE5RdiYwpZP40Li/hp/m47n60p8D54W"
                   "K84zV2sxXs7LtkBoN79R9Q==");
  const std::string off_curve = "\x04" + std::string(64, '\x09');
  std::string n(256, '\xc5');  // 2048-bit odd modulus
  n.back() = '\x01';
  const std::string n_mpint = std::string(1, '\0') + n;
  const std::string e_mpint("\x01\x00\x01", 3);

  auto ok = [](const std::string& type, const std::string& blob) {
    return ParsePublicKey(LineOf(type, blob));
  };
  ASSERT_TRUE(ok("ssh-ed25519", Wire({"ssh-ed25519", pk})).has_value());
  ASSERT_TRUE(ok("ecdsa-sha2-nistp256", Wire({"ecdsa-sha2-nistp256", "nistp256", point})));
  auto rsa = ok("ssh-rsa", Wire({"ssh-rsa", e_mpint, n_mpint}));
  ASSERT_TRUE(rsa.has_value()) << rsa.error().message;
  EXPECT_EQ(rsa->bits, 2048);

  const std::vector<std::pair<std::string, std::string>> damaged = {
      {"ssh-ed25519", Wire({"ssh-ed25519", pk.substr(1)})},
      {"ssh-ed25519", Wire({"ssh-ed25519", pk + "x"})},
      {"ssh-ed25519", Wire({"ssh-ed25519", pk}) + "trailing"},
      {"ssh-ed25519", Wire({"ssh-ed25519"})},
      {"ssh-ed25519", Wire({"ssh-ed25519", pk, ""})},
      {"ssh-ed25519", Wire({"ssh-ed25519"}) + std::string("\xff\xff\xff\xff", 4) + pk},
      {"ecdsa-sha2-nistp256", Wire({"ecdsa-sha2-nistp256", "nistp256", "\x02" + point.substr(1)})},
      {"ecdsa-sha2-nistp256", Wire({"ecdsa-sha2-nistp256", "nistp256", point.substr(0, 33)})},
      {"ecdsa-sha2-nistp256", Wire({"ecdsa-sha2-nistp256", "nistp256"})},
      {"ecdsa-sha2-nistp256", Wire({"ecdsa-sha2-nistp256", "nistp256", off_curve})},
      {"ssh-rsa", Wire({"ssh-rsa", e_mpint})},
      {"ssh-rsa", Wire({"ssh-rsa", e_mpint, n})},                                // negative n
      {"ssh-rsa", Wire({"ssh-rsa", e_mpint, std::string(2, '\0') + n})},         // non-minimal
      {"ssh-rsa", Wire({"ssh-rsa", "", n_mpint})},                               // e = 0
      {"ssh-rsa", Wire({"ssh-rsa", "\x01", n_mpint})},                           // e = 1
      {"ssh-rsa", Wire({"ssh-rsa", "\x04", n_mpint})},                           // even e
      {"ssh-rsa", Wire({"ssh-rsa", std::string(9, '\x03'), n_mpint})},           // e over 64 bits
      {"ssh-rsa", Wire({"ssh-rsa", e_mpint, n_mpint.substr(0, 256) + "\x02"})},  // even n
      {"ssh-rsa", Wire({"ssh-rsa", e_mpint, n_mpint, "x"})},
  };
  for (const auto& [type, blob] : damaged) {
    EXPECT_KEY_ERROR(ok(type, blob), "invalid_public_key");
  }
  // 1024-bit and over-16384-bit moduli.
  EXPECT_KEY_ERROR(ok("ssh-rsa", Wire({"ssh-rsa", e_mpint, n_mpint.substr(0, 129)})), "weak_key");
  EXPECT_KEY_ERROR(
      ok("ssh-rsa", Wire({"ssh-rsa", e_mpint, std::string(1, '\0') + std::string(2049, '\xc5')})),
      "invalid_public_key");
}

TEST(SshKeyParse, OtherTypesAndNonKeysAreRefused) {
  const std::string pk(32, '\x07');
  const std::string ed = LineOf("ssh-ed25519", Wire({"ssh-ed25519", pk}), "x");
  // authorized_keys options in front of the type (and known_hosts-style host names).
  for (const std::string prefix :
       {"from=\"10.0.0.1\" ", "no-pty,command=\"echo hi there\" ", "restrict ", "host.test "}) {
    auto r = ParsePublicKey(prefix + ed);
    EXPECT_KEY_ERROR(r, "invalid_public_key");
    EXPECT_THAT(r.error().message, HasSubstr("key type"));
  }
  EXPECT_KEY_ERROR(ParsePublicKey(LineOf("ssh-foo", Wire({"ssh-foo", pk}))),
                   "unsupported_key_type");
  EXPECT_KEY_ERROR(ParsePublicKey(LineOf("ssh-ed448", Wire({"ssh-ed448", pk}))),
                   "unsupported_key_type");
  EXPECT_KEY_ERROR(ParsePublicKey(LineOf("ssh-ed25519-cert-v01@openssh.com",
                                         Wire({"ssh-ed25519-cert-v01@openssh.com", "nonce", pk}))),
                   "unsupported_key_type");
  // An RFC 4716 block holding an unknown type.
  EXPECT_KEY_ERROR(ParsePublicKey("---- BEGIN SSH2 PUBLIC KEY ----\n" +
                                  core::Base64Encode(Wire({"ssh-foo", pk})) +
                                  "\n---- END SSH2 PUBLIC KEY ----\n"),
                   "unsupported_key_type");

  for (const std::string& text :
       {std::string(), std::string("   \r\n\t\n"), std::string("\xEF\xBB\xBF"),
        std::string("# only a comment\n"), std::string("hello world"),
        std::string("AAAAC3NzaC1lZDI1NTE5AAAAIAcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcH"),
        std::string("ssh-ed25519"),
        std::string("ssh-ed25519\n") + core::Base64Encode(Wire({"ssh-ed25519", pk})),
        std::string("---- BEGIN SSH2 PUBLIC KEY ---\n"), std::string("-----BEGIN FOO-----\n")}) {
    EXPECT_KEY_ERROR(ParsePublicKey(text), "invalid_public_key");
  }
}

TEST(SshKeyParse, OneMebibyteOfGarbageIsRefusedQuickly) {
  std::mt19937 rng(42);
  std::string garbage(1 << 20, '\0');
  for (auto& c : garbage) c = static_cast<char>(rng() % 255 + 1);  // no NUL bytes
  auto r = ParsePublicKey(garbage);
  EXPECT_KEY_ERROR(r, "invalid_public_key");
  EXPECT_THAT(r.error().message, HasSubstr("too long"));
  EXPECT_KEY_ERROR(ParsePublicKey(std::string(1 << 20, 'A')), "invalid_public_key");
  EXPECT_KEY_ERROR(ParsePublicKey("ssh-ed25519 " + std::string(1 << 20, 'A')),
                   "invalid_public_key");
  EXPECT_KEY_ERROR(ParsePublicKey(std::string(1 << 20, '\n')), "invalid_public_key");
  // Just at the limit: long, but read (and refused for what it is).
  EXPECT_KEY_ERROR(ParsePublicKey("ssh-ed25519 " + std::string(kMaxPublicKeyInputBytes - 12, 'A')),
                   "invalid_public_key");
  std::string with_nul = garbage;
  with_nul[1000] = '\0';
  EXPECT_KEY_ERROR(ParsePublicKey(with_nul), "invalid_public_key");  // too long comes first
}

TEST(SshKeyParse, CommentsAreMadeSafe) {
  const std::string pk(32, '\x07');
  const std::string start = "ssh-ed25519 " + core::Base64Encode(Wire({"ssh-ed25519", pk}));
  struct Case {
    std::string comment, want;
  };
  for (const auto& c : std::vector<Case>{
           {"alice@example.test", "alice@example.test"},
           {"  spaced   out  ", "spaced   out"},
           {"bell\x07here", "bell here"},
           {"caf\xC3\xA9 \xE2\x9C\x93", "caf\xC3\xA9 \xE2\x9C\x93"},  // valid UTF-8 kept
           {"latin1 caf\xE9", "latin1 caf?"},
           {"overlong \xC0\xAF", "overlong ??"},
           {"surrogate \xED\xA0\x80", "surrogate ???"},
           {"cut \xE2\x9C", "cut ??"},
           // Bidi overrides and isolates, line separators and C1 controls (NEL) are replaced like
           // the C0 controls (core::IsUnsafeTextCodePoint).
           {"evil \u202E txet", "evil   txet"},
           {"iso\u2066late\u2069", "iso late"},
           {"line\u2028sep\u2029para", "line sep para"},
           {"next\u0085line", "next line"},
           // The Arabic letter mark (a Bidi_Control) and characters that show as nothing.
           {"com\u061Cment", "com ment"},
           {"soft\u00ADhyphen\uFEFFbom", "soft hyphen bom"},
           {"fill\u3164er\U000E0041tag", "fill er tag"},
       }) {
    auto key = ParsePublicKey(start + " " + c.comment);
    ASSERT_TRUE(key.has_value());
    EXPECT_EQ(key->comment, c.want);
    EXPECT_NO_THROW(nlohmann::json(key->Line()).dump());
  }
}

TEST(SshKeyParse, ErrorsNeverEchoTheInput) {
  const std::string secret = "ZQXJ9secretish7TOKEN";
  const std::string pk(32, '\x07');
  const std::string b64 = core::Base64Encode(Wire({"ssh-ed25519", pk}));
  for (const std::string& text :
       {secret, "ssh-" + secret + " AAAA", "ssh-ed25519 " + secret, secret + " ssh-ed25519 " + b64,
        "ssh-ed25519 " + b64 + " " + secret + "ssh-rsa AAAAB3Nza",
        "---- BEGIN SSH2 PUBLIC KEY ----\nComment: " + secret + "\n" + secret,
        "-----BEGIN " + secret + "-----\n", ToUtf16(secret, true, true)}) {
    auto r = ParsePublicKey(text);
    ASSERT_FALSE(r.has_value());
    EXPECT_THAT(r.error().message, Not(HasSubstr(secret)));
    EXPECT_THAT(r.error().message, Not(HasSubstr("ZQXJ9")));
    EXPECT_THAT(r.error().details.dump(), Not(HasSubstr("ZQXJ9")));
  }
}

}  // namespace
}  // namespace gpuwerk::keys

#include "mail/message.h"

#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "core/encoding.h"

namespace gpuwerk::mail {
namespace {

std::vector<std::string> Lines(const std::string& message) {
  std::vector<std::string> lines;
  size_t start = 0;
  while (start < message.size()) {
    const size_t end = message.find("\r\n", start);
    if (end == std::string::npos) {
      lines.push_back(message.substr(start));
      break;
    }
    lines.push_back(message.substr(start, end - start));
    start = end + 2;
  }
  return lines;
}

/// The unfolded value of header `name` in the header section, "" when missing.
std::string HeaderValue(const std::string& message, const std::string& name) {
  const std::string head = message.substr(0, message.find("\r\n\r\n") + 2);
  const std::string prefix = "\r\n" + name + ": ";
  size_t pos = ("\r\n" + head).find(prefix);
  if (pos == std::string::npos) return "";
  std::string value;
  const std::string all = "\r\n" + head;
  size_t i = pos + prefix.size();
  while (i < all.size()) {
    const size_t end = all.find("\r\n", i);
    value += all.substr(i, end - i);
    i = end + 2;
    if (i >= all.size() || (all[i] != ' ' && all[i] != '\t')) break;
  }
  return value;
}

/// Decodes a sequence of RFC 2047 B encoded-words separated by white space.
std::string DecodeWords(const std::string& value) {
  std::string out;
  size_t pos = 0;
  while ((pos = value.find("=?UTF-8?B?", pos)) != std::string::npos) {
    const size_t start = pos + 10;
    const size_t end = value.find("?=", start);
    auto decoded = core::Base64Decode(value.substr(start, end - start));
    EXPECT_TRUE(decoded.has_value());
    out += decoded.value_or("");
    pos = end + 2;
  }
  return out;
}

/// The decoded body of the part with the given Content-Type (base64 lines up to the next
/// boundary or the end).
std::string PartBody(const std::string& message, const std::string& content_type) {
  const size_t type = message.find("Content-Type: " + content_type);
  if (type == std::string::npos) return "<missing>";
  const size_t body = message.find("\r\n\r\n", type) + 4;
  std::string b64;
  for (const std::string& line : Lines(message.substr(body))) {
    if (line.empty() || line.starts_with("--")) break;
    b64 += line;
  }
  return core::Base64Decode(b64).value_or("<bad base64>");
}

Mail Sample() {
  return Mail{
      .to = "ada@example.com",
      .subject = "Your sign-in link",
      .text_body = "Hello,\nsign in: https://gpuwerk.example/auth/magic?t=abc\n",
      .html_body = "<p>Hello,</p>\n<p><a href=\"https://gpuwerk.example/\">sign in</a></p>"};
}

TEST(RenderMessageTest, HasTheHeadersAndBothPartsWithCrlfLines) {
  const std::string msg = RenderMessageWithId(Sample(), "gpuwerk <noreply@gpuwerk.example>",
                                              1'800'000'000, "m1@gpuwerk.example");
  EXPECT_EQ(HeaderValue(msg, "Date"), "Fri, 15 Jan 2027 08:00:00 +0000");
  EXPECT_EQ(HeaderValue(msg, "From"), "gpuwerk <noreply@gpuwerk.example>");
  EXPECT_EQ(HeaderValue(msg, "To"), "ada@example.com");
  EXPECT_EQ(HeaderValue(msg, "Subject"), "Your sign-in link");
  EXPECT_EQ(HeaderValue(msg, "Message-ID"), "<m1@gpuwerk.example>");
  EXPECT_EQ(HeaderValue(msg, "MIME-Version"), "1.0");
  EXPECT_EQ(HeaderValue(msg, "Auto-Submitted"), "auto-generated");
  EXPECT_EQ(HeaderValue(msg, "Content-Type"),
            "multipart/alternative; boundary=\"=_gpuwerk_alternative_part\"");
  EXPECT_NE(msg.find("\r\n--=_gpuwerk_alternative_part--\r\n"), std::string::npos);

  // Every line ends with CRLF (no bare CR or LF) and is at most 78 characters.
  for (size_t i = 0; i < msg.size(); ++i) {
    if (msg[i] == '\n') {
      ASSERT_GT(i, 0u);
      EXPECT_EQ(msg[i - 1], '\r') << "bare LF at " << i;
    }
    if (msg[i] == '\r') {
      EXPECT_EQ(msg[i + 1], '\n') << "bare CR at " << i;
    }
  }
  EXPECT_TRUE(msg.ends_with("\r\n"));
  for (const std::string& line : Lines(msg)) EXPECT_LE(line.size(), 78u) << line;

  EXPECT_EQ(PartBody(msg, "text/plain; charset=UTF-8"),
            "Hello,\r\nsign in: https://gpuwerk.example/auth/magic?t=abc\r\n");
  EXPECT_EQ(PartBody(msg, "text/html; charset=UTF-8"),
            "<p>Hello,</p>\r\n<p><a href=\"https://gpuwerk.example/\">sign in</a></p>");
  // Plain text precedes HTML (RFC 2046 §5.1.4: the preferred alternative comes last).
  EXPECT_LT(msg.find("text/plain"), msg.find("text/html"));
}

TEST(RenderMessageTest, Base64LinesAreAtMost76Characters) {
  Mail mail = Sample();
  mail.text_body = std::string(5000, 'x');
  const std::string msg = RenderMessageWithId(mail, "a@b.example", 0, "m@b.example");
  bool in_body = false;
  int full_lines = 0;
  for (const std::string& line : Lines(msg)) {
    if (line == "Content-Transfer-Encoding: base64") in_body = true;
    if (in_body && line.size() == 76) ++full_lines;
    if (in_body) {
      EXPECT_LE(line.size(), 76u) << line;
    }
  }
  EXPECT_GT(full_lines, 60);
  EXPECT_EQ(PartBody(msg, "text/plain; charset=UTF-8"), mail.text_body);
}

TEST(RenderMessageTest, EncodesNonAsciiSubjectAsUtf8EncodedWords) {
  Mail mail = Sample();
  mail.subject = "Grüße — dein Zugang ist bereit ✓";
  const std::string msg = RenderMessageWithId(mail, "a@b.example", 0, "m@b.example");
  const std::string value = HeaderValue(msg, "Subject");
  EXPECT_TRUE(value.starts_with("=?UTF-8?B?")) << value;
  EXPECT_EQ(DecodeWords(value), mail.subject);
}

TEST(RenderMessageTest, FoldsLongSubjectsWithoutChangingThem) {
  Mail mail = Sample();
  mail.subject = "Überall Ünïcödé: " + std::string(20, 'a') + " " + std::string(120, 'b') +
                 std::string("ä€𝄞").append(30, 'c');
  std::string msg = RenderMessageWithId(mail, "a@b.example", 0, "m@b.example");
  for (const std::string& line : Lines(msg)) EXPECT_LE(line.size(), 78u) << line;
  EXPECT_EQ(DecodeWords(HeaderValue(msg, "Subject")), mail.subject);

  mail.subject =
      "A plain ASCII subject that is long enough to need folding at one of its "
      "spaces, twice even, because it keeps on going and going";
  msg = RenderMessageWithId(mail, "a@b.example", 0, "m@b.example");
  for (const std::string& line : Lines(msg)) EXPECT_LE(line.size(), 78u) << line;
  // Unfolding (removing the CRLF before the folding space) gives the subject back.
  EXPECT_EQ(HeaderValue(msg, "Subject"), mail.subject);
}

TEST(RenderMessageTest, EncodesAsciiSubjectThatLooksLikeAnEncodedWord) {
  Mail mail = Sample();
  mail.subject = "literally =?UTF-8?B?eA==?=";
  const std::string msg = RenderMessageWithId(mail, "a@b.example", 0, "m@b.example");
  EXPECT_EQ(DecodeWords(HeaderValue(msg, "Subject")), mail.subject);
}

TEST(RenderMessageTest, NeverEmitsAnInjectedHeaderEvenUnvalidated) {
  Mail mail = Sample();
  mail.to = "ada@example.com\r\nBcc: victim@example.org";
  mail.subject = "hi\r\nBcc: victim@example.org\nX-Evil: 1\rX-Evil2: 2";
  const std::string msg = RenderMessageWithId(mail, "gw <a@b.example>\r\nX-From: 1", 0, "m@b");
  for (const std::string& line : Lines(msg)) {
    EXPECT_FALSE(line.starts_with("Bcc")) << line;
    EXPECT_FALSE(line.starts_with("X-")) << line;
  }
  EXPECT_EQ(msg.find("\r\n\r\n"), msg.find("\r\n\r\n--=_gpuwerk"));
}

TEST(RenderMessageTest, TextOnlyMailIsASinglePart) {
  Mail mail = Sample();
  mail.html_body.clear();
  const std::string msg = RenderMessageWithId(mail, "a@b.example", 0, "m@b.example");
  EXPECT_EQ(msg.find("multipart"), std::string::npos);
  EXPECT_EQ(HeaderValue(msg, "Content-Type"), "text/plain; charset=UTF-8");
  EXPECT_EQ(HeaderValue(msg, "Content-Transfer-Encoding"), "base64");
  EXPECT_EQ(PartBody(msg, "text/plain; charset=UTF-8"),
            "Hello,\r\nsign in: https://gpuwerk.example/auth/magic?t=abc\r\n");
}

TEST(RenderMessageTest, FormatsDisplayNames) {
  const Mail mail = Sample();
  EXPECT_EQ(HeaderValue(RenderMessageWithId(mail, "noreply@x.example", 0, "m@x"), "From"),
            "noreply@x.example");
  EXPECT_EQ(HeaderValue(RenderMessageWithId(mail, "Acme, Inc. <a@x.example>", 0, "m@x"), "From"),
            "\"Acme, Inc.\" <a@x.example>");
  EXPECT_EQ(HeaderValue(RenderMessageWithId(mail, "\"Acme \\\"GPU\\\"\" <a@x.example>", 0, "m@x"),
                        "From"),
            "\"Acme \\\"GPU\\\"\" <a@x.example>");
  const std::string from =
      HeaderValue(RenderMessageWithId(mail, "Grüße GmbH <a@x.example>", 0, "m@x"), "From");
  EXPECT_TRUE(from.starts_with("=?UTF-8?B?")) << from;
  EXPECT_TRUE(from.ends_with(" <a@x.example>")) << from;
  EXPECT_EQ(DecodeWords(from), "Grüße GmbH");
}

TEST(RenderMessageTest, MessageIdsAreRandomAndUseTheDomain) {
  const std::string a =
      HeaderValue(RenderMessage(Sample(), "a@b.example", "b.example", 7), "Message-ID");
  const std::string b =
      HeaderValue(RenderMessage(Sample(), "a@b.example", "b.example", 7), "Message-ID");
  EXPECT_NE(a, b);
  EXPECT_TRUE(a.starts_with("<7.")) << a;
  EXPECT_TRUE(a.ends_with("@b.example>")) << a;
  const std::string c =
      HeaderValue(RenderMessage(Sample(), "a@b.example", "bad>\r\ndomain", 7), "Message-ID");
  EXPECT_TRUE(c.ends_with("@baddomain>")) << c;
}

// The outbox gives each mail its id, so every attempt at one mail has one Message-ID (delivery is
// at-least-once: a recipient that gets a mail twice can tell).
TEST(RenderMessageTest, AGivenMessageIdIsKeptForEveryRendering) {
  Mail mail = Sample();
  mail.message_id = "out_abc123";
  const std::string a =
      HeaderValue(RenderMessage(mail, "a@b.example", "b.example", 7), "Message-ID");
  const std::string b =
      HeaderValue(RenderMessage(mail, "a@b.example", "b.example", 9), "Message-ID");
  EXPECT_EQ(a, "<out_abc123@b.example>");
  EXPECT_EQ(a, b);
  mail.message_id = "x\r\nBcc: evil@example";
  const std::string c =
      HeaderValue(RenderMessage(mail, "a@b.example", "b.example", 7), "Message-ID");
  EXPECT_EQ(c.find('\n'), std::string::npos) << c;
  EXPECT_EQ(c.find('\r'), std::string::npos) << c;
}

TEST(FormatRfc5322DateTest, FormatsUtcInTheFixedEnglishForm) {
  EXPECT_EQ(FormatRfc5322Date(0), "Thu, 01 Jan 1970 00:00:00 +0000");
  EXPECT_EQ(FormatRfc5322Date(951'782'400), "Tue, 29 Feb 2000 00:00:00 +0000");
  EXPECT_EQ(FormatRfc5322Date(1'700'000'000), "Tue, 14 Nov 2023 22:13:20 +0000");
}

TEST(ValidateMailTest, AcceptsAWellFormedMail) { EXPECT_TRUE(ValidateMail(Sample())); }

TEST(ValidateMailTest, RefusesLineBreaksInRecipientAndSubject) {
  for (const std::string to : {"ada@example.com\r\nBcc: x@y.example", "ada@example.com\n",
                               "ada@example.com\r", "\nada@example.com"}) {
    Mail mail = Sample();
    mail.to = to;
    auto r = ValidateMail(mail);
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().code, core::ErrorCode::kInvalidArgument);
    EXPECT_EQ(r.error().api_code, "invalid_mail");
  }
  for (const std::string& subject : std::vector<std::string>{
           "hi\r\nBcc: x@y.example", "hi\n", "hi\rthere", "tab\there", std::string("nul\0", 4)}) {
    Mail mail = Sample();
    mail.subject = subject;
    auto r = ValidateMail(mail);
    ASSERT_FALSE(r) << subject;
    EXPECT_EQ(r.error().api_code, "invalid_mail");
  }
}

TEST(ValidateMailTest, RefusesBadSubjectsAndBodies) {
  const auto invalid = [](Mail mail) {
    auto r = ValidateMail(mail);
    return !r && r.error().api_code == "invalid_mail";
  };
  Mail mail = Sample();
  mail.subject = "";
  EXPECT_TRUE(invalid(mail));
  mail = Sample();
  mail.subject = std::string(kMaxSubjectBytes + 1, 'a');
  EXPECT_TRUE(invalid(mail));
  mail = Sample();
  mail.subject = "bad \xc3\x28 utf8";
  EXPECT_TRUE(invalid(mail));
  mail = Sample();
  mail.subject = "overlong \xc0\xaf";
  EXPECT_TRUE(invalid(mail));
  mail = Sample();
  mail.subject = "surrogate \xed\xa0\x80";
  EXPECT_TRUE(invalid(mail));
  mail = Sample();
  mail.text_body = "";
  EXPECT_TRUE(invalid(mail));
  mail = Sample();
  mail.html_body = std::string("a\0b", 3);
  EXPECT_TRUE(invalid(mail));
  mail = Sample();
  mail.text_body = "truncated \xe2\x82";
  EXPECT_TRUE(invalid(mail));
  mail = Sample();
  mail.text_body = std::string(kMaxBodyBytes + 1, 'a');
  EXPECT_TRUE(invalid(mail));
  mail = Sample();
  mail.html_body = "";
  EXPECT_FALSE(invalid(mail));
}

TEST(IsValidAddressTest, AcceptsCommonAddressesAndRefusesTheRest) {
  for (const char* good : {"a@b.c", "ada.lovelace+gpu@example.com", "x_y-z@sub.example.co.uk",
                           "o'brien@example.ie", "1@2.3"}) {
    EXPECT_TRUE(IsValidAddress(good)) << good;
  }
  for (const char* bad :
       {"",         "@",         "a@",      "@b.c",        "ab.c",          "a b@c.d",   "a@b c.d",
        "<a@b.c>",  "a@b.c>",    "a,b@c.d", "a@b.c,d@e.f", "a;b@c.d",       ".a@b.c",    "a.@b.c",
        "a..b@c.d", "a@b..c",    "a@-b.c",  "a@b-.c",      "a@[127.0.0.1]", "\"q\"@b.c", "ü@b.c",
        "a@ü.c",    "a@b.c\r\n", "a@b@c.d"}) {
    EXPECT_FALSE(IsValidAddress(bad)) << bad;
  }
  EXPECT_FALSE(IsValidAddress(std::string(65, 'a') + "@b.c"));
  EXPECT_TRUE(IsValidAddress(std::string(64, 'a') + "@b.c"));
  EXPECT_FALSE(IsValidAddress("a@" + std::string(64, 'b') + ".c"));
}

TEST(ValidateFromTest, AcceptsAddressOrNameAddr) {
  EXPECT_TRUE(ValidateFrom("noreply@gpuwerk.example"));
  EXPECT_TRUE(ValidateFrom("gpuwerk <noreply@gpuwerk.example>"));
  EXPECT_TRUE(ValidateFrom("\"Acme, Inc.\" <a@x.example>"));
  EXPECT_TRUE(ValidateFrom("Grüße <a@x.example>"));
  for (const char* bad : {"", "gpuwerk", "gpuwerk <>", "gpuwerk <a@x.example>\r\nBcc: v@x.example",
                          "<a@x.example", "a@x.example, b@x.example"}) {
    auto r = ValidateFrom(bad);
    ASSERT_FALSE(r) << bad;
    EXPECT_EQ(r.error().api_code, "invalid_mail_from");
  }
  EXPECT_EQ(FromAddress("gpuwerk <noreply@gpuwerk.example>"), "noreply@gpuwerk.example");
  EXPECT_EQ(FromAddress(" noreply@gpuwerk.example "), "noreply@gpuwerk.example");
  EXPECT_EQ(FromDomain("gpuwerk <noreply@gpuwerk.example>"), "gpuwerk.example");
  EXPECT_EQ(FromDomain("nonsense"), "localhost");
}

}  // namespace
}  // namespace gpuwerk::mail

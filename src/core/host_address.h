#pragma once

#include <string_view>

namespace gpuwerk::core {

/// Whether `text` is a host to connect to and nothing else: an IPv4 literal (dotted quad), an
/// IPv6 literal without brackets (inet_pton, RFC 4291 §2.2), or a DNS name as RFC 1123 §2.1
/// allows (labels of 1–63 letters, digits and '-', neither starting nor ending with '-', joined
/// by '.', at most 253 characters, an optional trailing '.'). Never true for text that starts
/// with '-' or holds a space, '@', ':' outside an IPv6 literal, '/', or a control character, so
/// it can go into an argv (`ssh … root@<it>`) or a display command without becoming an option.
bool IsHostAddress(std::string_view text);

}  // namespace gpuwerk::core

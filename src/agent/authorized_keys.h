#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace gpuwerk::agent {

/// Where AuthorizedKeysTar's archive must be unpacked: the container's root directory.
inline constexpr std::string_view kAuthorizedKeysArchiveRoot = "/";

/// The contents of an OpenSSH `authorized_keys` file for `key_lines`: one key per line, each
/// ending in "\n" (case C04), no CR anywhere (case C01). Each element is trimmed of surrounding
/// blanks; an element that holds several lines (LF, CRLF or CR) yields one line each; empty
/// lines are dropped. Keys are expected to be normalised OpenSSH one-line public keys already
/// (keys::ParsePublicKey); this function does not parse them.
std::string AuthorizedKeysFile(const std::vector<std::string>& key_lines);

/// An uncompressed POSIX ustar archive (in memory) that, unpacked at "/" of a container (e.g.
/// ContainerEngine::PutArchive(id, kAuthorizedKeysArchiveRoot, tar)), gives root its SSH keys:
///   - `root/.ssh/` — directory, mode 0700, uid/gid 0 (root/root)
///   - `root/.ssh/authorized_keys` — AuthorizedKeysFile(key_lines), mode 0600, uid/gid 0
/// sshd's StrictModes accepts exactly these owners and modes (case C05). Entries carry
/// `mtime_unix_seconds` (seconds since the Unix epoch) as their modification time; the default
/// 0 makes the archive deterministic. The archive does not touch `/root` itself.
/// Thread-safe. Aborts only if libarchive cannot allocate memory.
std::string AuthorizedKeysTar(const std::vector<std::string>& key_lines,
                              int64_t mtime_unix_seconds = 0);

}  // namespace gpuwerk::agent

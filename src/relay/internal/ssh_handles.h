#pragma once

// Owners of libssh 0.10 handles: each handle the relay creates or is handed is held by one of
// these, so nothing in the relay frees a libssh object by hand. Include only from .cc files of
// src/relay (libssh types stay out of widely included headers).

#include <libssh/libssh.h>
#include <libssh/server.h>

#include <memory>

namespace gpuwerk::relay::internal {

/// A `std::unique_ptr` deleter that hands the handle to `Free`, a libssh release function.
template <auto Free>
struct SshDeleter {
  template <class T>
  void operator()(T* handle) const {
    Free(handle);
  }
};

/// Says goodbye (SSH_MSG_DISCONNECT, RFC 4253 §11.1) when still connected, then frees.
inline void DisconnectAndFree(ssh_session session) {
  if (ssh_is_connected(session)) ssh_disconnect(session);
  ssh_free(session);
}

inline void FreePublicKeyHash(unsigned char* hash) { ssh_clean_pubkey_hash(&hash); }

/// A session (`ssh_new`), disconnected and freed.
using SshSessionPtr = std::unique_ptr<ssh_session_struct, SshDeleter<&DisconnectAndFree>>;
/// A channel (`ssh_channel_new`, `ssh_message_channel_request_open_reply_accept`). Remove any
/// callbacks that point at shorter-lived data first: libssh may keep a freed channel until its
/// close arrives.
using SshChannelPtr = std::unique_ptr<ssh_channel_struct, SshDeleter<&ssh_channel_free>>;
/// A message taken with `ssh_message_get`, answered or not.
using SshMessagePtr = std::unique_ptr<ssh_message_struct, SshDeleter<&ssh_message_free>>;
/// A key (`ssh_pki_import_privkey_base64`, `ssh_pki_generate`, `ssh_get_server_publickey`).
using SshKeyPtr = std::unique_ptr<ssh_key_struct, SshDeleter<&ssh_key_free>>;
/// An event (`ssh_event_new`). Remove its sessions and fds first.
using SshEventPtr = std::unique_ptr<ssh_event_struct, SshDeleter<&ssh_event_free>>;
/// A server bind (`ssh_bind_new`).
using SshBindPtr = std::unique_ptr<ssh_bind_struct, SshDeleter<&ssh_bind_free>>;
/// An SSH string (`ssh_string_from_char`).
using SshStringPtr = std::unique_ptr<ssh_string_struct, SshDeleter<&ssh_string_free>>;
/// A C string libssh allocated (`ssh_pki_export_pubkey_base64`, `ssh_get_fingerprint_hash`).
using SshCharPtr = std::unique_ptr<char, SshDeleter<&ssh_string_free_char>>;
/// A public-key hash (`ssh_get_publickey_hash`).
using SshHashPtr = std::unique_ptr<unsigned char, SshDeleter<&FreePublicKeyHash>>;

}  // namespace gpuwerk::relay::internal

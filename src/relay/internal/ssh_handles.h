#pragma once

// Owners of libssh 0.10 handles: each handle the relay creates or is handed is held by one of
// these, so nothing in the relay frees a libssh object by hand. Include only from .cc files of
// src/relay (libssh types stay out of widely included headers).

#include <libssh/libssh.h>
#include <libssh/server.h>

#include <memory>

namespace gpuwerk::relay::internal {

/// Frees an SSH session (`ssh_new`), saying goodbye first (SSH_MSG_DISCONNECT, RFC 4253 §11.1)
/// when it is still connected.
struct SshSessionDeleter {
  void operator()(ssh_session session) const {
    if (ssh_is_connected(session)) ssh_disconnect(session);
    ssh_free(session);
  }
};
using SshSessionPtr = std::unique_ptr<ssh_session_struct, SshSessionDeleter>;

/// Frees a channel (`ssh_channel_new`, `ssh_message_channel_request_open_reply_accept`). Remove
/// any callbacks that point at shorter-lived data first: libssh may keep a freed channel until
/// its close arrives.
struct SshChannelDeleter {
  void operator()(ssh_channel channel) const { ssh_channel_free(channel); }
};
using SshChannelPtr = std::unique_ptr<ssh_channel_struct, SshChannelDeleter>;

/// Frees a message taken with `ssh_message_get` (answered or not).
struct SshMessageDeleter {
  void operator()(ssh_message message) const { ssh_message_free(message); }
};
using SshMessagePtr = std::unique_ptr<ssh_message_struct, SshMessageDeleter>;

/// Frees a key (`ssh_pki_import_privkey_base64`, `ssh_pki_generate`,
/// `ssh_get_server_publickey`).
struct SshKeyDeleter {
  void operator()(ssh_key key) const { ssh_key_free(key); }
};
using SshKeyPtr = std::unique_ptr<ssh_key_struct, SshKeyDeleter>;

/// Frees an event (`ssh_event_new`). Remove its sessions and fds first.
struct SshEventDeleter {
  void operator()(ssh_event event) const { ssh_event_free(event); }
};
using SshEventPtr = std::unique_ptr<ssh_event_struct, SshEventDeleter>;

/// Frees a server bind (`ssh_bind_new`).
struct SshBindDeleter {
  void operator()(ssh_bind bind) const { ssh_bind_free(bind); }
};
using SshBindPtr = std::unique_ptr<ssh_bind_struct, SshBindDeleter>;

/// Frees an SSH string (`ssh_string_from_char`).
struct SshStringDeleter {
  void operator()(ssh_string string) const { ssh_string_free(string); }
};
using SshStringPtr = std::unique_ptr<ssh_string_struct, SshStringDeleter>;

/// Frees a C string libssh allocated (`ssh_pki_export_pubkey_base64`,
/// `ssh_get_fingerprint_hash`).
struct SshCharDeleter {
  void operator()(char* text) const { ssh_string_free_char(text); }
};
using SshCharPtr = std::unique_ptr<char, SshCharDeleter>;

/// Frees a public-key hash (`ssh_get_publickey_hash`).
struct SshHashDeleter {
  void operator()(unsigned char* hash) const { ssh_clean_pubkey_hash(&hash); }
};
using SshHashPtr = std::unique_ptr<unsigned char, SshHashDeleter>;

}  // namespace gpuwerk::relay::internal

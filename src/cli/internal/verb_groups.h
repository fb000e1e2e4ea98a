#pragma once
// The verb groups, one file each, registered in order by AddClientCommands (commands.cc). Each
// group keeps its options in its own struct, owned by its callbacks.

#include <CLI/CLI.hpp>

#include "cli/internal/verb_support.h"

namespace gpuwerk::cli::internal {

/// login, signup, logout, whoami (account_verbs.cc).
void AddAccountVerbs(CLI::App& app, const VerbRegistry& verbs);
/// keys ls|add|rm (key_verbs.cc).
void AddKeyVerbs(CLI::App& app, const VerbRegistry& verbs);
/// tokens ls|create|rm (token_verbs.cc).
void AddTokenVerbs(CLI::App& app, const VerbRegistry& verbs);
/// instances ls|create|show|restart|rm|relay-sessions, ssh (instance_verbs.cc).
void AddInstanceVerbs(CLI::App& app, const VerbRegistry& verbs);
/// gpu-types (gpu_type_verbs.cc).
void AddGpuTypeVerbs(CLI::App& app, const VerbRegistry& verbs);
/// queue join|ls|leave (queue_verbs.cc).
void AddQueueVerbs(CLI::App& app, const VerbRegistry& verbs);
/// usage queue (usage_verbs.cc).
void AddUsageVerbs(CLI::App& app, const VerbRegistry& verbs);
/// events (event_verbs.cc).
void AddEventVerbs(CLI::App& app, const VerbRegistry& verbs);
/// billing [add-card|remove-card] (billing_verbs.cc).
void AddBillingVerbs(CLI::App& app, const VerbRegistry& verbs);
/// team create|show|invite|revoke|remove|leave|role (team_verbs.cc).
void AddTeamVerbs(CLI::App& app, const VerbRegistry& verbs);
/// admin audit (admin_audit_verbs.cc).
void AddAdminAuditVerbs(CLI::App& admin, const VerbRegistry& verbs);
/// admin relay-sessions, on the `admin` subcommand (admin_relay_session_verbs.cc).
void AddAdminRelaySessionVerbs(CLI::App& admin, const VerbRegistry& verbs);
/// admin relays add|list|revoke (admin_relay_verbs.cc).
void AddAdminRelayVerbs(CLI::App& admin, const VerbRegistry& verbs);
/// admin hosts add|ls|drain|undrain|rm|link|unlink (admin_host_verbs.cc).
void AddAdminHostVerbs(CLI::App& admin, const VerbRegistry& verbs);
/// admin gpu-types ls|set (admin_gpu_type_verbs.cc).
void AddAdminGpuTypeVerbs(CLI::App& admin, const VerbRegistry& verbs);
/// admin invite EMAIL (admin_invite_verbs.cc).
void AddAdminInviteVerbs(CLI::App& admin, const VerbRegistry& verbs);
/// admin release-key FILE (admin_key_verbs.cc).
void AddAdminKeyVerbs(CLI::App& admin, const VerbRegistry& verbs);
/// admin billing set-card|clear-card (admin_billing_verbs.cc).
void AddAdminBillingVerbs(CLI::App& admin, const VerbRegistry& verbs);
/// billing invoices, on the `billing` group, made here unless it exists (invoice_verbs.cc).
void AddInvoiceVerbs(CLI::App& app, const VerbRegistry& verbs);
/// usage sessions, on the `usage` group (invoice_verbs.cc).
void AddUsageSessionVerbs(CLI::App& usage, const VerbRegistry& verbs);
/// admin instances, admin queue, admin people [set-operator|clear-operator|sign-up-policy]
/// (admin_people_verbs.cc).
void AddAdminPeopleVerbs(CLI::App& admin, const VerbRegistry& verbs);
/// admin invoices close|export (invoice_verbs.cc).
void AddAdminInvoiceVerbs(CLI::App& admin, const VerbRegistry& verbs);

}  // namespace gpuwerk::cli::internal

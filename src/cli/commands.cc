#include "cli/commands.h"

#include <unistd.h>

#include <iostream>

#include "cli/internal/verb_groups.h"

namespace gpuwerk::cli {

ClientIo ClientIo::Process() {
  return ClientIo{.env = ProcessEnvironment(),
                  .in = &std::cin,
                  .out = &std::cout,
                  .err = &std::cerr,
                  .in_is_terminal = ::isatty(STDIN_FILENO) == 1};
}

void AddClientCommands(CLI::App& app, int& exit_code) {
  AddClientCommands(app, exit_code, ClientIo::Process());
}

void AddClientCommands(CLI::App& app, int& exit_code, ClientIo io) {
  const internal::VerbRegistry verbs(std::move(io), exit_code);
  internal::AddAccountVerbs(app, verbs);
  internal::AddKeyVerbs(app, verbs);
  internal::AddTokenVerbs(app, verbs);
  internal::AddInstanceVerbs(app, verbs);
  internal::AddGpuTypeVerbs(app, verbs);
  internal::AddQueueVerbs(app, verbs);
  internal::AddUsageVerbs(app, verbs);
  internal::AddEventVerbs(app, verbs);
  internal::AddBillingVerbs(app, verbs);
  internal::AddTeamVerbs(app, verbs);
  CLI::App* admin = app.add_subcommand("admin", "Operator commands");
  admin->require_subcommand(1);
  internal::AddAdminRelaySessionVerbs(*admin, verbs);
  internal::AddAdminRelayVerbs(*admin, verbs);
  internal::AddAdminHostVerbs(*admin, verbs);
  internal::AddAdminGpuTypeVerbs(*admin, verbs);
  internal::AddAdminInviteVerbs(*admin, verbs);
  internal::AddAdminKeyVerbs(*admin, verbs);
  internal::AddAdminBillingVerbs(*admin, verbs);
  internal::AddAdminAuditVerbs(*admin, verbs);
  internal::AddAdminPeopleVerbs(*admin, verbs);
  internal::AddInvoiceVerbs(app, verbs);
  internal::AddAdminInvoiceVerbs(*admin, verbs);
}

}  // namespace gpuwerk::cli

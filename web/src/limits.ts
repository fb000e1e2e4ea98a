// The API's length limits on names, as the server checks them: the dashboard's inputs stop there
// (`maxLength`) and count towards them, so nothing is cut off unseen or refused for its length.

/** An instance's (and a queue entry's) name: a DNS label, 1 to 63 characters (`ValidateDnsLabel`, src/sched/host_registry.cc). */
export const INSTANCE_NAME_MAX = 63;
/** An SSH key's name: 1 to 64 characters (`keys::kMaxKeyNameLength`, src/keys/key_name.h). */
export const KEY_NAME_MAX = 64;
/** A team's name: 1 to 64 characters (`ValidateTeamName`, src/teams/team_service.cc). */
export const TEAM_NAME_MAX = 64;

#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "mail/mail.h"

namespace gpuwerk::sched {

/// The mail to a queue entry's owner when the entry was launched as instance `name`
/// (hostname `hostname`) of `gpu_type`: how to connect once it is running.
mail::Mail QueueLaunchMail(std::string_view to, std::string_view name, std::string_view hostname,
                           std::string_view gpu_type);

/// The mail to an entry's owner whose turn came while they could not launch (R-14: no payment
/// method on their billing account): the entry keeps its place; `why` is the launch gate's
/// refusal, which says what to do (e.g. "… ask your operator to record one …").
mail::Mail QueuePassedOverMail(std::string_view to, std::string_view name,
                               std::string_view gpu_type, std::string_view why);

/// The mail to an account whose SSH key `key_name` (`fingerprint`) was claimed by an account that
/// proved it holds the private key (docs/ssh-keys.md "Proof of possession"), naming the queue
/// entries (`entries`, "name (gpu type)") that were cancelled with it.
mail::Mail KeyClaimedAwayMail(std::string_view to, std::string_view key_name,
                              std::string_view fingerprint,
                              const std::vector<std::string>& entries);

}  // namespace gpuwerk::sched

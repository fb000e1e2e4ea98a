#include "sched/queue_mails.h"

#include <fmt/format.h>

#include "core/encoding.h"

namespace gpuwerk::sched {

mail::Mail QueueLaunchMail(std::string_view to, std::string_view name, std::string_view hostname,
                           std::string_view gpu_type) {
  mail::Mail m;
  m.to = std::string(to);
  m.subject = fmt::format("Your gpuwerk instance {} is starting", name);
  m.text_body = fmt::format(
      "Your turn in the {} queue came: your instance {} ({}) is starting now, with the name and "
      "SSH key you chose when you joined. Its billing session has begun.\n\n"
      "Once it is running (usually within a minute), connect with:\n\n"
      "    gpuwerk ssh {}\n\n"
      "or paste the ssh command that 'gpuwerk instances show {}' and the dashboard show.\n\n"
      "-- gpuwerk\n",
      gpu_type, name, hostname, name, name);
  m.html_body = fmt::format(
      "<p>Your turn in the {} queue came: your instance <b>{}</b> ({}) is starting now, with the "
      "name and SSH key you chose when you joined. Its billing session has begun.</p>"
      "<p>Once it is running (usually within a minute), connect with:</p>"
      "<pre>gpuwerk ssh {}</pre><p>or paste the ssh command that <code>gpuwerk instances show "
      "{}</code> and the dashboard show.</p><p>-- gpuwerk</p>",
      core::HtmlEscape(gpu_type), core::HtmlEscape(name), core::HtmlEscape(hostname),
      core::HtmlEscape(name), core::HtmlEscape(name));
  return m;
}

mail::Mail QueuePassedOverMail(std::string_view to, std::string_view name,
                               std::string_view gpu_type, std::string_view why) {
  mail::Mail m;
  m.to = std::string(to);
  m.subject = fmt::format("gpuwerk: your {} queue entry {} was passed over", gpu_type, name);
  m.text_body = fmt::format(
      "A {} host came free and your queue entry {} was first in line, but your account cannot "
      "launch an instance right now:\n\n    {}\n\nYour entry keeps its place: it is launched "
      "as soon as you can launch and a host is free. You get this mail once until then.\n\n"
      "-- gpuwerk\n",
      gpu_type, name, why);
  m.html_body = fmt::format(
      "<p>A {} host came free and your queue entry <b>{}</b> was first in line, but your account "
      "cannot launch an instance right now:</p><blockquote>{}</blockquote><p>Your entry keeps "
      "its place: it is launched as soon as you can launch and a host is free. You get this "
      "mail once until then.</p><p>-- gpuwerk</p>",
      core::HtmlEscape(gpu_type), core::HtmlEscape(name), core::HtmlEscape(why));
  return m;
}

mail::Mail KeyClaimedAwayMail(std::string_view to, std::string_view key_name,
                              std::string_view fingerprint,
                              const std::vector<std::string>& entries) {
  std::string list;
  std::string html_list;
  for (const std::string& e : entries) {
    list += "    " + e + "\n";
    html_list += "<li>" + core::HtmlEscape(e) + "</li>";
  }
  mail::Mail m;
  m.to = std::string(to);
  m.subject = fmt::format("gpuwerk: your SSH key {} was claimed by its holder", key_name);
  const std::string cancelled =
      entries.empty() ? std::string()
                      : "These queue entries held it and were cancelled:\n\n" + list + "\n";
  m.text_body = fmt::format(
      "Your SSH key {} ({}) was removed from your account: another account proved that it holds "
      "the key's private key, which yours never did, and a public key belongs to one account "
      "only.\n\n{}If the key is yours, prove it the same way (gpuwerk keys claim NAME FILE) from "
      "your account; otherwise add a key of your own.\n\n-- gpuwerk\n",
      key_name, fingerprint, cancelled);
  m.html_body = fmt::format(
      "<p>Your SSH key <b>{}</b> ({}) was removed from your account: another account proved that "
      "it holds the key's private key, which yours never did, and a public key belongs to one "
      "account only.</p>{}<p>If the key is yours, prove it the same way (<code>gpuwerk keys claim "
      "NAME FILE</code>) from your account; otherwise add a key of your own.</p><p>-- "
      "gpuwerk</p>",
      core::HtmlEscape(key_name), core::HtmlEscape(fingerprint),
      entries.empty()
          ? std::string()
          : "<p>These queue entries held it and were cancelled:</p><ul>" + html_list + "</ul>");
  return m;
}

}  // namespace gpuwerk::sched

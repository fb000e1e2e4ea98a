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
                               std::string_view gpu_type) {
  mail::Mail m;
  m.to = std::string(to);
  m.subject = fmt::format("gpuwerk: your {} queue entry {} was passed over", gpu_type, name);
  m.text_body = fmt::format(
      "A {} host came free and your queue entry {} was first in line, but your account cannot "
      "launch an instance right now (add a payment method). Your entry keeps its place: it is "
      "launched as soon as you can launch and a host is free.\n\n-- gpuwerk\n",
      gpu_type, name);
  m.html_body = fmt::format(
      "<p>A {} host came free and your queue entry <b>{}</b> was first in line, but your account "
      "cannot launch an instance right now (add a payment method). Your entry keeps its place: "
      "it is launched as soon as you can launch and a host is free.</p><p>-- gpuwerk</p>",
      core::HtmlEscape(gpu_type), core::HtmlEscape(name));
  return m;
}

}  // namespace gpuwerk::sched

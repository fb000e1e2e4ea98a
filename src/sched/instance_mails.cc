#include "sched/instance_mails.h"

#include <fmt/format.h>

#include "core/encoding.h"

namespace gpuwerk::sched {

mail::Mail InstanceDriftMail(std::string_view to, std::string_view name, std::string_view reason,
                             int64_t quiet_minutes) {
  mail::Mail m;
  m.to = std::string(to);
  m.subject = fmt::format("gpuwerk: your instance {} was changed outside gpuwerk", name);
  m.text_body = fmt::format(
      "Something on the host of your instance {} changed it without going through gpuwerk: "
      "{}.\n\n"
      "Neither you nor gpuwerk asked for this; the host's operator can see it in the audit log. "
      "Its status shows it too:\n\n"
      "    gpuwerk instances show {}\n\n"
      "Further changes to this instance within the next {} minutes are shown there but not "
      "mailed.\n\n-- gpuwerk\n",
      name, reason, name, quiet_minutes);
  m.html_body = fmt::format(
      "<p>Something on the host of your instance <b>{}</b> changed it without going through "
      "gpuwerk: {}.</p><p>Neither you nor gpuwerk asked for this; the host's operator can see it "
      "in the audit log. Its status shows it too:</p><pre>gpuwerk instances show {}</pre>"
      "<p>Further changes to this instance within the next {} minutes are shown there but not "
      "mailed.</p><p>-- gpuwerk</p>",
      core::HtmlEscape(name), core::HtmlEscape(reason), core::HtmlEscape(name), quiet_minutes);
  return m;
}

}  // namespace gpuwerk::sched

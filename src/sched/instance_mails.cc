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

mail::Mail InstanceHostKeyMail(std::string_view to, std::string_view name, int64_t node,
                               std::string_view old_fingerprint, std::string_view new_fingerprint) {
  mail::Mail m;
  m.to = std::string(to);
  m.subject = fmt::format("gpuwerk: your instance {} has a new container and SSH host key", name);
  m.text_body = fmt::format(
      "The container of your instance {} (node {}) was made again on its host, from the image: "
      "files written outside your volumes are gone, and its sshd has a new host key.\n\n"
      "    before: {}\n    now:    {}\n\n"
      "The relay now requires the new key of this container. Your own SSH client keeps seeing "
      "the relay's key, which does not change. If you did not expect this, tell the operator; "
      "the audit log has it. Its status:\n\n    gpuwerk instances show {}\n\n-- gpuwerk\n",
      name, node, old_fingerprint, new_fingerprint, name);
  m.html_body = fmt::format(
      "<p>The container of your instance <b>{}</b> (node {}) was made again on its host, from the "
      "image: files written outside your volumes are gone, and its sshd has a new host key.</p>"
      "<pre>before: {}\nnow:    {}</pre><p>The relay now requires the new key of this container. "
      "Your own SSH client keeps seeing the relay's key, which does not change. If you did not "
      "expect this, tell the operator; the audit log has it. Its status:</p>"
      "<pre>gpuwerk instances show {}</pre><p>-- gpuwerk</p>",
      core::HtmlEscape(name), node, core::HtmlEscape(old_fingerprint),
      core::HtmlEscape(new_fingerprint), core::HtmlEscape(name));
  return m;
}

}  // namespace gpuwerk::sched

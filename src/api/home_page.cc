// "/" until the dashboard lands: a small page to sign up, sign in (password or magic link),
// ask for a password reset, see who is signed in, manage SSH keys and sign out. It talks to the
// JSON API with fetch(); the script is served from /home.js so the page's CSP allows no inline
// script.
#include "api/api_context.h"
#include "api/handler_support.h"
#include "api/internal/handlers.h"

namespace gpuwerk::api {
namespace {

constexpr std::string_view kHomeHtml = R"html(<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>gpuwerk</title>
<style>
body{font-family:system-ui,sans-serif;max-width:40rem;margin:3rem auto;padding:0 1rem;color:#1b1f24}
h1{font-size:1.5rem}h2{font-size:1.1rem;margin-top:2rem}
input,textarea,button{font:inherit;padding:.45rem;box-sizing:border-box;margin:.2rem 0}
input,textarea{width:100%}textarea{height:6rem;font-family:monospace;font-size:.85rem}
button{cursor:pointer;background:#1b1f24;color:#fff;border:0;border-radius:4px;padding:.45rem 1rem}
button.link{background:none;color:#0b57d0;padding:0;text-decoration:underline}
.error{color:#b00020}.note{color:#555}.hidden{display:none}
table{border-collapse:collapse;width:100%;font-size:.9rem}td,th{text-align:left;padding:.3rem;border-bottom:1px solid #ddd}
code{font-size:.85rem}
</style></head><body>
<h1>gpuwerk</h1>
<p id="message" class="note" role="status"></p>
<section id="signed-out" class="hidden">
  <form id="sign-in">
    <label>Email <input name="email" type="email" autocomplete="email" required></label>
    <label>Password <input name="password" type="password" autocomplete="current-password"></label>
    <button type="submit">Sign in</button>
    <button type="button" id="sign-up">Create account</button>
  </form>
  <p><button class="link" id="magic-link">Send me a magic link</button> ·
     <button class="link" id="forgot">Forgot password?</button></p>
</section>
<section id="signed-in" class="hidden">
  <p>Signed in as <strong id="who"></strong>. <button class="link" id="sign-out">Sign out</button></p>
  <h2>SSH keys</h2>
  <table><thead><tr><th>Name</th><th>Type</th><th>Fingerprint</th><th></th></tr></thead>
  <tbody id="keys"></tbody></table>
  <form id="add-key">
    <label>Name <input name="name" required maxlength="64" placeholder="macbook"></label>
    <label>Public key (the contents of your <code>.pub</code> file, never the private key)
      <textarea name="public_key" required placeholder="ssh-ed25519 AAAA… you@laptop"></textarea></label>
    <p class="note">macOS / Ubuntu: <code>cat ~/.ssh/id_ed25519.pub</code> ·
      Windows: <code>type %USERPROFILE%\.ssh\id_ed25519.pub</code> ·
      no key yet: <code>ssh-keygen -t ed25519</code></p>
    <button type="submit">Add key</button>
  </form>
  <p class="note">Instances, the queue, billing and teams arrive in the next releases. The CLI:
    <code>gpuwerk login --url <span id="origin"></span></code></p>
</section>
<script src="/home.js"></script>
</body></html>
)html";

constexpr std::string_view kHomeJs = R"js('use strict';
const $ = (id) => document.getElementById(id);
const say = (text, bad) => { $('message').textContent = text; $('message').className = bad ? 'error' : 'note'; };
async function api(method, path, body) {
  const r = await fetch(path, {method, credentials: 'same-origin',
    headers: body ? {'Content-Type': 'application/json'} : {}, body: body ? JSON.stringify(body) : undefined});
  const data = r.status === 204 ? null : await r.json().catch(() => null);
  if (!r.ok) throw new Error((data && data.detail) || r.statusText);
  return data;
}
function cell(text) { const td = document.createElement('td'); td.textContent = text; return td; }
async function loadKeys() {
  const list = await api('GET', '/api/v1/ssh-keys');
  const body = $('keys'); body.replaceChildren();
  for (const k of list.items) {
    const tr = document.createElement('tr');
    tr.append(cell(k.name), cell(k.type), cell(k.fingerprint));
    const del = document.createElement('button'); del.className = 'link'; del.textContent = 'delete';
    del.onclick = async () => { try { await api('DELETE', '/api/v1/ssh-keys/' + k.id); say('Key deleted.'); loadKeys(); } catch (e) { say(e.message, true); } };
    const td = document.createElement('td'); td.append(del); tr.append(td); body.append(tr);
  }
}
async function show() {
  $('origin').textContent = location.origin;
  try {
    const me = await api('GET', '/api/v1/me');
    $('who').textContent = me.email;
    $('signed-in').className = ''; $('signed-out').className = 'hidden';
    await loadKeys();
  } catch (e) {
    $('signed-in').className = 'hidden'; $('signed-out').className = '';
  }
}
const form = () => Object.fromEntries(new FormData($('sign-in')));
$('sign-in').onsubmit = async (ev) => { ev.preventDefault();
  try { await api('POST', '/api/v1/auth/login', form()); say(''); show(); } catch (e) { say(e.message, true); } };
$('sign-up').onclick = async () => {
  try { const r = await api('POST', '/api/v1/auth/signup', form()); say(r.message); } catch (e) { say(e.message, true); } };
$('magic-link').onclick = async () => {
  try { await api('POST', '/api/v1/auth/magic-link', {email: form().email}); say('If the address has an account, a sign-in link is on its way.'); } catch (e) { say(e.message, true); } };
$('forgot').onclick = async () => {
  try { await api('POST', '/api/v1/auth/password-reset', {email: form().email}); say('If the address has an account, a link to set a password is on its way.'); } catch (e) { say(e.message, true); } };
$('sign-out').onclick = async () => { await api('POST', '/api/v1/auth/logout'); say('Signed out.'); show(); };
$('add-key').onsubmit = async (ev) => { ev.preventDefault();
  try { const k = await api('POST', '/api/v1/ssh-keys', Object.fromEntries(new FormData(ev.target)));
    ev.target.reset(); say('Added ' + k.name + ' (' + k.fingerprint + ').'); loadKeys(); } catch (e) { say(e.message, true); } };
show();
)js";

}  // namespace

namespace handlers {

Answer HomePage(ApiContext&, Call&) {
  Response r = Response::Html(200, std::string(kHomeHtml));
  r.SetHeader("Content-Security-Policy",
              "default-src 'none'; script-src 'self'; connect-src 'self'; "
              "style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'");
  r.SetHeader("Cache-Control", "no-store");
  return r;
}

Answer HomeScript(ApiContext&, Call&) {
  Response r = Response::Text(200, std::string(kHomeJs), "text/javascript; charset=utf-8");
  r.SetHeader("Cache-Control", "no-cache");
  return r;
}

}  // namespace handlers
}  // namespace gpuwerk::api

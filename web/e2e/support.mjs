// What the dashboard's browser tests share: the platform the C++ harness started
// (tests/e2e/dashboard_e2e_test.cc hands it over in the environment), Debian's Chromium through
// playwright-core, mail read from the folder of the SMTP sink the harness runs (a Maildir works
// too), axe-core, screenshots, and the real ssh-keygen, ssh and gpuwerk CLI.
import { execFile } from 'node:child_process';
import net from 'node:net';
import { mkdirSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { chromium } from 'playwright-core';

const run = promisify(execFile);
const require = createRequire(import.meta.url);

function need(name) {
  const v = process.env[name];
  if (!v) throw new Error(`the browser tests need ${name} in the environment (tests/e2e/dashboard_e2e_test.cc sets it)`);
  return v;
}

export const env = {
  url: need('DASHBOARD_URL'),
  mailDir: need('DASHBOARD_MAIL_DIR'),
  artifacts: need('DASHBOARD_ARTIFACTS'),
  work: need('DASHBOARD_WORK_DIR'),
  gpuwerk: need('GPUWERK_BIN'),
  operatorEmail: need('DASHBOARD_OPERATOR_EMAIL'),
  operatorPassword: need('DASHBOARD_OPERATOR_PASSWORD'),
  stripe: need('DASHBOARD_STRIPE_URL'),  // the Stripe stand-in (tests/support/stripe_stand_in.py)
  chromium: process.env.CHROMIUM || '/usr/bin/chromium',
  // Where the SSH command's host name really is (the relay's wildcard name has no DNS here).
  sshHost: process.env.DASHBOARD_SSH_HOST || '',
};
mkdirSync(env.artifacts, { recursive: true });

export async function launchBrowser() {
  return chromium.launch({
    executablePath: env.chromium,
    headless: true,
    // Root in a container has no user namespaces for Chromium's sandbox; the pages are our own.
    args: ['--no-sandbox', '--disable-dev-shm-usage', '--disable-gpu', '--no-first-run'],
  });
}

/** Waits for `check` (async, truthy = done) up to `ms`, polling every `every` ms. */
export async function eventually(check, ms, what, every = 250) {
  const end = Date.now() + ms;
  let last;
  for (;;) {
    try {
      last = await check();
      if (last) return last;
    } catch (e) {
      last = e;
    }
    if (Date.now() > end) throw new Error(`timed out after ${ms} ms waiting for ${what} (last: ${last})`);
    await new Promise((r) => setTimeout(r, every));
  }
}

// ---- mail ---------------------------------------------------------------------------------

function textPart(raw) {
  const at = raw.toLowerCase().indexOf('content-type: text/plain');
  if (at < 0) return raw;
  let body = raw.indexOf('\r\n\r\n', at);
  let skip = 4;
  if (body < 0) {
    body = raw.indexOf('\n\n', at);
    skip = 2;
  }
  if (body < 0) return '';
  const headers = raw.slice(at, body).toLowerCase();
  const end = raw.indexOf('\n--', body + skip);
  const content = raw.slice(body + skip, end < 0 ? undefined : end);
  if (headers.includes('base64')) return Buffer.from(content.replace(/\s+/g, ''), 'base64').toString('utf8');
  return content;
}

/** The mail files in the mail folder: the SMTP sink's DIR/*.eml, or a Maildir's new/ and cur/. */
function mailFiles() {
  const files = [];
  for (const sub of ['', 'new', 'cur']) {
    let names = [];
    try {
      names = readdirSync(join(env.mailDir, sub));
    } catch {
      continue;
    }
    for (const name of names) {
      if (name.startsWith('.') || name.endsWith('.json')) continue;  // the sink's temp and envelope files
      const file = join(env.mailDir, sub, name);
      if (statSync(file).isFile()) files.push(file);
    }
  }
  return files;
}

function mailsTo(address) {
  const out = [];
  for (const file of mailFiles()) {
    const raw = readFileSync(file, 'utf8');
    const to = /^to:(.*)$/im.exec(raw.split(/\r?\n\r?\n/)[0] ?? '');
    if (!to || !to[1].toLowerCase().includes(address.toLowerCase())) continue;
    out.push({ file, time: statSync(file).mtimeMs, text: textPart(raw) });
  }
  return out.sort((a, b) => a.time - b.time || a.file.localeCompare(b.file));
}

/** The newest link to `path` mailed to `address` (waits up to 30 s for it). */
export async function mailedLink(address, path) {
  return eventually(
    () => {
      const links = [];
      for (const m of mailsTo(address)) {
        for (const l of m.text.match(/https?:\/\/[^\s<>"]+/g) ?? []) if (l.includes(path)) links.push(l);
      }
      return links.at(-1);
    },
    30000,
    `a mail to ${address} with a ${path} link`,
  );
}

// ---- tools ----------------------------------------------------------------------------------

/** A fresh ed25519 key pair made by ssh-keygen: { privatePath, publicLine, privateText }. */
export async function sshKeygen(name) {
  const path = join(env.work, name);
  await run('ssh-keygen', ['-q', '-N', '', '-t', 'ed25519', '-C', `${name}@dashboard-e2e`, '-f', path]);
  return {
    privatePath: path,
    publicLine: readFileSync(`${path}.pub`, 'utf8').trim(),
    privateText: readFileSync(path, 'utf8'),
  };
}

/**
 * Runs the SSH command as the page showed it (e.g. "ssh -p 40123 root@127.0.0.1"), with the
 * test's key and without touching known_hosts, and `remote` as the command inside.
 */
export async function sshAsShown(command, keyPath, remote) {
  const words = command.trim().split(/\s+/);
  if (words[0] !== 'ssh') throw new Error(`not an ssh command: ${command}`);
  const args = [
    '-i', keyPath,
    '-o', 'IdentitiesOnly=yes',
    '-o', 'BatchMode=yes',
    '-o', 'StrictHostKeyChecking=no',
    '-o', 'UserKnownHostsFile=/dev/null',
    '-o', 'LogLevel=ERROR',
    '-o', 'ConnectTimeout=10',
    ...(env.sshHost ? ['-o', `HostName=${env.sshHost}`] : []),
    ...words.slice(1),
    remote,
  ];
  const { stdout } = await run('ssh', args, { timeout: 30000 });
  return stdout;
}

/** `gpuwerk ARGS` as the operator, through the real CLI (its own login file under work/). */
export async function operatorCli(...args) {
  const cliEnv = { ...process.env, GPUWERK_CONFIG_DIR: join(env.work, 'cli-operator'), GPUWERK_URL: '', GPUWERK_TOKEN: '' };
  delete cliEnv.GPUWERK_URL;
  delete cliEnv.GPUWERK_TOKEN;
  const login = execFile(env.gpuwerk, ['login', '--url', env.url, '--email', env.operatorEmail, '--password-stdin'], { env: cliEnv });
  login.stdin.end(`${env.operatorPassword}\n`);
  await new Promise((resolve, reject) => login.on('exit', (code) => (code === 0 ? resolve() : reject(new Error(`gpuwerk login exited ${code}`)))));
  const { stdout } = await run(env.gpuwerk, args, { env: cliEnv });
  return stdout;
}

// ---- accessibility and looks ----------------------------------------------------------------

const axeSource = readFileSync(require.resolve('axe-core/axe.min.js'), 'utf8');

/**
 * axe-core on the page as it is now (WCAG 2.x A and AA rules and best practices); returns the
 * serious and critical violations, each as "rule: target (summary)". axe runs through the
 * DevTools protocol, which the page's Content-Security-Policy does not block.
 */
export async function seriousA11yViolations(page, label) {
  if (!(await page.evaluate(() => typeof window.axe !== 'undefined'))) await page.evaluate(axeSource);
  const result = await page.evaluate(async () => {
    const r = await window.axe.run(document, { resultTypes: ['violations'] });
    return r.violations.map((v) => ({
      id: v.id,
      impact: v.impact,
      help: v.help,
      targets: v.nodes.map((n) => n.target.join(' ')).slice(0, 5),
    }));
  });
  const bad = result.filter((v) => v.impact === 'serious' || v.impact === 'critical');
  return bad.map((v) => `${label}: ${v.id} (${v.impact}) ${v.help} at ${v.targets.join(', ')}`);
}

/** Screenshots of the page at 375 px and 1280 px wide, full page, into the artifacts folder. */
export async function screenshots(page, name) {
  const original = page.viewportSize();
  for (const width of [375, 1280]) {
    await page.setViewportSize({ width, height: width === 375 ? 812 : 900 });
    await page.waitForTimeout(150);  // layout settles; nothing here animates for long
    await page.screenshot({ path: join(env.artifacts, `${name}-${width}.png`), fullPage: true, animations: 'disabled' });
  }
  if (original) await page.setViewportSize(original);
}

// ---- a connection the test can cut ----------------------------------------------------------

/**
 * A TCP proxy on 127.0.0.1 in front of the server, for a page whose connections the test breaks:
 * mode 'pass' forwards; 'down' closes every connection through it and refuses new ones (the page
 * is cut off, its event stream breaks); 'no-stream' forwards everything except the event stream
 * (a connection that asks for GET /api/v1/events is closed), so the page can act but hears nothing.
 * Cookies are per host, not per port, so the page keeps its sign-in; the server's Origin check
 * accepts the proxy's address (the Host the request came to).
 */
export async function startCuttableProxy(targetUrl) {
  const target = new URL(targetUrl);
  const pairs = new Set();
  let mode = 'pass';
  const server = net.createServer((client) => {
    if (mode === 'down') {
      client.destroy();
      return;
    }
    const upstream = net.connect(Number(target.port), target.hostname);
    const pair = { client, upstream };
    pairs.add(pair);
    const end = () => {
      client.destroy();
      upstream.destroy();
      pairs.delete(pair);
    };
    client.on('data', (chunk) => {
      if (mode === 'down' || (mode === 'no-stream' && chunk.includes('GET /api/v1/events'))) end();
      else upstream.write(chunk);
    });
    upstream.on('data', (chunk) => {
      if (mode === 'down') end();
      else client.write(chunk);
    });
    for (const s of [client, upstream]) {
      s.on('error', end);
      s.on('close', end);
    }
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${server.address().port}`,
    setMode(next) {
      mode = next;
      if (next === 'down') {
        for (const p of [...pairs]) {
          p.client.destroy();
          p.upstream.destroy();
        }
        pairs.clear();
      }
    },
    close() {
      for (const p of pairs) {
        p.client.destroy();
        p.upstream.destroy();
      }
      server.close();
    },
  };
}

// The dashboard in a real Chromium against the real gpuwerk server, agent and container engine
// (started by tests/e2e/dashboard_e2e_test.cc, which runs this file with `node --test`). One
// platform and one browser for every test here; the tests run in order and build on each other
// (one person's story), so a later one is skipped when an earlier one failed.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import {
  env,
  eventually,
  launchBrowser,
  mailedLink,
  operatorCli,
  screenshots,
  seriousA11yViolations,
  sshAsShown,
  sshKeygen,
  startCuttableProxy,
} from './support.mjs';

const EMAIL = 'ada@example.test';
const PASSWORD = 'correct horse battery';
const INSTANCE = 'web-alpha';

let browser;
let context;
let page;
let key;
const a11y = [];
let navigations = 0;
const scripts = [];  // every script the first person's pages loaded
let failed = false;

/** Runs `body` unless an earlier step failed (the story cannot go on). */
function step(name, body, options = {}) {
  test(name, options, async (t) => {
    if (failed) {
      t.skip('an earlier step failed');
      return;
    }
    try {
      await body(t);
    } catch (e) {
      failed = true;
      if (page) {
        await page.screenshot({ path: `${env.artifacts}/failure-${name.replace(/[^a-z0-9]+/gi, '-')}.png`, fullPage: true }).catch(() => {});
      }
      throw e;
    }
  });
}

async function checkA11y(label) {
  a11y.push(...(await seriousA11yViolations(page, label)));
}

async function checkA11yOf(p, label) {
  a11y.push(...(await seriousA11yViolations(p, label)));
}

function card(name) {
  return page.locator(`article[data-instance="${name}"]`);
}

before(async () => {
  key = await sshKeygen('ada_ed25519');
  browser = await launchBrowser();
  context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
  await context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: env.url });
  page = await context.newPage();
  page.on('framenavigated', (frame) => {
    if (frame === page.mainFrame()) navigations++;
  });
  page.on('request', (r) => {
    if (r.resourceType() === 'script') scripts.push(r.url());
  });
  page.on('console', (m) => {
    if (m.type() === 'error' && /Content Security Policy|Refused to/.test(m.text())) {
      a11y.push(`CSP: ${m.text()}`);  // reported with the other page checks
    }
  });
});

after(async () => {
  await operator?.context.close();
  await member?.context.close();
  await browser?.close();
});

step('signed out, / shows the sign-in page', async () => {
  await page.goto(`${env.url}/`);
  await page.waitForURL(/\/sign-in$/);
  await page.getByRole('heading', { name: 'Sign in' }).waitFor();
  assert.ok(await page.getByRole('button', { name: 'Send magic link' }).isVisible());
  assert.ok(await page.getByRole('link', { name: 'Forgot your password?' }).isVisible());
  await checkA11y('sign-in');
  await screenshots(page, 'sign-in');
  // Empty fields: said beside the field, in people's words, before any request.
  let logins = 0;
  const countLogins = (r) => { if (r.url().includes('/api/v1/auth/login')) logins += 1; };
  page.on('request', countLogins);
  await page.getByRole('button', { name: 'Sign in', exact: true }).click();
  await page.getByText('Enter your email address.').waitFor();
  assert.equal(await page.getByLabel('Email').evaluate((el) => el === document.activeElement), true);
  await page.getByLabel('Email').fill('nobody@example.test');
  await page.getByRole('button', { name: 'Sign in', exact: true }).click();
  await page.getByText('Enter your password.').waitFor();
  page.off('request', countLogins);
  assert.equal(logins, 0);
  assert.equal(await page.getByText(/field '/).count(), 0);
  // Wrong password: the error shows, nothing else happens.
  await page.getByLabel('Email').fill('nobody@example.test');
  await page.getByLabel('Password').fill('not the password');
  await page.getByRole('button', { name: 'Sign in', exact: true }).click();
  await page.getByRole('alert').waitFor();
  await screenshots(page, 'sign-in-error');
});

step('sign up, confirm the address from the mail, land on the instances', async () => {
  await page.getByRole('link', { name: 'Create an account' }).click();
  await page.waitForURL(/\/sign-up$/);
  await page.getByLabel('Email').fill(EMAIL);
  await page.getByLabel('Password', { exact: true }).fill(PASSWORD);
  // The second password field says what it is for, and a mismatch is refused beside it, unsent.
  const confirm = page.getByLabel('Confirm password');
  assert.match(await page.locator('#sign-up-confirm-hint').textContent(), /same password again/);
  await confirm.fill(`${PASSWORD}x`);
  let signUps = 0;
  const countSignUps = (r) => {
    if (r.url().endsWith('/api/v1/auth/signup')) signUps++;
  };
  page.on('request', countSignUps);
  await page.getByRole('button', { name: 'Create account' }).click();
  const mismatch = page.locator('#sign-up-confirm-error');
  await mismatch.waitFor();
  assert.match(await mismatch.textContent(), /two passwords differ/);
  assert.equal(await confirm.getAttribute('aria-invalid'), 'true');
  assert.equal(signUps, 0);
  await checkA11y('sign-up-mismatch');
  await screenshots(page, 'sign-up-mismatch');
  await confirm.fill(PASSWORD);  // editing clears the error
  await mismatch.waitFor({ state: 'detached' });
  await checkA11y('sign-up');
  await screenshots(page, 'sign-up');
  await page.getByRole('button', { name: 'Create account' }).click();
  await page.getByRole('heading', { name: 'Check your mail' }).waitFor();
  page.off('request', countSignUps);
  assert.equal(signUps, 1);
  await checkA11y('sign-up-sent');

  const link = await mailedLink(EMAIL, '/auth/prove-address');
  await page.goto(link);  // the server's page: a GET uses nothing up
  // It says why it asks for the password again.
  assert.match(await page.locator('body').textContent(), /Why again: whoever opens this mailed link owns the account/);
  await screenshots(page, 'prove-address');
  await page.getByLabel(/Password/).fill(PASSWORD);
  await page.getByRole('button', { name: /Confirm and sign in/ }).click();
  await page.waitForURL(`${env.url}/`);
  await page.getByRole('heading', { name: 'Instances', exact: true }).waitFor();
  await page.getByRole('heading', { name: 'No instances yet' }).waitFor();
  await page.getByText('Live', { exact: true }).waitFor();
  assert.equal(await page.locator('.user-button .email').textContent(), EMAIL);
});

step('no payment method: the red banner, gone once the operator records a card', async () => {
  const banner = page.getByRole('region', { name: 'Payment method' });
  await banner.waitFor();
  assert.match(await banner.textContent(), /No payment method on file/);
  await checkA11y('instances-empty');
  await screenshots(page, 'instances-empty-banner');
  // Its action leads to the billing page's way to add a card, focused there; what the page says
  // is for this person: no operator command, no placeholder to fill in, no sentence twice.
  await banner.getByRole('link').click();
  await page.waitForURL(/\/billing#add-card$/);
  await page.getByRole('heading', { name: 'Payment method' }).waitFor();
  await eventually(async () => page.evaluate(() => document.activeElement?.id === 'add-card'), 5000, 'focus on adding a card');
  const billingText = await page.locator('main').textContent();
  assert.doesNotMatch(billingText, /set-card|YOUR_EMAIL/);
  assert.equal(billingText.match(/joining a queue does not/gi)?.length, 1);
  await checkA11y('billing-no-card');
  await screenshots(page, 'billing-no-card');
  await page.goBack();
  await banner.waitFor();
  // The manual provider: the operator records the card with the CLI.
  await operatorCli('admin', 'billing', 'set-card', EMAIL, '--brand', 'visa', '--last4', '4242', '--exp', '12/2030');
  await page.evaluate(() => window.dispatchEvent(new Event('focus')));  // the person comes back
  await banner.waitFor({ state: 'detached', timeout: 20000 });
});

step('a pasted private key is refused beside the field and nothing is stored', async () => {
  await page.getByRole('button', { name: 'New instance' }).first().click();
  const panel = page.getByRole('dialog', { name: 'New instance' });
  await panel.waitFor();
  await panel.getByRole('heading', { name: 'Add an SSH key' }).waitFor();  // no keys yet: open
  await checkA11y('create-panel');
  await screenshots(page, 'create-panel');

  const posts = [];
  const onRequest = (r) => {
    if (r.method() === 'POST' && r.url().includes('/api/v1/ssh-keys')) posts.push(r.postData() ?? '');
  };
  page.on('request', onRequest);
  await panel.getByLabel('Key name').fill('laptop');
  await panel.getByLabel('Public key').fill(key.privateText);
  await panel.getByRole('button', { name: 'Save key' }).click();
  const error = panel.locator('#key-public-error');
  await error.waitFor();
  assert.match(await error.textContent(), /private key/i);
  assert.equal(await panel.getByLabel('Public key').getAttribute('aria-invalid'), 'true');
  await checkA11y('add-key-private-refused');
  await screenshots(page, 'add-key-private-refused');
  page.off('request', onRequest);
  assert.deepEqual(posts, [], 'the private key was sent to the server');
  const stored = await page.request.get(`${env.url}/api/v1/ssh-keys`);
  assert.equal((await stored.json()).items.length, 0);

  // What the server refuses shows beside the field too (here: not a key at all); editing the
  // field first takes the stale error away.
  await panel.getByLabel('Public key').fill('ssh-ed25519 this-is-not-a-key');
  await error.waitFor({ state: 'detached' });
  await panel.getByRole('button', { name: 'Save key' }).click();
  await error.waitFor();
  assert.doesNotMatch(await error.textContent(), /private key/i);
  assert.ok((await error.textContent()).length > 10);
  assert.equal((await (await page.request.get(`${env.url}/api/v1/ssh-keys`)).json()).items.length, 0);

  // A name longer than the API takes stops at its limit, and the field says so (nothing is cut
  // off unseen); a name the API refuses anyway shows its reason beside the name, gone on editing.
  const keyName = panel.getByLabel('Key name');
  await keyName.fill('k'.repeat(70));
  assert.equal((await keyName.inputValue()).length, 64);
  assert.match(await panel.getByTestId('key-name-count').textContent(), /64 of 64 characters: the most/);
  await keyName.fill('laptop!');
  assert.match(await panel.getByTestId('key-name-count').textContent(), /^7 of 64 characters$/);
  await panel.getByLabel('Public key').fill(key.publicLine);
  await panel.getByRole('button', { name: 'Save key' }).click();
  const nameError = panel.locator('#key-name-error');
  await nameError.waitFor();
  assert.equal(await keyName.getAttribute('aria-invalid'), 'true');
  await screenshots(page, 'add-key-name-refused');
  await keyName.fill('laptop');
  await nameError.waitFor({ state: 'detached' });
  assert.equal((await (await page.request.get(`${env.url}/api/v1/ssh-keys`)).json()).items.length, 0);
});

step('add the ssh-keygen key and launch: the card turns running by itself', async () => {
  const panel = page.getByRole('dialog', { name: 'New instance' });
  await panel.getByLabel('Public key').fill(key.publicLine);
  await panel.getByRole('button', { name: 'Save key' }).click();
  await panel.getByRole('heading', { name: 'Add an SSH key' }).waitFor({ state: 'detached' });
  await eventually(
    async () => /^laptop/.test(await panel.getByLabel('SSH key').locator('option:checked').textContent()),
    10000,
    'the new key chosen in the picker',
  );

  await panel.getByLabel('Name').fill(INSTANCE);
  assert.equal(await panel.getByTestId('create-name-count').textContent(), `${INSTANCE.length} of 63 characters`);
  assert.ok(await panel.getByRole('radio', { name: /spark-1x/ }).isChecked());
  const before = navigations;
  await panel.getByRole('button', { name: 'Launch instance' }).click();
  await panel.waitFor({ state: 'detached' });
  const c = card(INSTANCE);
  await c.waitFor();
  await c.locator('.badge[data-status="provisioning"], .badge[data-status="running"]').waitFor();
  if (await c.locator('.badge[data-status="provisioning"]').count()) {
    await screenshots(page, 'instance-provisioning');
  }
  await c.locator('.badge[data-status="running"]').waitFor({ timeout: 240000 });
  assert.equal(navigations, before, 'the page reloaded or navigated: it must update by itself');
  assert.match(await c.textContent(), /spark-1x/);
  assert.match(await c.textContent(), /no GPU attached/);
  await c.getByTestId('ssh-command').waitFor();
  await eventually(async () => !/Cost so far—/.test((await c.textContent()).replace(/\s+/g, '')), 15000, 'the cost so far');
});

step('the SSH command copied from the page runs with ssh and lands in the instance', async () => {
  const c = card(INSTANCE);
  const shown = (await c.getByTestId('ssh-command').textContent()).trim();
  await c.getByRole('button', { name: `Copy the SSH command of ${INSTANCE}` }).click();
  await c.getByRole('button', { name: /^Copied the SSH command/ }).waitFor();
  const copied = await page.evaluate(() => navigator.clipboard.readText());
  assert.equal(copied, shown);
  const instances = await (await page.request.get(`${env.url}/api/v1/instances`)).json();
  const hostname = instances.items.find((i) => i.name === INSTANCE).hostname;
  const out = await eventually(() => sshAsShown(copied, key.privatePath, 'hostname'), 60000, 'ssh into the instance', 2000);
  assert.equal(out.trim(), hostname);
  await checkA11y('instances-running');
  await screenshots(page, 'instances-running');
  // On a phone the command wraps only between its words: no word breaks across lines, and the
  // box's text is still the one-line command.
  await page.setViewportSize({ width: 375, height: 812 });
  const words = await c.getByTestId('ssh-command').evaluate((el) =>
    [...el.querySelectorAll('.word')].map((w) => ({ text: w.textContent, lines: w.getClientRects().length, nowrap: getComputedStyle(w).whiteSpace })),
  );
  assert.equal(words.map((w) => w.text).join(' '), shown);
  for (const w of words) {
    assert.equal(w.lines, 1, `"${w.text}" breaks across lines`);
    assert.equal(w.nowrap, 'nowrap');
  }
  await page.setViewportSize({ width: 1280, height: 900 });
});

step('without a clipboard API the command is selected with a Ctrl+C hint, never "Copied"', async () => {
  // A second browser context, as from another machine over plain http: no navigator.clipboard.
  const other = await browser.newContext({ viewport: { width: 375, height: 812 } });
  await other.addInitScript(() => {
    Object.defineProperty(Navigator.prototype, 'clipboard', { get: () => undefined, configurable: true });
  });
  const p = await other.newPage();
  try {
    await p.goto(`${env.url}/sign-in`);
    await p.getByLabel('Email').fill(EMAIL);
    await p.getByLabel('Password').fill(PASSWORD);
    await p.getByRole('button', { name: 'Sign in', exact: true }).click();
    const c = p.locator(`article[data-instance="${INSTANCE}"]`);
    await c.getByTestId('ssh-command').waitFor();
    await c.getByRole('button', { name: `Copy the SSH command of ${INSTANCE}` }).click();
    await c.getByText(/press Ctrl\+C/).waitFor();
    assert.equal(await c.getByRole('button', { name: /Copied/ }).count(), 0);
    const selected = await p.evaluate(() => window.getSelection()?.toString() ?? '');
    assert.equal(selected.trim(), (await c.getByTestId('ssh-command').textContent()).trim());
    await p.screenshot({ path: `${env.artifacts}/copy-fallback-375.png`, fullPage: true });
  } finally {
    await other.close();
  }
});

step('a full GPU type offers the queue: dashed cards with their position; exit queue', async () => {
  // spark-1x is full (web-alpha holds the only host): the panel offers its queue.
  await page.getByRole('button', { name: 'New instance' }).first().click();
  let panel = page.getByRole('dialog', { name: 'New instance' });
  await panel.getByText(/Full: choosing it enters the queue/).waitFor();
  await panel.getByLabel('Name').fill('web-beta');
  await panel.getByRole('button', { name: 'Enter queue' }).click();
  await panel.waitFor({ state: 'detached' });
  const beta = page.locator('article[data-queue-entry="web-beta"]');
  await beta.waitFor();
  assert.equal(await beta.getByTestId('queue-position').textContent(), '1');
  assert.match(await beta.locator('.badge').textContent(), /queued/);

  // spark-2x has no linked pair here, so it is not online: choosing it joins its queue too.
  await page.getByRole('button', { name: 'New instance' }).first().click();
  panel = page.getByRole('dialog', { name: 'New instance' });
  await panel.getByRole('radio', { name: /spark-2x/ }).check();
  await panel.getByLabel('Name').fill('web-gamma');
  await panel.getByRole('button', { name: 'Enter queue' }).click();
  await panel.waitFor({ state: 'detached' });
  const gamma = page.locator('article[data-queue-entry="web-gamma"]');
  await gamma.waitFor();
  await checkA11y('instances-with-queue');
  await screenshots(page, 'instances-with-queue');
  await gamma.getByRole('button', { name: 'Exit queue for web-gamma' }).click();
  await gamma.waitFor({ state: 'detached' });
  assert.equal(await beta.count(), 1);
});

step('restart: the badge flips to restarting, the SSH command hides, and both come back', async () => {
  const c = card(INSTANCE);
  await c.getByRole('button', { name: `Restart ${INSTANCE}` }).click();
  await c.locator('.badge[data-status="restarting"]').waitFor({ timeout: 30000 });
  assert.equal(await c.getByTestId('ssh-command').count(), 0);
  await screenshots(page, 'instance-restarting');
  await c.locator('.badge[data-status="running"]').waitFor({ timeout: 180000 });
  await c.getByTestId('ssh-command').waitFor();
});

step('with the stream cut, a delete and a queue launch happen; a stale restart says gone; the page resyncs', async () => {
  // A second tab of the same person, reaching the server through a proxy the test can cut.
  const proxy = await startCuttableProxy(env.url);
  const tab = await context.newPage();
  let tabNavigations = 0;
  tab.on('framenavigated', (frame) => {
    if (frame === tab.mainFrame()) tabNavigations++;
  });
  try {
    await tab.goto(`${proxy.url}/`);
    const tabCard = (name) => tab.locator(`article[data-instance="${name}"]`);
    await tabCard(INSTANCE).locator('.badge[data-status="running"]').waitFor();
    await tab.locator('article[data-queue-entry="web-beta"]').waitFor();
    await tab.locator('.stream-live').waitFor();
    const loaded = tabNavigations;

    // Cut the tab off (its event stream breaks), then change things behind its back: web-alpha
    // is deleted, which frees the host, and web-beta is launched from the queue.
    proxy.setMode('down');
    await tab.locator('.stream-reconnecting').waitFor({ timeout: 20000 });
    const list = async () => (await (await page.request.get(`${env.url}/api/v1/instances`)).json()).items;
    const alpha = (await list()).find((i) => i.name === INSTANCE);
    assert.equal((await page.request.delete(`${env.url}/api/v1/instances/${alpha.id}`)).status(), 204);
    await eventually(async () => {
      const items = await list();
      return !items.some((i) => i.name === INSTANCE) && items.some((i) => i.name === 'web-beta' && i.status === 'running');
    }, 180000, 'web-alpha gone and web-beta running (launched from the queue)');

    // The tab can reach the server again, but its stream cannot: it is stale and still shows
    // web-alpha running. A restart from it says the instance is gone.
    proxy.setMode('no-stream');
    assert.equal(await tabCard(INSTANCE).locator('.badge[data-status="running"]').count(), 1);
    await tabCard(INSTANCE).getByRole('button', { name: `Restart ${INSTANCE}` }).click();
    await tab.getByText(`${INSTANCE} is gone`).waitFor();
    await tabCard(INSTANCE).waitFor({ state: 'detached' });
    await tab.setViewportSize({ width: 375, height: 812 });
    await tab.screenshot({ path: `${env.artifacts}/stale-restart-gone-375.png`, fullPage: true });

    // The stream comes back: its snapshot shows web-beta as a running instance, the dashed card
    // gone, all without a reload.
    proxy.setMode('pass');
    await tabCard('web-beta').locator('.badge[data-status="running"]').waitFor({ timeout: 60000 });
    await tab.locator('article[data-queue-entry="web-beta"]').waitFor({ state: 'detached' });
    await tab.locator('.stream-live').waitFor();
    assert.equal(tabNavigations, loaded, 'the tab reloaded: it must resynchronise by itself');
    // The first tab, never cut, followed live all along.
    await card('web-beta').locator('.badge[data-status="running"]').waitFor();
    assert.equal(await card(INSTANCE).count(), 0);
  } finally {
    await tab.close();
    proxy.close();
  }
});

step('delete asks first, naming the instance, then the card goes', async () => {
  const name = 'web-beta';
  const c = card(name);
  await c.getByRole('button', { name: `Delete ${name}` }).click();
  const dialog = page.getByRole('dialog', { name: `Delete ${name}?` });
  await dialog.waitFor();
  await checkA11y('delete-confirmation');
  await screenshots(page, 'delete-confirmation');
  await dialog.getByRole('button', { name: `Delete ${name}` }).click();
  await dialog.waitFor({ state: 'detached' });
  await c.waitFor({ state: 'detached', timeout: 120000 });
  await page.getByRole('heading', { name: 'No instances yet' }).waitFor();
  const left = await (await page.request.get(`${env.url}/api/v1/instances`)).json();
  assert.equal(left.total, 0);
});

/** Opens `label` from the user menu of `p` (signed in as `email`) and waits for its path. */
async function openFromMenu(p, email, label, path) {
  await p.getByRole('button', { name: email }).click();
  await p.getByRole('navigation', { name: 'Pages' }).getByRole('link', { name: label }).click();
  await p.waitForURL(`${env.url}${path}`);
}

step('the usage page: the deleted sessions with duration and cost, the queue history, the chart', async () => {
  // The chart's chunk (uPlot) is not part of a first visit: nothing has loaded it so far.
  assert.deepEqual(scripts.filter((u) => /UsageChart|uPlot/i.test(u)), [], 'the chart was loaded before the usage page');
  await openFromMenu(page, EMAIL, 'Usage', '/usage');
  await page.getByRole('heading', { name: 'Usage', level: 1 }).waitFor();
  const alpha = page.locator('[data-testid="sessions"] tr[data-session="web-alpha"]');
  await alpha.waitFor();
  const alphaText = (await alpha.textContent()).replace(/\s+/g, ' ');
  assert.doesNotMatch(alphaText, /active/, 'web-alpha was deleted: its session has ended');
  assert.match(await alpha.getByTestId('duration').textContent(), /min|under a minute/);
  assert.match(await alpha.getByTestId('cost').textContent(), /\d.*\d+ minutes?/);
  const instances = await (await page.request.get(`${env.url}/api/v1/usage/sessions`)).json();
  const row = instances.items.find((i) => i.name === 'web-alpha');
  assert.ok(alphaText.includes(row.instance_id), 'the instance id is shown');
  await page.locator('[data-testid="sessions"] tr[data-session="web-beta"]').waitFor();
  // The queue history, newest first: web-gamma left the queue, web-beta was launched from it.
  const queue = page.getByTestId('queue-history');
  assert.match(await queue.locator('tr[data-queue-entry="web-gamma"]').getByTestId('outcome').textContent(), /cancelled/);
  assert.match(await queue.locator('tr[data-queue-entry="web-beta"]').getByTestId('outcome').textContent(), /launched/);
  // The chart of the last 30 days, loaded now, from its own chunk.
  await page.locator('[data-testid="usage-chart"] canvas').first().waitFor();
  assert.ok(scripts.some((u) => /UsageChart/.test(u)), 'the chart came from its own chunk');
  assert.match(await page.getByTestId('daily-summary').textContent(), /[1-9]\d* billed minutes? on [12] days?/);
  await page.getByRole('button', { name: 'Refresh the sessions' }).click();
  await alpha.waitFor();
  await checkA11y('usage');
  await screenshots(page, 'usage');
});

step('the billing page: the card the operator recorded, labelled so, and the running total', async () => {
  await openFromMenu(page, EMAIL, 'Billing', '/billing');
  await page.getByRole('heading', { name: 'Billing', level: 1 }).waitFor();
  assert.match(await page.getByTestId('payment-method').textContent(), /Visa ending 4242/);
  await page.getByText(/Recorded by the operator/).waitFor();
  assert.match(await page.getByTestId('running-total').textContent(), /\d/);
  await page.getByText(/No invoices yet/).waitFor();
  await checkA11y('billing');
  await screenshots(page, 'billing');
  // Removing asks first and says what it means; cancelled here (the card pays for what follows).
  await page.getByRole('button', { name: 'Remove payment method' }).click();
  const dialog = page.getByRole('dialog', { name: 'Remove the payment method?' });
  await dialog.waitFor();
  assert.match(await dialog.textContent(), /Running instances keep running/);
  await checkA11y('billing-remove-confirmation');
  await screenshots(page, 'billing-remove-confirmation');
  await dialog.getByRole('button', { name: 'Cancel' }).click();
  await dialog.waitFor({ state: 'detached' });
});

/** The stand-in's Checkout Session `id` (its success_url and cancel_url are the server's). */
async function checkoutSession(id) {
  const all = await (await page.request.get(`${env.stripe}/_test/objects/checkout_sessions`)).json();
  return all.data.find((s) => s.id === id);
}

step('a card through Stripe Checkout: cancelled comes back and says so; paid puts it on file', async () => {
  // "Replace card" opens Stripe's page (here the stand-in's): the browser leaves the app.
  await page.getByRole('button', { name: 'Replace card' }).click();
  await page.waitForURL(`${env.stripe}/c/pay/**`);
  let id = new URL(page.url()).pathname.split('/').pop();
  let session = await checkoutSession(id);
  assert.equal(session.mode, 'setup');
  assert.equal(session.success_url, `${env.url}/billing?card_setup=done`);
  // The person cancels on Stripe's page, which sends the browser to the cancel URL.
  await page.goto(session.cancel_url);
  await page.getByText('Card setup cancelled: nothing was added or charged.').waitFor();
  assert.equal(new URL(page.url()).search, '', 'the page keeps no card_setup in the address');
  assert.match(await page.getByTestId('payment-method').textContent(), /Visa ending 4242/);
  await checkA11y('billing-card-setup-cancelled');
  await screenshots(page, 'billing-card-setup-cancelled');

  // Again, and this time the card is entered: the stand-in completes the session and sends its
  // signed webhooks to the server, then the browser follows the success URL as Stripe's would.
  await page.getByRole('button', { name: 'Replace card' }).click();
  await page.waitForURL(`${env.stripe}/c/pay/**`);
  id = new URL(page.url()).pathname.split('/').pop();
  const paid = await page.request.post(`${env.stripe}/_test/checkout/sessions/${id}/complete`, {
    data: { card: { brand: 'mastercard', last4: '4444', exp_month: 11, exp_year: 2031 }, deliver: true },
  });
  assert.equal(paid.status(), 200);
  for (const d of (await paid.json()).deliveries) assert.equal(d.status, 200);
  session = await checkoutSession(id);
  await page.goto(session.success_url);
  await page.getByText('Card added: Mastercard ending 4444. You can launch instances now.').waitFor({ timeout: 70000 });
  assert.match(await page.getByTestId('payment-method').textContent(), /Mastercard ending 4444/);
  await page.getByText(/Held by Stripe/).waitFor();
  await checkA11y('billing-card-added');
  await screenshots(page, 'billing-card-added');
});

let member;  // the second person's browser context and page
const MEMBER = 'bob@example.test';

step('team: create, invite by email, revoke; the invitee opens the mailed link signed out', async () => {
  await openFromMenu(page, EMAIL, 'Team', '/team');
  await page.getByRole('heading', { name: 'You are not in a team' }).waitFor();
  await checkA11y('team-none');
  await screenshots(page, 'team-none');
  await page.getByLabel('Team name').fill('Lab');
  await page.getByRole('button', { name: 'Create team' }).click();
  await page.locator(`tr[data-member="${EMAIL}"]`).waitFor();
  assert.match(await page.locator(`tr[data-member="${EMAIL}"]`).textContent(), /owner/);

  // A team starts without a card (the owner's own stays hers, shown as such): she adds the
  // team's through Checkout, a Stripe customer of the team's own.
  await openFromMenu(page, EMAIL, 'Billing', '/billing');
  await page.getByTestId('own-payment-method').waitFor();
  await page.getByRole('button', { name: 'Add a card' }).click();
  await page.waitForURL(`${env.stripe}/c/pay/**`);
  const teamCheckout = new URL(page.url()).pathname.split('/').pop();
  const teamPaid = await page.request.post(`${env.stripe}/_test/checkout/sessions/${teamCheckout}/complete`, {
    data: { card: { brand: 'visa', last4: '1881', exp_month: 10, exp_year: 2032 }, deliver: true },
  });
  assert.equal(teamPaid.status(), 200);
  await page.goto((await checkoutSession(teamCheckout)).success_url);
  await page.getByText('Card added: Visa ending 1881. You can launch instances now.').waitFor({ timeout: 70000 });
  await openFromMenu(page, EMAIL, 'Team', '/team');

  // An invitation revoked at once: its row goes.
  await page.getByLabel('Email address').fill('carol@example.test');
  await page.getByRole('button', { name: 'Send invite' }).click();
  const carol = page.locator('tr[data-invite="carol@example.test"]');
  await carol.waitFor();
  await carol.getByRole('button', { name: 'Revoke the invitation to carol@example.test' }).click();
  await carol.waitFor({ state: 'detached' });

  await page.getByLabel('Email address').fill(MEMBER);
  await page.getByRole('button', { name: 'Send invite' }).click();
  await page.locator(`tr[data-invite="${MEMBER}"]`).waitFor();
  await checkA11y('team-owner');
  await screenshots(page, 'team-owner');

  // The mail's link opens the app's page; signed out it names the team and asks to sign in.
  const link = await mailedLink(MEMBER, '/team/accept');
  const context2 = await browser.newContext({ viewport: { width: 1280, height: 900 } });
  member = { context: context2, page: await context2.newPage(), link };
  const p = member.page;
  await p.goto(link);
  await p.getByRole('heading', { name: 'Join Lab' }).waitFor();
  assert.ok((await p.textContent('main')).includes(MEMBER), 'the page names the invited address');
  await p.getByRole('link', { name: 'Sign in to accept' }).waitFor();
  await checkA11yOf(p, 'team-accept-signed-out');
  await screenshots(p, 'team-accept-signed-out');
  // Opening the link accepted nothing.
  const team = await (await page.request.get(`${env.url}/api/v1/team`)).json();
  assert.equal(team.members.length, 1);
  assert.equal(team.invites.length, 1);
});

step('the invitee signs up with that address, accepts with the button, launches billed to the team', async () => {
  const p = member.page;
  await p.getByRole('link', { name: 'Create an account' }).click();
  await p.waitForURL(/\/sign-up$/);
  await p.getByLabel('Email').fill(MEMBER);
  await p.getByLabel('Password', { exact: true }).fill(PASSWORD);
  await p.getByLabel('Confirm password').fill(PASSWORD);
  await p.getByRole('button', { name: 'Create account' }).click();
  await p.getByRole('heading', { name: 'Check your mail' }).waitFor();
  await p.goto(await mailedLink(MEMBER, '/auth/prove-address'));
  await p.getByLabel(/Password/).fill(PASSWORD);
  await p.getByRole('button', { name: /Confirm and sign in/ }).click();
  await p.waitForURL(`${env.url}/`);

  await p.goto(member.link);
  const join = p.getByRole('button', { name: 'Join Lab' });
  await join.waitFor();
  await checkA11yOf(p, 'team-accept');
  await screenshots(p, 'team-accept');
  await join.click();
  await p.getByRole('heading', { name: 'Welcome to Lab' }).waitFor();
  assert.equal(new URL(p.url()).search, '', 'the used token left the address bar');
  await screenshots(p, 'team-accept-done');
  // The used link opened again by the member it made: where they are, not "ask again".
  await p.goto(member.link);
  await p.getByTestId('already-member').waitFor();
  assert.match(await p.getByTestId('already-member').textContent(), /already a member of Lab/);
  assert.doesNotMatch(await p.textContent('main'), /invite you again/);
  await p.getByRole('button', { name: 'Open the team page' }).click();
  await p.waitForURL(`${env.url}/team`);
  await p.locator(`tr[data-member="${MEMBER}"]`).waitFor();
  assert.equal(await p.getByRole('button', { name: 'Send invite' }).count(), 0, 'a member cannot invite');
  await checkA11yOf(p, 'team-member');
  await screenshots(p, 'team-member');

  // The member launches, billed to the team (whose own card its owner added through Checkout).
  const bobKey = await sshKeygen('bob_ed25519');
  await p.getByRole('button', { name: 'New instance' }).first().click();
  const panel = p.getByRole('dialog', { name: 'New instance' });
  await panel.getByRole('heading', { name: 'Add an SSH key' }).waitFor();
  await panel.getByLabel('Key name').fill('bob-laptop');
  await panel.getByLabel('Public key').fill(bobKey.publicLine);
  await panel.getByRole('button', { name: 'Save key' }).click();
  await panel.getByRole('heading', { name: 'Add an SSH key' }).waitFor({ state: 'detached' });
  await panel.getByLabel('Name').fill('bob-one');
  await panel.getByRole('button', { name: 'Launch instance' }).click();
  await panel.waitFor({ state: 'detached' });
  await p.locator('article[data-instance="bob-one"] .badge[data-status="running"]').waitFor({ timeout: 240000 });
});

step('the owner sees the member\'s minutes; the member sees "billing managed by" and no card', async () => {
  const bobRow = page.locator(`[data-testid="team-usage"] tr[data-person="${MEMBER}"]`);
  await eventually(async () => {
    await page.getByRole('button', { name: 'Refresh' }).click();
    return (await bobRow.count()) === 1 && Number(await bobRow.getByTestId('member-minutes').textContent()) >= 1;
  }, 20000, 'the member\'s minutes on the owner\'s team page');
  assert.match(await page.locator(`tr[data-member="${MEMBER}"]`).textContent(), /member/);
  await checkA11y('team-owner-usage');
  await screenshots(page, 'team-owner-usage');

  const p = member.page;
  await openFromMenu(p, MEMBER, 'Billing', '/billing');
  const managed = p.getByTestId('billing-managed');
  await managed.waitFor();
  assert.match(await managed.textContent(), /Billing managed by Lab/);
  assert.doesNotMatch(await p.textContent('main'), /4242|Visa/, 'a member sees no card facts');
  await checkA11yOf(p, 'billing-member');
  await screenshots(p, 'billing-member');
});

step('the owner removes the member after a confirmation; the member\'s team instance goes', async () => {
  await page.locator(`tr[data-member="${MEMBER}"]`).getByRole('button', { name: `Remove ${MEMBER}` }).click();
  const dialog = page.getByRole('dialog', { name: `Remove ${MEMBER}?` });
  await dialog.waitFor();
  assert.match(await dialog.textContent(), /billed to the team are deleted/);
  await checkA11y('team-remove-confirmation');
  await screenshots(page, 'team-remove-confirmation');
  await dialog.getByRole('button', { name: 'Remove member' }).click();
  await dialog.waitFor({ state: 'detached' });
  await page.locator(`tr[data-member="${MEMBER}"]`).waitFor({ state: 'detached' });
  await eventually(async () => (await (await member.page.request.get(`${env.url}/api/v1/instances`)).json()).total === 0,
    120000, 'the removed member\'s team instance deleted');
});

/** Opens the create panel on `p` and joins the full spark-1x's queue as `name`. */
async function enterQueue(p, name) {
  await p.getByRole('button', { name: 'New instance' }).first().click();
  const panel = p.getByRole('dialog', { name: 'New instance' });
  await panel.getByText(/Full: choosing it enters the queue/).waitFor();
  await panel.getByLabel('Name').fill(name);
  await panel.getByRole('button', { name: 'Enter queue' }).click();
  await panel.waitFor({ state: 'detached' });
  const queued = p.locator(`article[data-queue-entry="${name}"]`);
  await queued.waitFor();
  return queued;
}

step('queue: one person holds the only host, another waits in line, gets it when it frees, without a reload', async () => {
  // The platform has one host with one slot (spark-web). The owner (A) takes it; the former
  // member (B, solo now, with a card the operator records) joins the queue in a second context.
  await operatorCli('admin', 'billing', 'set-card', MEMBER, '--brand', 'visa', '--last4', '1881', '--exp', '10/2031');
  await page.goto(`${env.url}/`);
  await page.getByRole('button', { name: 'New instance' }).first().click();
  const panel = page.getByRole('dialog', { name: 'New instance' });
  await panel.getByLabel('Name').fill('web-delta');
  await panel.getByRole('button', { name: 'Launch instance' }).click();
  await panel.waitFor({ state: 'detached' });
  await card('web-delta').locator('.badge[data-status="running"]').waitFor({ timeout: 240000 });

  const p = member.page;
  await p.setViewportSize({ width: 375, height: 812 });
  await p.goto(`${env.url}/`);
  await p.getByRole('heading', { name: 'Instances', exact: true }).waitFor();
  let bNavigations = 0;
  p.on('framenavigated', (frame) => {
    if (frame === p.mainFrame()) bNavigations++;
  });
  const waiting = await enterQueue(p, 'bob-two');
  assert.equal(await waiting.getByTestId('queue-position').textContent(), '1');
  assert.match(await waiting.locator('.badge').textContent(), /queued/);
  await checkA11yOf(p, 'queue-waiting');
  await screenshots(p, 'queue-waiting');

  // A deletes; B's dashed card becomes a running instance by itself.
  const c = card('web-delta');
  await c.getByRole('button', { name: 'Delete web-delta' }).click();
  const dialog = page.getByRole('dialog', { name: 'Delete web-delta?' });
  await dialog.getByRole('button', { name: 'Delete web-delta' }).click();
  await c.waitFor({ state: 'detached', timeout: 120000 });
  await p.locator('article[data-instance="bob-two"] .badge[data-status="running"]').waitFor({ timeout: 240000 });
  await waiting.waitFor({ state: 'detached' });
  assert.equal(bNavigations, 0, 'the page reloaded or navigated: it must update by itself');
  await checkA11yOf(p, 'queue-launched');
  await screenshots(p, 'queue-launched');
  // A waits in turn now, so the operator's queue page has someone in it.
  await enterQueue(page, 'web-epsilon');
});

let operator;  // the operator's browser context and page

/** Opens the operator page `label` from the operator pages' own navigation. */
async function openOperatorTab(p, label, path) {
  await p.getByRole('navigation', { name: 'Operator pages' }).getByRole('link', { name: label, exact: true }).click();
  await p.waitForURL(`${env.url}${path}`);
  await p.getByRole('heading', { name: label, level: 1 }).waitFor();
}

/** The page is no wider than a 375 px phone: wide tables scroll inside their card. */
async function fitsAPhone(p, label) {
  const original = p.viewportSize();
  await p.setViewportSize({ width: 375, height: 812 });
  await p.waitForTimeout(150);
  const width = await p.evaluate(() => document.documentElement.scrollWidth);
  if (original) await p.setViewportSize(original);
  assert.ok(width <= 375, `${label} is ${width} px wide at 375 px`);
}

/** At 375 px every cell of the table's rows lies inside the screen: no sideways scrolling. */
async function tableFitsAPhone(p, testId) {
  const original = p.viewportSize();
  await p.setViewportSize({ width: 375, height: 812 });
  await p.waitForTimeout(150);
  const out = await p.locator(`[data-testid="${testId}"]`).evaluate((table) => {
    const wide = [];
    for (const cell of table.querySelectorAll('tbody td')) {
      const r = cell.getBoundingClientRect();
      if (r.width > 0 && r.right > 375.5) wide.push(`${cell.getAttribute('data-label')}: ${Math.round(r.right)}`);
      if (!cell.getAttribute('data-label')) wide.push('a cell without a label');
    }
    const region = table.parentElement;
    return { wide, scrolls: region.scrollWidth > region.clientWidth + 1 };
  });
  if (original) await p.setViewportSize(original);
  assert.deepEqual(out.wide, [], `${testId}: cells past 375 px`);
  assert.equal(out.scrolls, false, `${testId} scrolls sideways at 375 px`);
}

async function checkOperatorPage(label) {
  await checkA11yOf(operator.page, label);
  await fitsAPhone(operator.page, label);
  await screenshots(operator.page, label);
}

step('operator pages: hosts (drain and undrain after asking), GPU types, every instance, queues', async () => {
  assert.deepEqual(scripts.filter((u) => /OperatorPages/.test(u)), [], 'a person who is not an operator loaded the operator pages');
  const context3 = await browser.newContext({ viewport: { width: 1280, height: 900 } });
  operator = { context: context3, page: await context3.newPage(), scripts: [] };
  const p = operator.page;
  p.on('request', (r) => {
    if (r.resourceType() === 'script') operator.scripts.push(r.url());
  });
  await p.goto(`${env.url}/sign-in`);
  await p.getByLabel('Email').fill(env.operatorEmail);
  await p.getByLabel('Password').fill(env.operatorPassword);
  await p.getByRole('button', { name: 'Sign in', exact: true }).click();
  await p.getByRole('heading', { name: 'Instances', exact: true }).waitFor();
  assert.deepEqual(operator.scripts.filter((u) => /OperatorPages/.test(u)), [], 'the operator pages came with the first visit');
  await openFromMenu(p, env.operatorEmail, 'Operator', '/admin/hosts');
  await p.getByRole('heading', { name: 'Hosts', level: 1 }).waitFor();
  assert.ok(operator.scripts.some((u) => /OperatorPages/.test(u)), 'the operator pages came from their own chunk');

  const host = p.locator('[data-testid="hosts"] tr[data-host="spark-web"]');
  await host.waitFor();
  assert.equal(await host.getByTestId('host-state').textContent(), 'in service');
  assert.match(await host.textContent(), /spark-1x/);
  // Its id (what the audit's target filter takes) and the name of the instance on it are shown.
  const shownHost = (await (await p.request.get(`${env.url}/api/v1/admin/hosts`)).json()).items.find((h) => h.name === 'spark-web');
  assert.equal((await host.getByTestId('host-id').textContent()).trim(), shownHost.id);
  if (shownHost.instance_id) {
    assert.ok(shownHost.instance_name, 'the API names the instance on the host');
    assert.ok((await host.getByTestId('host-instance').textContent()).includes(shownHost.instance_name));
  }
  await tableFitsAPhone(p, 'hosts');
  await checkOperatorPage('operator-hosts');
  // Drain asks first; the host then says drained, and spark-1x has no free capacity.
  await host.getByRole('button', { name: 'Drain spark-web' }).click();
  let dialog = p.getByRole('dialog', { name: 'Drain spark-web?' });
  await dialog.waitFor();
  assert.match(await dialog.textContent(), /keep running/);
  await checkA11yOf(p, 'operator-drain-confirmation');
  await screenshots(p, 'operator-drain-confirmation');
  await dialog.getByRole('button', { name: 'Drain host' }).click();
  await dialog.waitFor({ state: 'detached' });
  await eventually(async () => (await host.getByTestId('host-state').textContent()) === 'drained', 10000, 'the host drained');
  const hosts = await (await p.request.get(`${env.url}/api/v1/admin/hosts`)).json();
  assert.equal(hosts.items.find((h) => h.name === 'spark-web').drained, true);
  await screenshots(p, 'operator-hosts-drained');
  await host.getByRole('button', { name: 'Undrain spark-web' }).click();
  dialog = p.getByRole('dialog', { name: 'Undrain spark-web?' });
  await dialog.getByRole('button', { name: 'Undrain host' }).click();
  await dialog.waitFor({ state: 'detached' });
  await eventually(async () => (await host.getByTestId('host-state').textContent()) === 'in service', 10000, 'the host undrained');

  await openOperatorTab(p, 'GPU types', '/admin/gpu-types');
  const type = p.locator('[data-testid="gpu-types"] tr[data-gpu-type="spark-1x"]');
  await type.waitFor();
  assert.match(await type.textContent(), /0\.65.*\/ hour/);
  await checkOperatorPage('operator-gpu-types');

  await openOperatorTab(p, 'All instances', '/admin/instances');
  const bobs = p.locator(`[data-testid="all-instances"] tr[data-instance="bob-two"][data-owner="${MEMBER}"]`);
  await bobs.waitFor();
  await bobs.locator('.badge[data-status="running"]').waitFor();
  assert.match(await bobs.textContent(), /spark-web/);
  await tableFitsAPhone(p, 'all-instances');
  await checkOperatorPage('operator-instances');
  // The filter by status: nothing of bob's is deleting.
  await p.getByLabel('Status').selectOption('deleting');
  await p.getByRole('button', { name: 'Filter' }).click();
  await bobs.waitFor({ state: 'detached' });
  await p.getByLabel('Status').selectOption('');
  await p.getByRole('button', { name: 'Filter' }).click();
  await bobs.waitFor();

  await openOperatorTab(p, 'Queues', '/admin/queues');
  const entry = p.locator(`[data-testid="queues"] tr[data-queue-entry="web-epsilon"][data-owner="${EMAIL}"]`);
  await entry.waitFor();
  assert.equal((await entry.getByTestId('position').textContent()).trim(), '1');
  await tableFitsAPhone(p, 'queues');
  await checkOperatorPage('operator-queues');
});

step('operator pages: the audit log by actor, relay sessions, people and the operator flag', async () => {
  const p = operator.page;
  await openOperatorTab(p, 'Audit log', '/admin/audit');
  await p.locator('[data-testid="audit"] tr').first().waitFor();
  await p.getByLabel('Actor (email or person id)').fill(env.operatorEmail);
  await p.getByRole('button', { name: 'Filter' }).click();
  // The table says which request its rows came from: wait for the filtered one (the unfiltered
  // rows stay on screen until it arrives).
  const byActor = `/api/v1/admin/audit?page=1&actor=${encodeURIComponent(env.operatorEmail)}`;
  await p.locator(`[data-testid="audit"][data-source="${byActor}"]`).waitFor();
  await p.locator('[data-testid="audit"] tr[data-action="host.drain"]').waitFor();
  await p.locator('[data-testid="audit"] tr[data-action="host.undrain"]').waitFor();
  assert.equal(await p.locator('[data-testid="audit"] tr[data-action="instance.create"]').count(), 0, 'the operator created no instance');
  await tableFitsAPhone(p, 'audit');
  await checkOperatorPage('operator-audit');
  // A filter the server refuses: its reason only, never also "No audit events match".
  await p.getByLabel('Actor (email or person id)').fill('x'.repeat(2000));
  await p.getByRole('button', { name: 'Filter' }).click();
  await p.locator('main .form-error[role="alert"]').waitFor();
  assert.equal(await p.getByText('No audit events match.').count(), 0);
  await p.getByLabel('Actor (email or person id)').fill(env.operatorEmail);
  await p.getByRole('button', { name: 'Filter' }).click();
  await p.locator(`[data-testid="audit"][data-source="${byActor}"]`).waitFor();

  // The first person's ssh through the relay, with whom, which instance and how many bytes.
  await openOperatorTab(p, 'Relay sessions', '/admin/relay-sessions');
  const ssh = p.locator('[data-testid="relay-sessions"] tbody tr', { hasText: EMAIL }).first();
  await ssh.waitFor();
  assert.match(await ssh.textContent(), new RegExp(`${INSTANCE}-`));
  assert.match(await ssh.textContent(), /SHA256:/);
  await tableFitsAPhone(p, 'relay-sessions');
  await checkOperatorPage('operator-relay-sessions');

  await openOperatorTab(p, 'People', '/admin/people');
  assert.match(await p.getByTestId('sign-up-policy').textContent(), /Open: anyone may sign up/);
  const ada = p.locator(`[data-testid="people"] tr[data-person="${EMAIL}"]`);
  await ada.waitFor();
  assert.equal(await ada.getByTestId('operator').textContent(), '—');
  await checkOperatorPage('operator-people');
  await tableFitsAPhone(p, 'people');
  await p.setViewportSize({ width: 375, height: 812 });  // the action is reachable on a phone
  await ada.getByRole('button', { name: `Make operator ${EMAIL}` }).click();
  let dialog = p.getByRole('dialog', { name: `Make ${EMAIL} an operator?` });
  await dialog.waitFor();
  await checkA11yOf(p, 'operator-people-confirmation');
  await screenshots(p, 'operator-people-confirmation');
  await dialog.getByRole('button', { name: 'Make operator' }).click();
  await dialog.waitFor({ state: 'detached' });
  await eventually(async () => (await ada.getByTestId('operator').textContent()) === 'operator', 10000, 'ada an operator');
  assert.equal((await (await page.request.get(`${env.url}/api/v1/me`)).json()).is_operator, true);
  await ada.getByRole('button', { name: `Remove operator ${EMAIL}` }).click();
  dialog = p.getByRole('dialog', { name: `Remove ${EMAIL} as operator?` });
  await dialog.getByRole('button', { name: 'Remove operator' }).click();
  await dialog.waitFor({ state: 'detached' });
  await eventually(async () => (await ada.getByTestId('operator').textContent()) === '—', 10000, 'ada no operator again');
  await p.setViewportSize({ width: 1280, height: 900 });
  assert.equal((await page.request.get(`${env.url}/api/v1/admin/people`)).status(), 403);
  await operator.context.close();
  operator = undefined;
  await member.context.close();
  member = undefined;
});

step('sign out from the user menu under the email', async () => {
  await page.getByRole('button', { name: EMAIL }).click();
  await page.getByRole('button', { name: 'Sign out' }).click();
  await page.waitForURL(/\/sign-in$/);
  const me = await page.request.get(`${env.url}/api/v1/me`);
  assert.equal(me.status(), 401);
  await screenshots(page, 'signed-out');
});

step('signed out: a magic link signs in after its button; forgot password mails a reset link', async () => {
  await page.getByLabel('Email').fill(EMAIL);
  await page.getByRole('button', { name: 'Send magic link' }).click();
  await page.getByText(/a sign-in link is on its way/).waitFor();
  const link = await mailedLink(EMAIL, '/auth/magic-link');
  await page.goto(link);  // the server's page: the GET signs nobody in
  assert.equal((await page.request.get(`${env.url}/api/v1/me`)).status(), 401);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.waitForURL(`${env.url}/`);
  await page.getByRole('heading', { name: 'Instances', exact: true }).waitFor();
  await page.getByRole('button', { name: EMAIL }).click();
  await page.getByRole('button', { name: 'Sign out' }).click();
  await page.waitForURL(/\/sign-in$/);

  await page.getByRole('link', { name: 'Forgot your password?' }).click();
  await page.waitForURL(/\/forgot-password$/);
  await page.getByLabel('Email').fill(EMAIL);
  await page.getByRole('button', { name: 'Send the link' }).click();
  await page.getByText(/a link to set a new password is on its way/).waitFor();
  await checkA11y('forgot-password');
  await screenshots(page, 'forgot-password-sent');
  assert.match(await mailedLink(EMAIL, '/auth/reset-password'), /token=/);
});

step('an operator without a card is shown set-card with their own address, its words whole', async () => {
  const ctx = await browser.newContext({ viewport: { width: 375, height: 812 } });
  try {
    const p = await ctx.newPage();
    await p.goto(`${env.url}/sign-in`);
    await p.getByLabel('Email').fill(env.operatorEmail);
    await p.getByLabel('Password').fill(env.operatorPassword);
    await p.getByRole('button', { name: 'Sign in', exact: true }).click();
    await p.getByRole('heading', { name: 'Instances', exact: true }).waitFor();
    await p.goto(`${env.url}/billing`);
    const line = p.getByTestId('operator-set-card');
    await line.waitFor();
    const text = (await line.textContent()).replace(/\s+/g, ' ');
    assert.ok(text.includes(`gpuwerk admin billing set-card ${env.operatorEmail}`), text);
    assert.doesNotMatch(text, /YOUR_EMAIL|EMAIL\b/);
    const words = await line.evaluate((el) => [...el.querySelectorAll('.word')].map((w) => w.getClientRects().length));
    assert.ok(words.length >= 8 && words.every((n) => n === 1), `words across lines: ${words}`);
    await checkA11yOf(p, 'billing-operator');
    await screenshots(p, 'billing-operator');
  } finally {
    await ctx.close();
  }
});

step('a deep link signed out: sign-in, then the page the link named', async () => {
  const ctx = await browser.newContext({ viewport: { width: 375, height: 812 } });
  try {
    const p = await ctx.newPage();
    // A mistyped address: the app's page, status 404, never the API's JSON.
    const missing = await p.goto(`${env.url}/nope`);
    assert.equal(missing.status(), 404);
    await p.getByRole('heading', { name: 'No such page' }).waitFor();
    assert.equal(new URL(p.url()).pathname, '/nope');
    await checkA11yOf(p, 'not-found');
    await p.goto(`${env.url}/usage?month=2026-01`);
    await p.waitForURL((u) => u.pathname === '/sign-in');
    assert.equal(new URL(p.url()).searchParams.get('next'), '/usage?month=2026-01');
    await p.getByLabel('Email').fill(EMAIL);
    await p.getByLabel('Password').fill(PASSWORD);
    await p.getByRole('button', { name: 'Sign in', exact: true }).click();
    await p.getByRole('heading', { name: 'Usage', level: 1 }).waitFor();
    const u = new URL(p.url());
    assert.equal(u.pathname + u.search, '/usage?month=2026-01');
  } finally {
    await ctx.close();
  }
});

test('no serious or critical accessibility violation and no blocked resource on any page', () => {
  assert.deepEqual(a11y, []);
});

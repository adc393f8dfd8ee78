// Drives the hub's dashboard in Debian's Chromium (headless, no browser download) with
// playwright-core, for tests/dashboard_browser.rs. It prints `STEP {"step": …}` lines for what it
// saw, and waits for `GO {…}` lines on stdin where the test must act first (a CLI call, a device
// checking in). Every wait has a deadline; nothing sleeps. It also reports every dialog, console
// error and page error it saw (the safety test fails on any).
//
// node dashboard.cjs PLAYWRIGHT_CORE_DIR CHROMIUM USER_DATA_DIR LOGIN_URL SCENARIO ARG
//   SCENARIO main:    ARG = the path of the device page's screenshot
//   SCENARIO hostile: ARG = the hostile device's id
//   SCENARIO measure: ARG = how many loads of the devices page to time (benches/dashboard.rs)
'use strict';

const [playwrightDir, chromiumPath, userDataDir, loginUrl, scenario, arg] = process.argv.slice(2);
const { chromium } = require(playwrightDir);
const readline = require('readline');

const say = (step, detail) => process.stdout.write('STEP ' + JSON.stringify({ step, ...detail }) + '\n');
const lines = readline.createInterface({ input: process.stdin });
const waiting = [];
const queued = [];
lines.on('line', (l) => {
  if (!l.startsWith('GO ')) return;
  const v = JSON.parse(l.slice(3));
  if (waiting.length) waiting.shift()(v); else queued.push(v);
});
lines.on('close', () => process.exit(0));
const go = () => queued.length ? Promise.resolve(queued.shift()) : new Promise((r) => waiting.push(r));

const seen = { dialogs: [], consoleErrors: [], pageErrors: [] };

async function main(page, context) {
  await page.goto(loginUrl);
  await page.waitForSelector('body[data-rendered="devices"]', { timeout: 15000 });
  const cookies = (await context.cookies()).map((c) => ({ name: c.name, httpOnly: c.httpOnly, sameSite: c.sameSite }));
  const script_cookie = await page.evaluate(() => document.cookie);
  say('login', { url: page.url(), cookies, script_cookie });

  await page.waitForSelector('tr[data-device="02:00:00:00:00:01"]', { timeout: 15000 });
  await page.waitForSelector('tr[data-device="02:00:00:00:00:02"]', { timeout: 15000 });
  const ids = await page.$$eval('tr[data-device]', (rows) => rows.map((r) => r.dataset.device));
  say('devices', { ids });

  // Keyboard: focus the device's link and press Enter.
  await page.focus('tr[data-device="02:00:00:00:00:01"] a');
  await page.keyboard.press('Enter');
  await page.waitForSelector('body[data-rendered="device"]', { timeout: 15000 });
  await page.waitForSelector('section[data-live="true"]', { timeout: 15000 });
  const form = page.locator('form[data-tool="self.audio_speaker.set_volume"]');
  const volume = form.locator('input[name="volume"]');
  say('device-page', { min: await volume.getAttribute('min'), max: await volume.getAttribute('max'), type: await volume.getAttribute('type') });

  await volume.fill('50');
  await form.locator('button[type="submit"]').click();
  await form.locator('.result-body').waitFor({ timeout: 15000 });
  say('volume-50', { result: await form.locator('.result').innerText() });
  await go();

  await volume.fill('500');
  await form.locator('button[type="submit"]').click();
  const error = form.locator('.field-error').filter({ hasText: 'volume' });
  await error.waitFor({ timeout: 15000 });
  await form.locator('.result').filter({ hasText: 'Nothing was sent' }).waitFor({ timeout: 15000 });
  say('volume-500', { error: await error.innerText(), result: await form.locator('.result').innerText(), invalid: await volume.getAttribute('aria-invalid') });
  await go();

  // A call made by the CLI has just ended: it shows up, answered, within a second.
  const t0 = Date.now();
  const row = page.locator('#traffic-rows tr[data-answered="true"]').filter({ hasText: '"volume": 33' });
  await row.first().waitFor({ timeout: 1000 });
  say('traffic', { ms: Date.now() - t0, row: await row.first().innerText() });
  await page.screenshot({ path: arg, fullPage: true });
  say('screenshot', { path: arg });

  await page.goto(new URL('/#/admission', loginUrl.split('?')[0]).href);
  await page.waitForSelector('body[data-rendered="admission"]', { timeout: 15000 });
  say('admission', {});
  const { code } = await go();
  const t1 = Date.now();
  const pending = page.locator(`tr[data-code="${code}"]`);
  await pending.waitFor({ timeout: 1000 });
  const pendingMs = Date.now() - t1;
  const pendingText = await pending.innerText();
  // Beside it, Deny: the row offers both, and this test approves.
  await pending.locator('button', { hasText: 'Deny' }).waitFor({ timeout: 1000 });
  await pending.locator('button', { hasText: 'Approve' }).click();
  const outcome = page.locator('#admission-outcome pre');
  await outcome.waitFor({ timeout: 15000 });
  say('approved', { pending_ms: pendingMs, pending: pendingText, answer: JSON.parse(await outcome.innerText()) });
  const { device } = await go();
  await page.goto(new URL('/#/devices', loginUrl.split('?')[0]).href);
  await page.waitForSelector(`tr[data-device="${device}"]`, { timeout: 15000 });
  say('in', { device });
}

async function hostile(page) {
  const base = loginUrl.split('?')[0];
  await page.goto(loginUrl);
  await page.waitForSelector('body[data-rendered="devices"]', { timeout: 15000 });
  await page.waitForSelector(`tr[data-device="${arg}"]`, { timeout: 15000 });
  const listText = await page.locator(`tr[data-device="${arg}"]`).innerText();
  await page.goto(new URL('/#/device/' + encodeURIComponent(arg), base).href);
  await page.waitForSelector('body[data-rendered="device"]', { timeout: 15000 });
  await page.waitForSelector('section[data-live="true"]', { timeout: 15000 });
  const forms = page.locator('form[data-tool]');
  const names = await page.$$eval('form[data-tool]', (fs) => fs.map((f) => f.querySelector('h3').textContent));
  const descriptions = await page.$$eval('form[data-tool] p.muted', (ps) => ps.map((p) => p.textContent));
  await forms.first().locator('button[type="submit"]').click();
  await forms.first().locator('.result-body').waitFor({ timeout: 15000 });
  const result = await forms.first().locator('.result').innerText();
  // The traffic pane shows the same result: wait for it, answered.
  await page.locator('#traffic-rows tr[data-answered="true"]').first().waitFor({ timeout: 5000 });
  const traffic = await page.locator('#traffic-rows').innerText();
  const dom = await page.evaluate(() => ({
    pwned: typeof window.pwned !== 'undefined',
    title: document.title,
    images: [...document.querySelectorAll('img')].map((i) => i.getAttribute('src')),
    scripts: [...document.querySelectorAll('script')].map((s) => s.getAttribute('src')),
    handlers: [...document.querySelectorAll('*')].filter((e) => [...e.attributes].some((a) => a.name.startsWith('on'))).length,
  }));
  say('hostile', { list: listText, names, descriptions, result, traffic, dom });
}

// The devices page, loaded `arg` times (the first cold, the rest with the assets cached): the time
// from navigation to the first rendered rows, and the bytes the page moved to get there.
async function measure(page) {
  const runs = [];
  await page.goto(loginUrl);
  for (let i = 0; i < Number(arg); i++) {
    if (i > 0) await page.reload();
    await page.waitForSelector('#device-rows tr', { timeout: 60000 });
    runs.push(await page.evaluate(() => {
      const nav = performance.getEntriesByType('navigation')[0];
      const resources = performance.getEntriesByType('resource');
      const sum = (list, key) => list.reduce((a, e) => a + (e[key] || 0), 0);
      return {
        first_render_ms: performance.now() - (nav ? nav.startTime : 0),
        transferred: (nav ? nav.transferSize : 0) + sum(resources, 'transferSize'),
        decoded: (nav ? nav.decodedBodySize : 0) + sum(resources, 'decodedBodySize'),
        resources: resources.map((e) => ({ name: new URL(e.name).pathname, transferred: e.transferSize, decoded: e.decodedBodySize, ms: e.duration })),
        rows: document.querySelectorAll('#device-rows tr').length,
        count: document.getElementById('device-count').textContent,
      };
    }));
  }
  say('measure', { runs });
}

(async () => {
  const context = await chromium.launchPersistentContext(userDataDir, {
    executablePath: chromiumPath,
    headless: true,
    viewport: { width: 1280, height: 900 },
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
  const page = context.pages()[0] || await context.newPage();
  page.on('dialog', (d) => { seen.dialogs.push(d.type() + ': ' + d.message()); d.dismiss().catch(() => {}); });
  page.on('console', (m) => { if (m.type() === 'error') seen.consoleErrors.push(m.text()); });
  page.on('pageerror', (e) => seen.pageErrors.push(String(e)));
  try {
    if (scenario === 'hostile') await hostile(page); else if (scenario === 'measure') await measure(page); else await main(page, context);
    say('done', seen);
  } catch (e) {
    say('failed', { error: String(e && e.stack || e), ...seen });
  }
  await context.close().catch(() => {});
  process.exit(0);
})();

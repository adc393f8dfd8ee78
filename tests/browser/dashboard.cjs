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
//   SCENARIO layout:  ARG = the device to open; every page at 800, 1280 and 1920 px, light and
//                     dark: any element outside its card or cell, any two overlapping, a page
//                     wider than the window is reported
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

  // Keyboard: focus the device's link and press Enter. The rows are rebuilt every second: the
  // keyboard stays on the device's link through a rebuild (it used to fall back to the page, and
  // Enter went nowhere).
  await page.focus('tr[data-device="02:00:00:00:00:01"] a');
  const before = await page.$('tr[data-device="02:00:00:00:00:01"] a');
  await page.waitForFunction((a) => !a.isConnected, before, { timeout: 5000 });
  const kept = await page.evaluate(() => (document.activeElement && document.activeElement.closest('tr') || {}).dataset?.device || null);
  if (kept !== '02:00:00:00:00:01') throw new Error('the focus left the device link when the rows were rebuilt: ' + kept);
  await page.keyboard.press('Enter');
  await page.waitForSelector('body[data-rendered="device"]', { timeout: 15000 });
  await page.waitForSelector('section[data-live="true"]', { timeout: 15000 });
  // One form at a time: the tool list, its search, then the chosen tool's form.
  const listed = await page.$$eval('#tool-list button[data-tool]', (bs) => bs.map((b) => ({ name: b.dataset.tool, userOnly: !!b.querySelector('.tag') })));
  const formsAtFirst = await page.locator('form[data-tool]').count();
  // A description of several lines keeps them (as text).
  await page.click('#tool-list button[data-tool="self.get_device_status"]');
  const description = await page.locator('form[data-tool="self.get_device_status"] p.desc').innerText();
  const onboarding = await page.locator('section[aria-labelledby="ob-h"] > p').first().innerText();
  await page.fill('#tool-search', 'set_vol');
  const found = await page.$$eval('#tool-list button[data-tool]', (bs) => bs.map((b) => b.dataset.tool));
  await page.click('#tool-list button[data-tool="self.audio_speaker.set_volume"]');
  const form = page.locator('form[data-tool="self.audio_speaker.set_volume"]');
  await form.waitFor({ timeout: 5000 });
  const volume = form.locator('input[name="volume"]');
  const placeholder = await page.$eval('#tool-search', (i) => ({ fits: i.scrollWidth <= i.clientWidth, text: i.placeholder }));
  say('device-page', { min: await volume.getAttribute('min'), max: await volume.getAttribute('max'), type: await volume.getAttribute('type'),
    listed, formsAtFirst, found, forms: await page.locator('form[data-tool]').count(), placeholder, description, onboarding,
    trafficTop: await page.$eval('#traffic-rows', (t) => t.getBoundingClientRect().top + window.scrollY) });

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
  const outcome = page.locator('#admission-outcome .outcome');
  await outcome.waitFor({ timeout: 15000 });
  const headers = await page.$$eval('#pending th, #admitted th', (ths) => ths.map((t) => t.textContent));
  say('approved', { pending_ms: pendingMs, pending: pendingText, headers, text: await outcome.innerText(),
    answer: { device_id: await outcome.getAttribute('data-device'), token: await page.locator('#approved-token').innerText() } });
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

// Every element of a card (`.panel`, a table's scroll box, the header) or of a table cell lies
// inside it (a scroll box: inside what it scrolls), unless a scrolling box between them clips it;
// no two siblings in the flow overlap; the page is no wider than the window; no value (an id,
// an address, a code, a time) is broken across lines; the theme button names the other theme;
// every time reads the one way, with the UTC time on hover. Run in the page.
function layoutProblems() {
  const problems = [];
  const root = document.documentElement;
  if (root.scrollWidth > root.clientWidth + 1) problems.push(`the page is ${root.scrollWidth}px wide in a ${root.clientWidth}px window`);
  const name = (e) => e.tagName.toLowerCase() + (e.id ? '#' + e.id : '') + (typeof e.className === 'string' && e.className.trim() ? '.' + e.className.trim().split(/\s+/).join('.') : '')
    + (e.dataset && e.dataset.tool ? `[data-tool="${e.dataset.tool}"]` : '') + (e.dataset && e.dataset.field ? `[data-field="${e.dataset.field}"]` : '');
  const path = (e) => { const p = []; for (let x = e; x && x !== document.body && p.length < 5; x = x.parentElement) p.unshift(name(x)); return p.join(' > '); };
  const shown = (e) => { const r = e.getBoundingClientRect(); const st = getComputedStyle(e); return r.width > 0 && r.height > 0 && st.visibility !== 'hidden'; };
  const inFlow = (e) => !['absolute', 'fixed'].includes(getComputedStyle(e).position);
  const clips = (e) => { const st = getComputedStyle(e); return st.overflowX !== 'visible' || st.overflowY !== 'visible'; };
  const box = (r) => `${Math.round(r.left)},${Math.round(r.top)} ${Math.round(r.width)}×${Math.round(r.height)}`;
  const inside = (container) => {
    const r0 = container.getBoundingClientRect();
    // A box that scrolls (a table's .table-wrap) holds what lies within its scroll area.
    const c = clips(container) ? { left: r0.left, top: r0.top, right: r0.left + container.scrollWidth, bottom: r0.top + container.scrollHeight, width: container.scrollWidth, height: container.scrollHeight } : r0;
    for (const e of container.querySelectorAll('*')) {
      if (!shown(e) || !inFlow(e)) continue;
      let hidden = false;
      for (let x = e.parentElement; x && x !== container; x = x.parentElement) if (clips(x) || !inFlow(x)) { hidden = true; break; }
      if (hidden) continue;
      const r = e.getBoundingClientRect();
      if (r.left < c.left - 1 || r.right > c.right + 1 || r.top < c.top - 1 || r.bottom > c.bottom + 1) {
        problems.push(`${path(e)} (${box(r)}) overflows ${name(container)} (${box(c)})`);
      }
    }
  };
  document.querySelectorAll('header, main .panel, main .table-wrap, main td, main th').forEach(inside);
  const overlap = (a, b) => {
    for (const x of a.getClientRects()) for (const y of b.getClientRects()) {
      if (Math.min(x.right, y.right) - Math.max(x.left, y.left) > 1 && Math.min(x.bottom, y.bottom) - Math.max(x.top, y.top) > 1) return true;
    }
    return false;
  };
  for (const parent of document.querySelectorAll('header, header *, main, main *')) {
    if (getComputedStyle(parent).position === 'absolute' || !shown(parent)) continue;
    const kids = [...parent.children].filter((k) => shown(k) && inFlow(k) && k.tagName !== 'CANVAS');
    for (let i = 0; i < kids.length; i++) for (let j = i + 1; j < kids.length; j++) {
      if (overlap(kids[i], kids[j])) problems.push(`${path(kids[i])} overlaps ${name(kids[j])}`);
    }
  }
  // A value (a Device-Id or MAC, an address with its port, an activation code, a time) is read
  // whole: its characters lie on one line, wherever it is on the page.
  const VALUE = /(?:[0-9a-f]{2}:){5}[0-9a-f]{2}|\[[0-9a-f:]+\](?::\d+)?|(?:\d{1,3}\.){3}\d{1,3}(?::\d+)?|\b\d{6}\b|\b\d{2}:\d{2}:\d{2}\b|[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/gi;
  const walker = document.createTreeWalker(document.querySelector('main'), NodeFilter.SHOW_TEXT);
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    const parent = node.parentElement;
    if (!parent || !shown(parent) || parent.closest('pre, textarea, script, style')) continue;
    for (const m of node.data.matchAll(VALUE)) {
      const range = document.createRange();
      range.setStart(node, m.index);
      range.setEnd(node, m.index + m[0].length);
      const tops = new Set([...range.getClientRects()].filter((r) => r.width > 0).map((r) => Math.round(r.top)));
      if (tops.size > 1) problems.push(`the value ${m[0]} is broken across ${tops.size} lines in ${path(parent)}`);
    }
  }
  // The theme button says what it will do: switch to the theme the page is not in.
  const button = document.getElementById('theme');
  const isDark = getComputedStyle(document.documentElement).colorScheme.includes('dark');
  if (button && !button.textContent.includes(isDark ? 'light' : 'dark')) problems.push(`the theme button reads "${button.textContent}" on a ${isDark ? 'dark' : 'light'} page`);
  // A latency plot reads as one: bars with the scale and its unit beside them, or words.
  for (const cell of document.querySelectorAll('main td.spark-col')) {
    if (!shown(cell)) continue;
    const said = cell.textContent.trim();
    if (!(cell.querySelector('svg rect') && / ms$/.test(said)) && said !== 'no calls yet') problems.push(`a latency cell reads "${said}" in ${path(cell)}`);
  }
  // One time format, with the UTC time on hover.
  for (const t of document.querySelectorAll('main time')) {
    if (!/^(\d{4}-\d{2}-\d{2} )?\d{2}:\d{2}:\d{2}$/.test(t.textContent) || !/ UTC$/.test(t.title)) problems.push(`a time reads "${t.textContent}" (title "${t.title}") in ${path(t)}`);
  }
  return problems;
}

async function layout(page) {
  const base = loginUrl.split('?')[0];
  await page.goto(loginUrl);
  await page.waitForSelector('body[data-rendered="devices"]', { timeout: 15000 });
  const checked = [];
  const problems = [];
  let approved = false;
  for (const theme of ['light', 'dark']) {
    for (const width of [800, 1280, 1920]) {
      await page.setViewportSize({ width, height: 900 });
      await page.evaluate((t) => localStorage.setItem('mcpdev-theme', t), theme);
      const pages = [
        ['devices', '#/devices', '#device-rows tr'],
        ['device', '#/device/' + encodeURIComponent(arg), 'section[data-live="true"]'],
        ['admission', '#/admission', '#pending, #admitted'],
        ['hub', '#/hub', '.plot canvas'],
      ];
      for (const [what, hash, ready] of pages) {
        await page.goto(new URL('/' + hash, base).href);
        await page.reload();
        await page.waitForSelector(`body[data-rendered="${what}"]`, { timeout: 15000 });
        await page.waitForSelector(ready, { timeout: 15000 });
        if (what === 'device') {
          await page.click('#tool-list button[data-tool="self.audio_speaker.set_volume"]');
          // A refused value: the field shows the CLI's error (validated on change, nothing sent).
          const volume = page.locator('form[data-tool="self.audio_speaker.set_volume"] input[name="volume"]');
          await volume.fill('500');
          await volume.press('Tab');
          await page.locator('form[data-tool="self.audio_speaker.set_volume"] .field-error').filter({ hasText: 'at most 100' }).waitFor({ timeout: 15000 });
        }
        if (what === 'admission' && !approved) {
          await page.locator('#pending tr[data-code] button', { hasText: 'Approve' }).first().click();
          await page.waitForSelector('#admission-outcome .outcome', { timeout: 15000 });
          approved = true;
        }
        if (what === 'hub') await page.waitForFunction(() => document.querySelectorAll('.plot .u-legend').length >= 2, null, { timeout: 15000 });
        if (what === 'devices' && width === 800) {
          // An empty pane says what would appear there.
          await page.fill('#q', 'no-such-device');
          await page.waitForSelector('#device-rows tr.empty', { timeout: 15000 });
          const said = await page.textContent('#device-rows tr.empty');
          if (!/No device matches/.test(said)) problems.push(`devices at ${width} px: an empty search says "${said}"`);
          await page.fill('#q', '');
          await page.waitForSelector('#device-rows tr[data-device]', { timeout: 15000 });
        }
        const dark = await page.evaluate(() => document.documentElement.dataset.theme);
        const found = await page.evaluate(layoutProblems);
        checked.push(`${what} ${width} ${dark}`);
        for (const p of found) problems.push(`${what} at ${width} px, ${dark}: ${p}`);
      }
    }
  }
  say('layout', { checked, problems: problems.slice(0, 60), count: problems.length });
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
    if (scenario === 'hostile') await hostile(page); else if (scenario === 'measure') await measure(page); else if (scenario === 'layout') await layout(page); else await main(page, context);
    say('done', seen);
  } catch (e) {
    say('failed', { error: String(e && e.stack || e), ...seen });
  }
  await context.close().catch(() => {});
  process.exit(0);
})();

// Drives Debian's Chromium (headless, no browser download) with playwright-core: opens the browser
// device page and prints each `MCPDEV {…}` console line of the page on stdout, one per line, plus
// `DRIVER {…}` lines for what the driver itself sees. Runs until its stdin closes.
//
// node drive.cjs PLAYWRIGHT_CORE_DIR CHROMIUM USER_DATA_DIR PAGE_URL
'use strict';

const [playwrightDir, chromiumPath, userDataDir, pageUrl] = process.argv.slice(2);
const { chromium } = require(playwrightDir);

const say = (kind, detail) => process.stdout.write(kind + ' ' + JSON.stringify(detail) + '\n');

(async () => {
  const context = await chromium.launchPersistentContext(userDataDir, {
    executablePath: chromiumPath,
    headless: true,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking',
      '--disable-component-update', '--disable-sync'],
  });
  let closing = false;
  const close = async () => {
    if (closing) return;
    closing = true;
    await context.close().catch(() => {});
    process.exit(0);
  };
  process.stdin.on('end', close);
  process.stdin.on('close', close);
  process.stdin.resume();
  const page = await context.newPage();
  page.on('console', msg => {
    const text = msg.text();
    if (text.startsWith('MCPDEV ')) process.stdout.write(text + '\n');
    else say('DRIVER', { console: msg.type(), text });
  });
  page.on('pageerror', e => say('DRIVER', { pageerror: String(e) }));
  page.on('requestfailed', r => say('DRIVER', { requestfailed: r.method() + ' ' + r.url(), error: (r.failure() || {}).errorText }));
  await page.goto(pageUrl);
  say('DRIVER', { loaded: pageUrl, browser: context.browser() ? context.browser().version() : 'persistent' });
})().catch(e => {
  say('DRIVER', { fatal: String(e && e.stack || e) });
  process.exit(1);
});

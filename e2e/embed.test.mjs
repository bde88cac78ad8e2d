// The embed kit in Debian's headless Chromium: a course page on one origin embeds two panels
// from the lab on another, includes the lab's embed.js, and each iframe fits its panel's
// content: no inner scrollbar, the charts above the frame's fold. Also: no console error on
// either side, and axe finds nothing on the course page.
//
// Needs: DIST_DIR (Trunk's output), CHROMIUM (default /usr/bin/chromium).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { chromium } from 'playwright-core';
import { serve, BASE_ARGS } from './serve.mjs';

const DIST = process.env.DIST_DIR ?? join(import.meta.dirname, '..', 'dist');
const CHROMIUM = process.env.CHROMIUM ?? '/usr/bin/chromium';
const AXE = createRequire(import.meta.url).resolve('axe-core/axe.min.js');
// The iframes' own height before embed.js fits them.
const START_HEIGHT = 150;

let lab;
let course;
let courseUrl;
let browser;

/** The course page: two lab panels in fixed-height iframes, and the lab's embed.js. */
function coursePage(labUrl) {
  const frame = (panel, title) =>
    `<iframe title="${title}" src="${labUrl}?panel=${panel}&amp;embed=1" style="width:100%;height:${START_HEIGHT}px;border:0"></iframe>`;
  return `<!DOCTYPE html>
<html lang="en">
  <head><meta charset="utf-8"><title>A course page</title></head>
  <body>
    <main>
      <h1>KV-cache memory and the memory ledger</h1>
      <p>Change one assumption and watch the tradeoff.</p>
      ${frame('kv-cache', 'Decoding-policy lab: KV-cache memory')}
      ${frame('memory', 'Decoding-policy lab: GPU memory ledger')}
    </main>
    <script src="${labUrl}embed.js"></script>
  </body>
</html>`;
}

/** The height of a framed lab page's content, as embed.js measures it. */
const contentHeight = (frame) => frame.evaluate(() => {
  const margin = parseFloat(getComputedStyle(document.body).marginBottom) || 0;
  return Math.ceil(document.body.getBoundingClientRect().bottom + window.scrollY + margin);
});

/** Waits until the iframe `element` is as tall as its content (within a pixel); its height. */
async function fitted(element, frame) {
  const deadline = Date.now() + 20_000;
  for (;;) {
    const height = await element.evaluate((el) => el.getBoundingClientRect().height);
    const content = await contentHeight(frame);
    if (Math.abs(height - content) <= 1) return height;
    if (Date.now() > deadline) assert.fail(`the frame is ${height} px for ${content} px of content`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

before(async () => {
  lab = await serve(DIST);
  const html = coursePage(lab.url);
  course = createServer((req, res) => {
    res.writeHead(200, { 'content-type': 'text/html' });
    res.end(html);
  });
  await new Promise((resolve) => course.listen(0, '127.0.0.1', resolve));
  // Another port is another origin.
  courseUrl = `http://127.0.0.1:${course.address().port}/`;
  assert.notEqual(new URL(courseUrl).origin, new URL(lab.url).origin);
  browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: [...BASE_ARGS, '--disable-gpu'] });
});

after(async () => {
  await browser?.close();
  lab?.server.close();
  course?.close();
});

test('a course page on another origin fits two embedded panels to their content', async () => {
  const context = await browser.newContext();
  const page = await context.newPage();
  const errors = [];
  page.on('pageerror', (e) => errors.push(String(e)));
  page.on('console', (m) => { if (m.type() === 'error') errors.push(m.text()); });
  await page.goto(courseUrl);
  const frames = page.locator('iframe');
  assert.equal(await frames.count(), 2);
  for (let i = 0; i < 2; i += 1) {
    const element = await frames.nth(i).elementHandle();
    const frame = await element.contentFrame();
    await frame.locator('section.panel h2').waitFor();
    await frame.locator('table.mirror').first().waitFor();
    // The frame grows from its own height to its panel's.
    assert.ok((await fitted(element, frame)) > START_HEIGHT);
    const fits = await frame.evaluate(() => document.documentElement.scrollHeight <= window.innerHeight + 1);
    assert.ok(fits, `frame ${i} still scrolls inside`);
  }
  // A panel whose content changes (a bad value: the problem listed, the results held back)
  // changes its frame's height with it.
  const first = await frames.nth(0).elementHandle();
  const kv = await first.contentFrame();
  const before = await first.evaluate((el) => el.getBoundingClientRect().height);
  await kv.locator('#kv-cache-l').fill('-1');
  await kv.getByTestId('problem-summary').waitFor();
  assert.notEqual(await fitted(first, kv), before);

  await page.addScriptTag({ path: AXE });
  const violations = await page.evaluate(async () => {
    const result = await window.axe.run(document, { resultTypes: ['violations'], iframes: false });
    return result.violations.map((v) => `${v.id}: ${v.nodes.map((n) => n.target.join(' ')).join(', ')}`);
  });
  assert.deepEqual(violations, [], violations.join('\n'));
  assert.deepEqual(errors, []);
  await context.close();
});

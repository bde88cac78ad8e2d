// The embed kit in Debian's headless Chromium: a course page on one origin embeds two panels
// from the lab on another, includes the lab's embed.js, and each iframe fits its panel's
// content: no inner scrollbar, the charts above the frame's fold. Each frame shows only the
// controls its `show=` lists and states the others; one is dark. Also: no console error on
// either side, and axe finds nothing on the course page. Then the full lab's "Embed this
// experiment" copies the snippet for the experiment on screen, and the snippet's frame is
// that experiment.
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
  const frame = (query, title) =>
    `<iframe title="${title}" src="${labUrl}?${query}&amp;embed=1" style="width:100%;height:${START_HEIGHT}px;border:0"></iframe>`;
  return `<!DOCTYPE html>
<html lang="en">
  <head><meta charset="utf-8"><title>A course page</title></head>
  <body>
    <main>
      <h1>KV-cache memory and the memory ledger</h1>
      <p>Change one assumption and watch the tradeoff.</p>
      ${frame('panel=kv-cache&amp;show=l,B', 'Decoding-policy lab: KV-cache memory')}
      ${frame('panel=memory&amp;show=mb&amp;theme=dark', 'Decoding-policy lab: GPU memory ledger')}
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
  // Each frame shows the controls its show= lists, and states the others in one sentence.
  const visibleInputs = (frame) => frame.evaluate(() =>
    [...document.querySelectorAll('form.controls input, form.controls select, form.controls button')]
      .filter((el) => el.checkVisibility()).map((el) => el.id || el.textContent));
  const [kvFrame, memoryFrame] = await Promise.all([0, 1].map(async (i) => (await frames.nth(i).elementHandle()).contentFrame()));
  assert.deepEqual(await visibleInputs(kvFrame), ['kv-cache-l', 'kv-cache-b']);
  const kvFixed = await kvFrame.getByTestId('fixed-settings').textContent();
  assert.match(kvFixed, /^This experiment varies L: decoder layers \(count\), B: active sequences \(count\)\. Fixed: S: cached tokens per sequence \(tokens\): \d+; /);
  assert.deepEqual(await visibleInputs(memoryFrame), ['memory-mb']);
  assert.match(await memoryFrame.getByTestId('fixed-settings').textContent(), /Device memory \(GB\): 24;/);
  assert.equal(await memoryFrame.evaluate(() => document.documentElement.dataset.theme), 'dark');

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

test('the full lab writes the embed code for the experiment on screen, and its frame is that experiment', async () => {
  const context = await browser.newContext();
  await context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: new URL(lab.url).origin });
  const page = await context.newPage();
  const errors = [];
  page.on('pageerror', (e) => errors.push(String(e)));
  page.on('console', (m) => { if (m.type() === 'error') errors.push(m.text()); });
  await page.goto(`${lab.url}?panel=step&temperature=0.7&top_k=3&seed=11`);
  await page.locator('figure.stage').first().waitFor();

  await page.getByText('Embed this experiment').click();
  await page.locator('#embed-show-temperature').check();
  await page.getByRole('button', { name: 'Copy embed code' }).click();
  await page.getByTestId('embed-said').filter({ hasText: 'Copied' }).waitFor();
  assert.equal(await page.getByTestId('embed-said').textContent(),
    'Copied the embed code; the frame shows 1 control and states the rest.');
  const copied = await page.evaluate(() => navigator.clipboard.readText());
  assert.equal(copied, await page.locator('#embed-snippet').inputValue());
  assert.match(copied, /^<iframe src="[^"]+" title="Decoding-policy lab: Decoding step, varying Temperature" style="width:100%;height:600px;border:0" loading="lazy"><\/iframe>\n<script src="[^"]+embed\.js" async><\/script>$/);
  await page.addScriptTag({ path: AXE });
  const violations = await page.evaluate(async () => {
    const result = await window.axe.run(document, { resultTypes: ['violations'] });
    return result.violations.map((v) => `${v.id}: ${v.nodes.map((n) => n.target.join(' ')).join(', ')}`);
  });
  assert.deepEqual(violations, [], violations.join('\n'));

  const src = new URL(copied.match(/src="([^"]+)"/)[1].replaceAll('&amp;', '&'));
  const query = Object.fromEntries(src.searchParams);
  assert.deepEqual(
    { panel: query.panel, embed: query.embed, show: query.show, temperature: query.temperature, top_k: query.top_k, seed: query.seed },
    { panel: 'step', embed: '1', show: 'temperature', temperature: '0.7', top_k: '3', seed: '11' },
  );
  await page.goto(src.href);
  await page.locator('figure.stage').first().waitFor();
  assert.ok(await page.locator('#temperature').isVisible());
  for (const hidden of ['#top-k', '#seed', '#order', '#logits', '#model-prompt']) {
    assert.ok(await page.locator(hidden).isHidden(), `${hidden} is shown`);
  }
  const fixed = await page.getByTestId('fixed-settings').textContent();
  // Every knob of the policy table the panel offers (issue 34), by the table's labels.
  assert.match(fixed, /^This experiment varies Temperature\. Fixed: Logits: [^;]+; Engine: lab; Stage order: hf; Top-k: 3; Top-p: 1; Min-p: 0; Seed: 11; Prompt tokens: none; Generated tokens: none; Dynamic temperature range: 0; Dynamic temperature exponent: 1; Min keep: 0; Typical-p: 1; ε-cutoff: 0; η-cutoff: 0; Top-nσ: none; Top-H: none; XTC probability: 0; XTC threshold: 0\.1; Repetition penalty: 1; .*; Forbidden ids: none; Logit bias: none; Bad words: none; Sequence bias: none; End-of-sequence ids: none; Min new tokens: 0\.$/);
  // The learner varies the one control; the step follows.
  await page.locator('#temperature').fill('2');
  await page.waitForURL(/temperature=2/);

  // A name the panel does not have is said, with the names it does.
  await page.goto(`${lab.url}?panel=step&embed=1&show=temprature`);
  const unknown = page.getByRole('alert').filter({ hasText: 'show=' });
  await unknown.waitFor();
  assert.match(await unknown.textContent(), /"temprature", which this panel does not have\. Its controls: logits, engine, order, temperature, top_k, top_p, min_p, seed, prompt_ids, output_ids, dynatemp_range, dynatemp_exp, min_keep, /);
  assert.deepEqual(errors, []);
  await context.close();
});

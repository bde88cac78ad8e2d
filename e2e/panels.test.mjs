// The whole lab in Debian's headless Chromium: every panel passes axe-core (chart view and
// table view) and is photographed; Your turn runs in the model worker and its outputs are
// the CLI's; a generation is driven with the keyboard alone; the URL
// holds the state (permalinks, Back and Forward, embed=1) and malformed state is answered
// inline; a record is exported, imported and replayed; a panic is reported and the page
// recovers; no request leaves the origin; after a first visit the lab loads and generates
// with the network off. Sizes are asserted against their budgets and printed as `BENCH …`
// lines; load times are printed, not asserted.
//
// Needs: DIST_DIR (Trunk's output), CHROMIUM (default /usr/bin/chromium); SCREENSHOT_DIR
// (default target/screenshots) receives one PNG per panel.
import { test, before, after } from 'node:test';
import { execFileSync } from 'node:child_process';
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';
import { chromium } from 'playwright-core';
import { serve, afterGpuStart, BASE_ARGS } from './serve.mjs';

const DIST = process.env.DIST_DIR ?? join(import.meta.dirname, '..', 'dist');
const CHROMIUM = process.env.CHROMIUM ?? '/usr/bin/chromium';
const CLI = process.env.DECODE_LAB_BIN ?? join(import.meta.dirname, '..', 'target', 'debug', 'decode-lab');
const SHOTS = process.env.SCREENSHOT_DIR ?? join(import.meta.dirname, '..', 'target', 'screenshots');
const AXE = createRequire(import.meta.url).resolve('axe-core/axe.min.js');
const RUN_TIMEOUT = 120_000;
const PANELS = ['step', 'generate', 'your-turn', 'compare', 'kv-cache', 'memory', 'checkpoint', 'capacity', 'observe'];

let server;
let url;
let browser;

before(async () => {
  ({ server, url } = await serve(DIST));
  browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: [...BASE_ARGS, '--disable-gpu'] });
  mkdirSync(SHOTS, { recursive: true });
});

after(async () => {
  await browser?.close();
  server?.close();
});

/** A fresh context and page; page errors are collected, as is every requested URL. */
async function open(search = '', options = {}) {
  const context = await browser.newContext(options);
  const page = await context.newPage();
  const errors = [];
  const requests = [];
  page.on('pageerror', (e) => errors.push(String(e)));
  context.on('request', (r) => requests.push(r.url()));
  if (search !== null) await page.goto(url + search);
  return { context, page, errors, requests };
}

/** axe-core over the whole page; fails listing every violation and its elements. */
async function assertAccessible(page, label) {
  await page.addScriptTag({ path: AXE });
  const violations = await page.evaluate(async () => {
    const result = await window.axe.run(document, { resultTypes: ['violations'] });
    return result.violations.map((v) => `${v.id} (${v.impact}): ${v.help}\n    ${v.nodes.map((n) => n.target.join(' ')).join('\n    ')}`);
  });
  assert.deepEqual(violations, [], `axe-core on ${label}:\n${violations.join('\n')}`);
}

const panel = (page) => page.locator('main section.panel').first();

/** Waits for the Generate panel to finish; fails with its message if it failed. */
async function generated(page) {
  await page.waitForFunction(() => ['done', 'failed'].includes(document.querySelector('#generate')?.dataset.state),
    null, { timeout: RUN_TIMEOUT });
  if (await page.locator('#generate').getAttribute('data-state') !== 'done') {
    assert.fail(`the run failed: ${await page.locator('#generate [role=alert]').first().textContent()}`);
  }
  return JSON.parse(await page.getByTestId('run-record').textContent());
}

test('every panel passes axe-core in chart and table view, and is photographed', async () => {
  const { context, page, errors } = await open(null);
  for (const slug of PANELS) {
    for (const view of ['', '&view=table']) {
      await page.goto(`${url}?panel=${slug}${view}`);
      await panel(page).locator('h2').waitFor();
      assert.equal(await page.locator('nav [aria-current=page]').getAttribute('href').then((h) => new URLSearchParams(h).get('panel')), slug);
      await assertAccessible(page, `${slug}${view}`);
      if (!view) await page.screenshot({ path: join(SHOTS, `${slug}.png`), fullPage: true });
    }
  }
  // Every chart has a table mirror with a caption, always in the DOM.
  for (const slug of PANELS) {
    await page.goto(`${url}?panel=${slug}`);
    await panel(page).locator('h2').waitFor();
    const charts = await page.locator('svg.chart').count();
    const tables = await page.locator('table.mirror caption').count();
    assert.ok(tables >= charts, `${slug}: ${charts} charts but ${tables} captioned tables`);
  }
  assert.deepEqual(errors, []);
  await context.close();
});

test('a generation on the CPU, with its trace, chart and tooltips, passes axe-core', async () => {
  const { context, page, errors } = await open(null);
  // The weights download shows a progress bar (watched from the first byte of the page).
  await page.addInitScript(() => {
    window.sawProgress = [];
    new MutationObserver(() => {
      const bar = document.querySelector('#gen-download');
      if (bar) window.sawProgress.push([Number(bar.value), Number(bar.max)]);
    }).observe(document, { subtree: true, childList: true, attributes: true });
  });
  // Greedy: the policy's probability is 1 at every step; the model's own is not.
  await page.goto(`${url}?panel=generate&backend=cpu&max=12&temperature=0&run=1`);
  const record = await generated(page);
  assert.equal(record.steps.length, 12);
  const steps = page.getByTestId('steps');
  const modelCells = await steps.locator('tbody tr td:nth-of-type(4)').evaluateAll((cells) => cells.map((c) => c.dataset.value));
  assert.deepEqual(modelCells, record.steps.map((s) => String(s.model_prob)), 'the steps table shows each model_prob');
  assert.ok(record.steps.every((s) => s.prob === 1 && s.model_prob < 1 && s.model_top[0].id === s.token), JSON.stringify(record.steps[0]));
  const progress = await page.evaluate(() => window.sawProgress);
  assert.ok(progress.length > 0, 'a progress bar was shown while the model downloaded');
  assert.ok(progress.some(([value, max]) => max > 1e6 && value <= max), JSON.stringify(progress.slice(0, 5)));
  assert.equal(await page.locator('.output .tok').count(), 12);
  assert.equal(await page.locator('[data-testid=latency] tbody tr').count(), 12);
  await page.locator('.output .tok').first().focus();
  assert.ok(await page.locator('.output .tok').first().locator('.alts').isVisible(), 'focus shows the alternatives');
  const tip = await page.locator('.output .tok').first().locator('.alts').textContent();
  assert.match(tip, /policy p = 1\.000, model p = 0\.\d{4}; policy's top 5: .*; model's top 5: /, tip);
  await assertAccessible(page, 'generate after a run');
  await page.screenshot({ path: join(SHOTS, 'generate-run.png'), fullPage: true });
  assert.deepEqual(errors, []);
  await context.close();
});

test('the capacity planner plans in its worker with progress, shows the decision and its sweep as chart and table, and passes axe-core', async () => {
  const { context, page, errors } = await open(null);
  // Every Web Worker the page starts, by script: the planner starts as the panel opens (its
  // first job checks the fields) and is reused for every check and plan.
  await page.addInitScript(() => {
    const Native = window.Worker;
    window.startedWorkers = [];
    window.Worker = class extends Native {
      constructor(script, options) {
        super(script, options);
        window.startedWorkers.push(String(script));
      }
    };
  });
  await page.goto(`${url}?panel=capacity`);
  await page.locator('#cap-plan').waitFor();
  await page.waitForFunction(() => window.startedWorkers.length > 0);
  assert.deepEqual(await page.evaluate(() => window.startedWorkers), ['planner_loader.js'], 'the planner starts with the panel');
  // Every text the status line shows, as it changes: the planner's progress, then the result.
  await page.evaluate(() => {
    window.statusTexts = [];
    const status = document.querySelector('.capacity p.progress');
    new MutationObserver(() => window.statusTexts.push(status.textContent))
      .observe(status, { childList: true, characterData: true, subtree: true });
  });
  await page.locator('#cap-plan').click();
  await page.locator('.cap-decision').waitFor({ timeout: RUN_TIMEOUT });
  // The default plan releases (as the lab's native test of the same plan asserts).
  assert.equal(await page.locator('.cap-decision').getAttribute('data-kind'), 'release');
  const rows = await page.locator('#cap-sweep-table tbody tr').count();
  assert.equal(rows, 120, 'a row per configuration');
  const texts = await page.evaluate(() => window.statusTexts);
  assert.ok(texts.some((t) => /^Planning… \d+ of 120 configurations simulated\.$/.test(t)), `no progress among ${JSON.stringify(texts)}`);
  const [, tookMs] = texts.at(-1).match(/^Planned 120 configurations in (\d+) ms\. Release: /) ?? [];
  assert.ok(tookMs, `the status after the plan is ${JSON.stringify(texts.at(-1))}`);
  const reports = texts.filter((t) => t.startsWith('Planning… ')).length;
  console.log(`BENCH capacity plan configurations=120 requests=2000 page_ms=${tookMs} progress_lines=${reports}`);
  for (const id of ['cap-sweep-table', 'cap-contract-table', 'cap-latency-table', 'cap-bottleneck-table', 'cap-quality-table', 'cap-cost-table']) {
    assert.ok(await page.locator(`#${id} tbody tr`).count() > 0, `${id} has rows`);
  }
  assert.ok(await page.locator('#cap-sweep-table td[data-value]').count() > rows, 'numeric cells carry data-value');
  await assertAccessible(page, 'capacity after planning');
  await page.screenshot({ path: join(SHOTS, 'capacity-plan.png'), fullPage: true });
  // An SLO nothing meets degrades to the named baseline and says which gate failed.
  await page.getByLabel('SLO: p99 time to first token (ms)').fill('0.001');
  await page.locator('#cap-plan').click();
  await page.waitForFunction(() => document.querySelector('.cap-decision')?.dataset.kind === 'degrade-to-baseline', null, { timeout: RUN_TIMEOUT });
  assert.match(await page.locator('.cap-decision').textContent(), /TTFT|first token/i);
  // With the box ticked, it degrades to the configuration this session released first.
  await page.locator('#cap-known-good').check();
  await page.locator('#cap-plan').click();
  await page.waitForFunction(() => document.querySelector('.cap-decision')?.dataset.kind === 'degrade-to-last-known-good', null, { timeout: RUN_TIMEOUT });
  assert.deepEqual(await page.evaluate(() => window.startedWorkers), ['planner_loader.js'], 'one planner, reused');
  // Fleets, prefix caches, speculation, lengths from the policy and a canary, all from the URL: the sweep table gains
  // the fleet's columns, the playbook has a detector per gate and the canary's timeline a
  // row per detector window, each point of its chart one of those rows.
  const fleet = new URLSearchParams({
    panel: 'capacity', cap_trace: 'chat-prefix', cap_n: '400', cap_loads: '1', cap_batching: 'continuous',
    cap_seqs: '16', cap_replicas: '1,2', cap_router: 'round-robin,kv-aware', cap_prefix: 'on', cap_k: '2',
    cap_decoding: 'greedy', cap_lengths: 'policy', cap_canary: '0.2', cap_windows: '4', cap_ttft: '1000', cap_tpot: '1000', cap_floor: '50',
  });
  await page.goto(`${url}?${fleet}`);
  assert.ok(await page.locator('#cap-prefix').isChecked(), 'the URL ticks the prefix cache');
  await page.locator('#cap-plan').click();
  await page.locator('#cap-rollout-table').waitFor({ timeout: RUN_TIMEOUT });
  assert.equal(await page.locator('.cap-decision').getAttribute('data-kind'), 'release');
  const headers = await page.locator('#cap-sweep-table thead th').allTextContents();
  assert.deepEqual(headers.slice(1, 5), ['Replicas', 'Router', 'Prefix hits', 'Rejected']);
  // 2 weight paths × (one replica + 2 replicas under each of 2 routers) × with and without k = 2.
  assert.equal(await page.locator('#cap-sweep-table tbody tr').count(), 12);
  const routers = new Set(await page.locator('#cap-sweep-table tbody tr td:nth-of-type(2)').allTextContents());
  assert.deepEqual([...routers].sort(), ['kv-aware', 'round-robin']);
  const gates = await page.locator('.cap-gates-list li').count();
  assert.ok(gates > 0);
  assert.equal(await page.locator('#cap-playbook-table tbody tr').count(), gates, 'a detector per gate');
  const specRows = page.locator('#cap-speculation-table tbody tr');
  assert.equal(await specRows.count(), 6, 'three decoding policies × two slices');
  assert.equal(await specRows.first().locator('th').textContent(), 'greedy', "the plan's policy first");
  // Greedy never chose end-of-text in the measured runs: every request keeps its trace length.
  const lengths = await page.locator('#cap-lengths-table tbody tr').evaluateAll((rows) =>
    rows.map((r) => [...r.querySelectorAll('td')].map((c) => Number(c.dataset.value))));
  assert.equal(lengths.length, 2, 'a row per slice');
  for (const [runs, eos, share, asked, served] of lengths) {
    assert.ok(runs > 0);
    assert.deepEqual([eos, share, served], [0, 1, asked]);
  }
  const windows = await page.locator('#cap-rollout-table tbody tr').count();
  assert.ok(windows >= 4 && windows <= 8, `${windows} detector windows`);
  const measured = await page.locator('#cap-rollout-table tbody tr td:first-of-type').evaluateAll(
    (cells) => cells.filter((c) => Number(c.dataset.value) > 0).length);
  // A window within every gate is a dot; one that breached is a cross.
  assert.equal(await page.locator('.cap-timeline svg :is(circle, path.cap-breach)').count(), measured, 'a point per measured window');
  const words = await page.locator('.cap-part p').filter({ hasText: 'Canary: ' }).textContent();
  assert.match(words, /(Stopped|Completed): /);
  const stopped = words.includes('Stopped: ');
  assert.equal(await page.locator('#cap-rollout-table tr.cap-detected-row').count(), stopped ? 1 : 0);
  assert.equal(await page.locator('.cap-timeline rect.cap-detected').count(), stopped ? 1 : 0);
  await assertAccessible(page, 'capacity with fleets and a canary');
  await page.screenshot({ path: join(SHOTS, 'capacity-fleet.png'), fullPage: true });
  assert.deepEqual(errors, []);
  await context.close();
});

test('the decoding step takes the model\'s logits for a prompt; greedy picks the CLI\'s first token', async () => {
  const { context, page, errors } = await open('?panel=step&temperature=0&top_k=0');
  const step = panel(page);
  await step.getByLabel('Or a prompt, scored by the model').fill('Once upon a time');
  await step.getByRole('button', { name: 'Use the model\'s scores' }).click();
  await page.getByTestId('model-logits-status').filter({ hasText: 'tiny model\'s scores' }).waitFor({ timeout: RUN_TIMEOUT });
  const logits = (await step.getByLabel('Logits').inputValue()).split(',');
  const config = JSON.parse(readFileSync(join(DIST, 'models', 'decode-lab-tiny-v1', 'config.json'), 'utf8'));
  assert.equal(logits.length, config.vocab_size);
  const expected = JSON.parse(execFileSync(CLI, ['generate', '--prompt', 'Once upon a time', '--max-tokens', '1', '--temperature', '0', '--json'],
    { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] }));
  // The step on the model's logits comes from the worker a moment after they arrive.
  await page.waitForFunction((token) => document.querySelector('#chosen strong')?.dataset.token === String(token),
    expected.steps[0].token, { timeout: 10_000 }).catch(() => {});
  assert.equal(Number(await page.locator('#chosen strong').getAttribute('data-token')), expected.steps[0].token);
  await page.waitForFunction(() => (new URLSearchParams(location.search).get('logits') ?? '').split(',').length > 100);
  assert.deepEqual(errors, []);
  await context.close();
});

test('Your turn runs both temperatures in the worker; its outputs are the CLI\'s, and Cancel stops it', async () => {
  const [prompt, seeds, maxTokens, firstSeed] = ['Once upon a time', 3, 6, 7];
  const search = `?panel=your-turn&yt_prompt=${encodeURIComponent(prompt)}&yt_n=${seeds}&yt_max=${maxTokens}&yt_seed=${firstSeed}`;
  const { context, page, errors } = await open(search);
  const turn = panel(page);
  await turn.getByLabel('Temperature 1.5').check();
  await turn.getByRole('button', { name: '3. Run both' }).click();
  await page.waitForFunction(() => ['done', 'failed'].includes(document.querySelector('#your-turn')?.dataset.state),
    null, { timeout: RUN_TIMEOUT });
  assert.equal(await turn.getAttribute('data-state'), 'done',
    await turn.locator('[role=alert]').allTextContents().then((t) => t.join(' ')));
  // The CLI's outputs, seed by seed, for each setting (the chapter's top-k of 3).
  for (const temperature of [0.2, 1.5]) {
    const texts = new Set();
    for (let seed = firstSeed; seed < firstSeed + seeds; seed++) {
      const record = JSON.parse(execFileSync(CLI, ['generate', '--prompt', prompt, '--temperature', String(temperature), '--top-k', '3',
        '--seed', String(seed), '--max-tokens', String(maxTokens), '--json'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] }));
      texts.add(record.output_text);
    }
    const setting = turn.locator(`.yt-setting[data-temperature="${temperature}"]`);
    const shown = (await setting.locator('.yt-text').allTextContents()).map((t) => t.slice(prompt.length));
    assert.deepEqual(new Set(shown), texts, `temperature ${temperature}`);
    assert.equal(Number(await setting.getAttribute('data-distinct')), texts.size);
  }
  const rows = await page.getByTestId('yt-table').locator('tbody tr').count();
  assert.equal(rows, 2);
  assert.match(await page.getByTestId('yt-reasoning').textContent(), /flattens the retained distribution/);
  await assertAccessible(page, 'Your turn after its runs');

  // A long exercise, cancelled: the worker stops before its next model call.
  await turn.getByLabel('Seeds per temperature').fill('32');
  await turn.getByLabel('Max new tokens').fill('64');
  await turn.getByRole('button', { name: '3. Run both' }).click();
  await page.waitForFunction(() => document.querySelector('#your-turn')?.dataset.state === 'running', null, { timeout: RUN_TIMEOUT });
  await turn.getByRole('button', { name: 'Cancel' }).click();
  await page.waitForFunction(() => ['cancelled', 'done'].includes(document.querySelector('#your-turn')?.dataset.state),
    null, { timeout: RUN_TIMEOUT });
  assert.equal(await turn.getAttribute('data-state'), 'cancelled');
  assert.match(await page.getByTestId('yt-status').textContent(), /Cancelled after \d+ of 64 runs/);
  assert.deepEqual(errors, []);
  await context.close();
});

test('a whole generation with the keyboard alone', async () => {
  const { context, page, errors } = await open('');
  const tabTo = async (predicate, what) => {
    for (let i = 0; i < 80; i += 1) {
      await page.keyboard.press('Tab');
      if (await page.evaluate(predicate)) return;
    }
    assert.fail(`Tab never reached ${what}`);
  };
  await tabTo(() => document.activeElement?.textContent === 'Generate' && document.activeElement.tagName === 'A', 'the Generate tab');
  await page.keyboard.press('Enter');
  await page.locator('#generate').waitFor();
  await tabTo(() => document.activeElement?.id === 'gen-prompt', 'the prompt');
  await page.keyboard.press('Control+A');
  await page.keyboard.type('The lab');
  await tabTo(() => document.activeElement?.id === 'gen-max', 'max new tokens');
  await page.keyboard.press('Control+A');
  await page.keyboard.type('8');
  await tabTo(() => document.activeElement?.id === 'gen-backend', 'the backend');
  await page.keyboard.press('ArrowDown'); // CPU reference
  await tabTo(() => document.activeElement?.type === 'submit', 'the Generate button');
  await page.keyboard.press('Enter');
  const record = await generated(page);
  assert.equal(record.config.prompt, 'The lab');
  assert.equal(record.steps.length, 8);
  assert.equal(record.backend.name, 'cpu-reference');
  // The first token is reachable by Tab and shows its alternatives on focus.
  await tabTo(() => document.activeElement?.classList.contains('tok'), 'a generated token');
  assert.ok(await page.locator('.output .tok:focus .alts').isVisible());
  assert.match(await page.getByTestId('announcement').textContent(), /^Generated 8 tokens/);
  assert.deepEqual(errors, []);
  await context.close();
});

// The chapter's example: decode.py prints `2 [0.116 0.238 0.646]` for kept ids 0, 3, 2; NumPy's
// default_rng(7).random() is 0.625095466604667. In id order the strip is 0 [0, 0.116),
// 2 [0.116, 0.762), 3 [0.762, 1), so the draw lands in token 2's interval.
test('the decoding step shows where the draw landed and the effective vocabulary', async () => {
  const { context, page, errors } = await open('?panel=step&logits=1.2,0.1,2.4,1.7&temperature=0.7&top_k=3&seed=7');
  const table = page.getByTestId('draw-strip-table');
  await table.waitFor();
  const rows = await table.locator('tbody tr').evaluateAll((trs) => trs.map((tr) => ({
    token: Number(tr.dataset.token),
    cells: [...tr.querySelectorAll('td')].map((td) => Number(td.dataset.value)),
    landed: tr.classList.contains('landed'),
  })));
  assert.deepEqual(rows.map((r) => r.token), [0, 2, 3]);
  assert.deepEqual(rows.map((r) => r.cells[0].toFixed(3)), ['0.116', '0.646', '0.238']);
  assert.deepEqual(rows.map((r) => r.landed), [false, true, false]);
  const [, from, to] = rows[1].cells;
  assert.ok(from <= 0.625095466604667 && 0.625095466604667 < to, `${from} ${to}`);
  assert.equal(await page.locator('#chosen strong').getAttribute('data-token'), '2');
  const entropy = -rows.reduce((h, r) => h + r.cells[0] * Math.log(r.cells[0]), 0);
  const shown = Number(await page.locator('.effective-vocabulary').getAttribute('data-value'));
  assert.ok(Math.abs(shown - Math.exp(entropy)) < 1e-9, `${shown} vs ${Math.exp(entropy)}`);
  await assertAccessible(page, 'the draw strip');
  assert.deepEqual(errors, []);
  await context.close();
});

test('the URL holds each panel\'s state: permalinks, Back and Forward, embed=1', async () => {
  const { context, page, errors } = await open('?panel=step&logits=0.5,1.5,2.5&temperature=1.3&top_k=2&seed=3');
  const step = panel(page);
  assert.equal(await step.getByLabel('Logits').inputValue(), '0.5,1.5,2.5');
  assert.equal(await step.getByLabel('Temperature', { exact: true }).inputValue(), '1.3');
  await step.getByLabel('Temperature', { exact: true }).fill('0.4');
  await page.waitForFunction(() => new URLSearchParams(location.search).get('temperature') === '0.4');
  await page.getByRole('link', { name: 'KV-cache memory' }).click();
  await page.waitForFunction(() => new URLSearchParams(location.search).get('panel') === 'kv-cache');
  await page.locator('#kv-cache-title').waitFor();
  await page.goBack();
  await page.locator('#step-title').waitFor();
  assert.equal(await panel(page).getByLabel('Temperature', { exact: true }).inputValue(), '0.4');
  assert.equal(await panel(page).getByLabel('Logits').inputValue(), '0.5,1.5,2.5');
  await page.goForward();
  await page.locator('#kv-cache-title').waitFor();

  await page.goto(`${url}?panel=checkpoint&embed=1`);
  await page.locator('#checkpoint-title').waitFor();
  assert.equal(await page.locator('nav').count(), 0, 'no panel list when embedded');
  assert.equal(await page.locator('.tagline').count(), 0, 'no tagline when embedded');
  const full = await page.getByRole('link', { name: 'Open in the full lab' }).getAttribute('href');
  assert.equal(new URLSearchParams(full).get('panel'), 'checkpoint');
  assert.equal(new URLSearchParams(full).get('embed'), null);
  await assertAccessible(page, 'an embedded panel');
  assert.deepEqual(errors, []);
  await context.close();
});

test('the planner worker checks the capacity fields: a bad one is marked at its field, and Plan waits for a change', async () => {
  const { context, page, errors } = await open('?panel=capacity&cap_n=abc');
  const requests = 'Requests in the trace must be a whole number from 1 to 20000, but it is "abc".';
  await page.locator('#cap-n-problem').getByText(requests, { exact: true }).waitFor();
  assert.equal(await page.locator('#cap-n').getAttribute('aria-invalid'), 'true');
  assert.ok((await page.locator('#cap-n').getAttribute('aria-describedby')).split(' ').includes('cap-n-problem'));
  assert.deepEqual(await page.getByTestId('problem-summary').locator('li').allTextContents(), [requests]);
  await page.locator('#cap-plan').click();
  await page.locator('.capacity p.progress').getByText('The plan did not run; the fields listed above need a change.').waitFor();
  assert.equal(await page.locator('.cap-decision').count(), 0);
  // Typed: mending the field takes its mark away, and a bad load scale is marked at its own.
  await page.getByLabel('Requests in the trace').fill('300');
  await page.locator('#cap-n-problem').waitFor({ state: 'detached' });
  assert.equal(await page.locator('#cap-n').getAttribute('aria-invalid'), null);
  await page.getByLabel('Load scales (comma-separated)').fill('1, 0');
  const loads = 'Load scale must be a finite number above zero, got 0.';
  await page.locator('#cap-loads-problem').getByText(loads, { exact: true }).waitFor();
  assert.deepEqual(await page.getByTestId('problem-summary').locator('li').allTextContents(), [loads]);
  await assertAccessible(page, 'capacity with a bad field');
  assert.deepEqual(errors, []);
  await context.close();
});

test('every plan knob the CLI takes is a Capacity field: the further ones open from the URL, plan, and a bad one is named at its field', async () => {
  const { context, page, errors } = await open('?panel=capacity&cap_n=300&cap_seed=11&cap_queue=7&cap_owner_latency=SRE&cap_datasheet=on&cap_block=0');
  await page.locator('#cap-block-problem').waitFor();
  assert.ok(await page.locator('details.cap-more').evaluate((d) => d.open), 'a URL that sets one opens them');
  assert.equal(await page.locator('#cap-seed').inputValue(), '11');
  assert.equal(await page.locator('#cap-queue').inputValue(), '7');
  assert.ok(await page.locator('#cap-datasheet').isChecked());
  assert.equal(await page.locator('#cap-block').getAttribute('aria-invalid'), 'true');
  assert.match(await page.locator('#cap-block-problem').textContent(), /KV block size/);
  await assertAccessible(page, 'capacity with its further knobs open');
  // Mended, the plan runs with them: the playbook names the latency owner from the URL.
  await page.locator('#cap-block').fill('32');
  await page.locator('#cap-block-problem').waitFor({ state: 'detached' });
  await page.locator('#cap-plan').click();
  await page.locator('.cap-decision').waitFor({ timeout: RUN_TIMEOUT });
  assert.ok((await page.locator('#cap-playbook-table').textContent()).includes('SRE'));
  assert.ok(new URL(page.url()).searchParams.get('cap_block') === '32', 'the mended value is in the URL');
  assert.deepEqual(errors, []);
  await context.close();
});

test('every policy knob is a Generate, a Compare and a Step field: the further ones open from the URL, a bad one is named at its field, and the run records them', async () => {
  const { context, page, errors } = await open('?panel=generate&backend=cpu&max=6&engine=llama.cpp&typical=0.9&forbidden=4,,8&dry_multiplier=0.8');
  await page.locator('#gen-forbidden-problem').waitFor();
  assert.ok(await page.locator('#generate details.more-controls').evaluate((d) => d.open), 'a URL that sets one opens them');
  assert.equal(await page.locator('#gen-engine').inputValue(), 'llama.cpp');
  assert.equal(await page.locator('#gen-typical').inputValue(), '0.9');
  // Each hint goes on with what the chosen engine takes (the policy crate's words).
  assert.match(await page.locator('#gen-typical-hint').textContent(), / Under llama\.cpp: any finite number here\.$/);
  assert.equal(await page.locator('#gen-forbidden').getAttribute('aria-invalid'), 'true');
  assert.match(await page.locator('#gen-forbidden-problem').textContent(), /empty entry/);
  await assertAccessible(page, 'generate with its further controls open');
  // Mended, the run takes every knob: the record holds them, DRY's breakers found in the
  // vocabulary (llama.cpp's defaults).
  await page.locator('#gen-forbidden').fill('4,8');
  await page.locator('#gen-forbidden-problem').waitFor({ state: 'detached' });
  await page.getByRole('button', { name: 'Generate', exact: true }).click();
  const record = await generated(page);
  const policy = record.config.policy;
  assert.equal(policy.engine, 'llama.cpp');
  assert.equal(policy.typical_p, 0.9);
  assert.deepEqual(policy.forbidden, [4, 8]);
  assert.equal(policy.dry_multiplier, 0.8);
  assert.ok(policy.dry_sequence_breakers.length > 0, JSON.stringify(policy));
  assert.equal(new URL(page.url()).searchParams.get('forbidden'), '4,8', 'the mended value is in the URL');
  await page.goto(`${url}?panel=compare&cmp_b_xtc_probability=0.5&cmp_a_engine=vllm&cmp_a_typical=0.9`);
  await page.locator('#cmp-a-typical-problem').waitFor();
  assert.match(await page.locator('#cmp-a-typical-problem').textContent(), /^Policy a: /);
  assert.match(await page.locator('#cmp-a-typical-hint').textContent(), / Under vllm: no such sampler\.$/);
  assert.match(await page.locator('#cmp-b-typical-hint').textContent(), / Under lab: a typical mass greater than 0 and at most 1 \(1 is off\)\.$/);
  assert.equal(await page.locator('#cmp-b-xtc-probability').inputValue(), '0.5');
  assert.ok(await page.locator('#compare details.more-controls').nth(1).evaluate((d) => d.open));
  // The decoding step: every knob but DRY's breakers (text that needs a vocabulary), and the
  // tokens before the step, which the penalties read.
  await page.goto(`${url}?panel=step&logits=1,2,3,4&prompt_ids=3&repetition_penalty=2&temperature=1&top_k=0&mirostat_tau=abc`);
  await page.locator('#mirostat-tau-problem').waitFor();
  assert.ok(await page.locator('#step-title').locator('xpath=..').locator('details.more-controls').evaluate((d) => d.open));
  assert.equal(await page.locator('#dry-breakers').count(), 0);
  await assertAccessible(page, 'step with its further controls open');
  await page.locator('#mirostat-tau').fill('5');
  // Token 3 is in the prompt: the repetition penalty halves its logit 4 (HF's rule).
  const constraints = page.locator('figure.stage[data-stage="constraints"] table.mirror tbody tr');
  await constraints.nth(3).locator('td').first().filter({ hasText: '2.0000' }).waitFor();
  assert.equal(await page.locator('#prompt-ids').inputValue(), '3');
  assert.deepEqual(errors, []);
  await context.close();
});

test('a policy imported from another engine fills Generate\'s form, lists each field, names a bad one at the box, and runs as the CLI\'s --policy-from', async () => {
  const { context, page, errors } = await open('?panel=generate&backend=cpu&max=6&seed=9');
  await page.locator('#generate details.import-policy summary').click();
  const text = page.locator('#gen-policy-text');
  const importIt = page.locator('#gen-policy-import');
  // A word where vLLM wants a token id: named at the box, in the reader's words.
  await text.fill('{"logit_bias": {"hello": 5}}');
  await importIt.click();
  await page.locator('#gen-policy-text-problem').waitFor();
  assert.match(await page.locator('#gen-policy-text-problem').textContent(), /logit_bias/);
  assert.equal(await text.getAttribute('aria-invalid'), 'true');
  // A flag llama.cpp has and the lab does not read is named; lenient reads the rest and lists it.
  await text.fill('llama-cli --temp 0.5 --top-k 30 --warp-speed');
  await importIt.click();
  await page.locator('#gen-policy-text-problem').filter({ hasText: '--warp-speed' }).waitFor();
  await page.locator('#gen-policy-lenient').check();
  await importIt.click();
  const readings = page.locator('#import-readings');
  await readings.waitFor();
  assert.equal(await page.locator('#gen-engine').inputValue(), 'llama.cpp');
  assert.equal(await page.locator('#gen-top-k').inputValue(), '30');
  assert.match(await readings.textContent(), /--warp-speed.*not understood/s);
  assert.equal(await text.getAttribute('aria-invalid'), null);
  // A vLLM body from a file: its knobs and run settings go into the form, and the run makes
  // the tokens `decode-lab generate --policy-from` makes of the same file.
  const body = { temperature: 0.7, top_p: 0.9, top_k: 20, min_p: 0.02, max_tokens: 8, seed: 3, logit_bias: { 12: -100 }, presence_penalty: 0.5 };
  await page.locator('#gen-policy-file').setInputFiles({ name: 'request.json', mimeType: 'application/json', buffer: Buffer.from(JSON.stringify(body)) });
  await page.getByTestId('import-summary').filter({ hasText: 'a vLLM request body' }).waitFor();
  assert.equal(await page.locator('#gen-engine').inputValue(), 'vllm');
  assert.equal(await page.locator('#gen-top-k').inputValue(), '20');
  assert.equal(await page.locator('#gen-max').inputValue(), '8');
  assert.equal(await page.locator('#gen-seed').inputValue(), '3');
  assert.match(await readings.textContent(), /presence_penalty.*--presence-penalty 0\.5/s);
  await assertAccessible(page, 'generate with an imported policy listed');
  await page.getByRole('button', { name: 'Generate', exact: true }).click();
  const record = await generated(page);
  const dir = mkdtempSync(join(tmpdir(), 'decode-lab-import-'));
  const file = join(dir, 'request.json');
  writeFileSync(file, JSON.stringify(body));
  const cli = JSON.parse(execFileSync(CLI, ['generate', '--policy-from', file, '--prompt', record.config.prompt, '--backend', 'cpu', '--json'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] }));
  assert.deepEqual(record.config.policy, cli.config.policy);
  assert.deepEqual(record.steps.map((s) => s.token), cli.steps.map((s) => s.token));
  assert.deepEqual(errors, []);
  await context.close();
});

test('a URL that runs Generate at once starts the model worker before the page\'s wasm, and the page adopts it', async () => {
  const { context, page, errors } = await open(null);
  await page.addInitScript(() => {
    const Native = window.Worker;
    window.startedWorkers = [];
    window.Worker = class extends Native {
      constructor(script, options) {
        super(script, options);
        window.startedWorkers.push(String(script));
      }
    };
  });
  await page.goto(`${url}?panel=generate&backend=cpu&max=4&run=1`);
  const record = await generated(page);
  assert.equal(record.steps.length, 4);
  // One model worker: the early one, adopted with what it said before the page listened.
  assert.deepEqual(await page.evaluate(() => window.startedWorkers), ['worker_loader.js']);
  assert.equal(await page.evaluate(() => 'decodeLabEarlyWorker' in self), false, 'taken by the page');
  // Its files were fetched as it started: the run's own model load took no time to speak of.
  assert.ok(Number(await page.getByTestId('timings').getAttribute('data-load-ms')) < 50);
  await page.getByRole('button', { name: 'Generate', exact: true }).click();
  await page.waitForFunction(() => document.querySelector('#generate')?.dataset.state === 'done'
    && document.querySelectorAll('[data-testid=steps] tbody tr').length === 4);
  assert.deepEqual(await page.evaluate(() => window.startedWorkers), ['worker_loader.js'], 'and reused');
  assert.deepEqual(errors, []);
  await context.close();
});

test('a URL with three bad values names all three, each marked at its own field', async () => {
  const { context, page, errors } = await open('?panel=step&temperature=abc&top_k=-3&logits=1,2,zz');
  const summary = page.getByTestId('problem-summary');
  await summary.waitFor();
  const items = await summary.locator('li').allTextContents();
  assert.equal(items.length, 3, items.join(' | '));
  for (const id of ['logits', 'temperature', 'top-k']) {
    const input = page.locator(`#${id}`);
    assert.equal(await input.getAttribute('aria-invalid'), 'true', id);
    assert.ok((await input.getAttribute('aria-describedby')).split(' ').includes(`${id}-problem`), id);
    const message = await page.locator(`#${id}-problem`).textContent();
    assert.ok(items.includes(message), `${id}: ${message}`);
  }
  assert.equal(await page.locator('#seed').getAttribute('aria-invalid'), null);
  await assertAccessible(page, 'the step panel with three bad fields');
  // Mending one field takes its mark and its line away and leaves the others.
  await panel(page).getByLabel('Logits').fill('1, 2, 3');
  await page.locator('#logits-problem').waitFor({ state: 'detached' });
  assert.equal(await page.locator('#logits').getAttribute('aria-invalid'), null);
  assert.equal(await summary.locator('li').count(), 2);
  assert.deepEqual(errors, []);
  await context.close();
});

test('malformed URL state and malformed logits get inline messages, and the lab keeps working', async () => {
  const { context, page, errors } = await open('?panel=nowhere&view=3d');
  await page.locator('#step-title').waitFor();
  const alerts = await page.getByRole('alert').allTextContents();
  assert.ok(alerts.some((a) => a.includes('"nowhere"')), alerts.join(' | '));
  assert.ok(alerts.some((a) => a.includes('view="3d"')), alerts.join(' | '));
  await panel(page).getByLabel('Logits').fill('1, two, 3');
  await page.locator('#logits-problem').getByText('Logit "two" is not a number.').waitFor();
  await panel(page).getByLabel('Logits').fill('1, 2, 3');
  await page.locator('#chosen').waitFor();
  await page.goto(`${url}?panel=generate&backend=quantum&precision=f7`);
  const messages = await page.locator('#generate').getByTestId('problem-summary').locator('li').allTextContents();
  assert.equal(messages.length, 2, messages.join(' | '));
  assert.equal(await page.locator('#gen-backend').getAttribute('aria-invalid'), 'true');
  assert.equal(await page.locator('#gen-precision').getAttribute('aria-invalid'), 'true');
  assert.deepEqual(errors, []);
  await context.close();
});

test('a run record is replayed, exported, imported and replayed; a corrupt file is named', async () => {
  const { context, page, errors } = await open('?panel=generate&backend=cpu&max=10&temperature=0.9&seed=5&run=1', { acceptDownloads: true });
  const first = await generated(page);
  await page.getByRole('button', { name: 'Replay', exact: true }).click();
  await page.getByTestId('replay-verdict').waitFor();
  assert.equal(await page.getByTestId('replay-verdict').getAttribute('data-identical'), 'true');

  const [download] = await Promise.all([
    page.waitForEvent('download'),
    page.getByRole('button', { name: 'Export record (JSON)' }).click(),
  ]);
  const exported = JSON.parse(readFileSync(await download.path(), 'utf8'));
  assert.deepEqual(exported.steps.map((s) => s.token), first.steps.map((s) => s.token));
  // The record the browser wrote replays bit for bit natively: every probability, entropy
  // and draw of the WebAssembly run is the CLI's too (policy::math).
  const model = join(import.meta.dirname, '..', 'models', 'decode-lab-tiny-v1');
  const native = execFileSync(CLI, ['replay', await download.path(), '--model', model], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
  assert.match(native, /^identical \(10 steps\)/, `the CLI's replay of the lab's record: ${native}`);
  const [jsonl] = await Promise.all([
    page.waitForEvent('download'),
    page.getByRole('button', { name: /Export all runs/ }).click(),
  ]);
  const lines = readFileSync(await jsonl.path(), 'utf8').trim().split('\n');
  assert.equal(lines.length, 2, 'the run and its replay');

  // A fresh page imports the export and replays it.
  const other = await context.newPage();
  await other.goto(`${url}?panel=generate&backend=cpu`);
  await other.getByLabel('Import a run record to replay').setInputFiles({ name: 'run.json', mimeType: 'application/json', buffer: Buffer.from(JSON.stringify(exported)) });
  await other.getByTestId('replay-verdict').waitFor({ timeout: RUN_TIMEOUT });
  assert.equal(await other.getByTestId('replay-verdict').getAttribute('data-identical'), 'true');
  // A record whose tokens were edited after it was written no longer matches its digest.
  exported.steps[4].token = (exported.steps[4].token + 1) % 512;
  await other.getByLabel('Import a run record to replay').setInputFiles({ name: 'edited.json', mimeType: 'application/json', buffer: Buffer.from(JSON.stringify(exported)) });
  await other.waitForFunction(() => document.querySelector('[data-testid=replay-verdict]')?.dataset.identical === 'false', null, { timeout: RUN_TIMEOUT });
  assert.match(await other.getByTestId('replay-verdict').textContent(), /altered after it was written/);
  // Without its digest (a record from before digests) it differs at the edited step.
  delete exported.record_digest;
  await other.getByLabel('Import a run record to replay').setInputFiles({ name: 'edited-old.json', mimeType: 'application/json', buffer: Buffer.from(JSON.stringify(exported)) });
  await other.waitForFunction(() => /differs first at step 4/.test(document.querySelector('[data-testid=replay-verdict]')?.textContent ?? ''), null, { timeout: RUN_TIMEOUT });
  await other.getByLabel('Import a run record to replay').setInputFiles({ name: 'junk.json', mimeType: 'application/json', buffer: Buffer.from('{"steps": [1, 2') });
  await other.getByRole('alert').filter({ hasText: /is not a run record the lab can read/ }).waitFor();
  assert.deepEqual(errors, []);
  await context.close();
});

test('a panic in the model worker is reported on the page, and the page recovers', async () => {
  const { context, page, errors } = await open('?panel=generate&backend=cpu&max=4&fault=panic');
  await page.locator('#generate').waitFor();
  await page.getByRole('button', { name: 'Generate', exact: true }).click();
  const alert = page.getByTestId('worker-panic');
  await alert.waitFor({ timeout: RUN_TIMEOUT });
  assert.match(await alert.textContent(), /fault=panic asked the model worker to panic/);
  // The page still works: clear the fault and run again, on a new worker.
  await page.getByLabel('Injected faults').fill('');
  await page.getByRole('button', { name: 'Generate', exact: true }).click();
  const record = await generated(page);
  assert.equal(record.steps.length, 4);
  assert.deepEqual(errors, [], 'the panic stayed in the worker');
  await context.close();
});

test('the page stays responsive while the worker generates, and Cancel stops within a token', async () => {
  // WebGPU on SwiftShader: slow enough (tens of tokens a second) to press Cancel mid-run.
  // Greedy from this prompt runs all 200 tokens (checked against decode-lab generate).
  const gpuBrowser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: [...BASE_ARGS, '--enable-unsafe-webgpu'] });
  const context = await gpuBrowser.newContext();
  const page = await context.newPage();
  const errors = [];
  page.on('pageerror', (e) => errors.push(String(e)));
  await page.goto(`${url}?panel=generate&backend=gpu&prompt=The%20model&max=200&temperature=0&top_k=0&run=1`);
  // The first runs are on the CPU (thousands of tokens a second) until the canary passes.
  await generated(page);
  await afterGpuStart(page);
  await page.getByRole('button', { name: 'Generate', exact: true }).click();
  await page.waitForFunction(() => document.querySelector('#generate')?.dataset.state === 'generating'
    && document.querySelectorAll('.output .tok').length >= 3, null, { timeout: RUN_TIMEOUT });
  // A frame callback is answered quickly while tokens stream in.
  const frame = await page.evaluate(() => new Promise((resolve) => {
    const t0 = performance.now();
    requestAnimationFrame(() => resolve(performance.now() - t0));
  }));
  assert.ok(frame < 250, `a frame took ${frame} ms while generating`);
  await page.getByRole('button', { name: 'Cancel' }).click();
  const tokensAtCancel = await page.locator('.output .tok').count();
  const record = await generated(page);
  assert.equal(record.stop_reason, 'cancelled');
  assert.ok(record.steps.length <= tokensAtCancel + 2, `${record.steps.length} steps, ${tokensAtCancel} shown at Cancel`);
  assert.deepEqual(errors, []);
  await gpuBrowser.close();
});

test('no request leaves the origin; after a first visit the lab loads, generates and plans offline', async () => {
  const { context, page, errors, requests } = await open('?panel=generate&backend=cpu&max=6&run=1');
  await generated(page);
  await page.evaluate(() => navigator.serviceWorker.ready.then(() => true));
  await page.waitForFunction(() => navigator.serviceWorker.controller !== null, null, { timeout: 30_000 }).catch(() => {});
  const origin = new URL(url).origin;
  const foreign = requests.filter((r) => !r.startsWith(origin) && !r.startsWith('data:') && !r.startsWith('blob:'));
  assert.deepEqual(foreign, [], 'every request stays on the page\'s origin');

  await context.setOffline(true);
  await page.reload();
  await page.getByRole('button', { name: 'Generate', exact: true }).click();
  const record = await generated(page);
  assert.equal(record.steps.length, 6);
  // The planner's worker comes from the service worker's cache too.
  await page.goto(`${url}?panel=capacity&cap_n=300`);
  await page.locator('#cap-plan').click();
  await page.locator('.cap-decision').waitFor({ timeout: RUN_TIMEOUT });
  await page.goto(`${url}?panel=kv-cache`);
  await page.locator('#kv-cache-title').waitFor();
  assert.deepEqual(errors, []);
  await context.close();
});

/** Navigation start to a visible Generate button, and to the first token of a CPU or WebGPU run. */
async function loadFigures(label, launchArgs) {
  const b = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: [...BASE_ARGS, ...launchArgs] });
  const context = await b.newContext();
  const page = await context.newPage();
  const backend = label.startsWith('webgpu') ? 'gpu' : 'cpu';
  const figures = [];
  for (const visit of ['cold', 'warm']) {
    await page.goto(`${url}?panel=generate&backend=${backend}&max=8&run=1`);
    await page.getByRole('button', { name: 'Generate', exact: true }).waitFor();
    const interactive = await page.evaluate(() => performance.now());
    await generated(page);
    const first = Number(await page.getByTestId('timings').getAttribute('data-first-token-ms'));
    figures.push(`${visit}_interactive_ms=${interactive.toFixed(0)} ${visit}_first_token_ms=${first.toFixed(0)}`);
    await page.evaluate(() => navigator.serviceWorker.ready.then(() => true));
  }
  console.log(`BENCH browser load ${label} ${figures.join(' ')}`);
  await b.close();
}

// The size budgets of issue 12: the page's own wasm and JS (everything but the two workers'
// files and the service worker) at most 500,000 bytes gzipped, page and model worker together
// at most 1,000,000. Issue 13's capacity planner worker is budgeted on its own, at its
// measured size rounded up to the next 50,000: 195,396 bytes when it moved out of the page,
// 228,256 once the planner simulated replicas behind routers, prefix caches,
// disaggregation, speculative decoding and a canary rollout, 243,287 once the panel showed
// them (the page then 490,043), 252,676 once output lengths came from the decoding policy
// (the page then 495,383; the planner 253,147 once the panel also priced attention). The
// capacity form's check moved into the planner worker: the page 498,694 before, 472,887
// after; the planner 253,134 before, 254,340 after. Load times are printed, not asserted.
// Issue 15 grew the policy core by a third (any sampler order, three engine presets, seven
// samplers, multi-token constraints), which both the page (the decoding step runs there) and
// the model worker link: the page 481,077 -> 518,313, the worker 495,692 -> 525,617. With
// every WebAssembly step on the chain path alone (it chooses bit for bit as the fixed path)
// and one shared sort, 511,355 and 511,788. The budgets were raised to 525,000 and
// 1,050,000 for that growth; moving the decoding step into a worker, as the capacity check
// was, is what would bring the page back under 500,000. Issue 15's Compare panel (its form
// on the page; both runs, the trees and the report's markup in the model worker): the page
// 511,355 -> 522,223, the worker 511,788 -> 544,159; 528,486 with the policy crate built
// size-first in the worker (11 kB of it; the model's kernels stay at opt-level 3), the
// generation loop compiled once for all jobs and no timeline chart code in it. The page + worker
// budget was raised to 1,055,000 for it. Issue 16's fused GPU kernels (a decode step in 22
// dispatches; two command sequences; weights stacked and laid out column-major): the worker
// 530,343 -> 537,851; 531,595 with the shaders embedded without their comments (build.rs)
// and the weight-reading kernels compiled for the model's format only. The page + worker
// budget was raised to 1,057,000 for it. Issue 16's policy arithmetic that gives the same
// bits on every machine (every weight through `policy::math`, sums in fixed lanes, top-p's
// bucketed histogram and masks, the draw's bisection): the page 524,510 -> 526,310, the
// worker 531,982 -> 533,515. The budgets were raised to 527,000 and 1,061,000 for it.
// Issue 16's GPU start beside the run (the canary's own CPU model, the start as an event-loop
// task, the record's segments, which the page reads and names in the status line): the page
// 526,352 -> 528,165, the worker 533,515 -> 538,951. The budgets were raised to 529,000 and
// 1,068,000 for it. `backend=auto` (the canary's decode steps timed on both paths, the
// verdict in words, the new choice in the form): the page 528,408, the worker 540,117
// (2,100 more with a `sort_by` for the median of four timings, which an insertion sort
// replaced). The page + worker budget was raised to 1,069,000 for it. Bias, bans and the
// three penalties on the device (the policy's dense constraint table, its packing, the
// sampler's constraint pass) and the GPU start's phase timings: the worker 542,432. The
// page + worker budget was raised to 1,072,000 for them. Issue 17's keyboard walk of every
// chart (one keydown listener that reads the focused chart's mirror table and says the row,
// 5 kB of its 18 kB of code; the rest is the four page charts' new markup: the takeaway
// caption, the focusable picture, the keys and the live region, which Leptos builds as new
// element and attribute tuples), with issue 16's top-k masks and the decoding step's
// takeaway sentence: the page 528,906 -> 536,529, the worker 542,184 -> 542,850. The budgets
// were raised to 537,000 and 1,080,000 for it. Issue 17's charts as sound (Web Audio's
// bindings and their JS glue, the tone scale, a value on every mark, the Listen button's
// click listener): the page 536,529 -> 542,810, the worker 542,827. The budgets were raised
// to 543,000 and 1,086,000 for it. Issue 17's critical Chartability heuristics (a stage of
// more than 20 tokens drawn as its tallest bars and the rest as one, with the whole
// vocabulary's table under a disclosure; the walk's Page Up/Down and N/P keys; the chosen
// token as the decoding step's one live sentence; the terms defined beside three panels'
// charts; plainer takeaways and captions): the page 542,810 -> 548,541, the worker 542,913.
// Writing the vocabulary's table as a string instead of a view (report::table_html) came to
// 549,111, and drawing it with data_table to 549,465, so the view stayed. The budgets were
// raised to 549,000 and 1,092,000 for it. Then the KV-cache total and the ledger's verdict
// as their panels' live sentences (words only: the total with its <strong> came to 549,666),
// breaches drawn as crosses, and no tab stop around a chart: the page 549,064, the worker
// 543,017. The budgets were raised to 550,000 and 1,093,500 for them.
const PAGE_BUDGET_GZIP = 550_000;
// Issue 35: the tokenizer's Unicode classes written out (`tokenizer/src/classes.rs`) instead
// of built at run time by `regex-syntax`, whose parser and tables the worker no longer links:
// the worker 557,066 -> 409,303, page + worker 952,883 (959,552 once the worker fetched its
// files as it started). The budget came down to issue 34's target, 1,000,000.
const TOTAL_BUDGET_GZIP = 1_000_000;
const PLANNER_BUDGET_GZIP = 300_000;
// Issue 14's observation worker, budgeted like the planner: its measured size rounded up to
// the next 50,000 (211,452 bytes when it was built; the page then 498,617, the planner
// 255,945, once both workers wrote their reports' markup and the page stopped reading parts;
// with the capacity check in the planner too, the page about 473,500, the planner 257,095).
const OBSERVER_BUDGET_GZIP = 250_000;
// Issue 35's importer, budgeted like the other workers: its measured size rounded up to the
// next 50,000 (166,036 bytes when it was built).
const IMPORTER_BUDGET_GZIP = 200_000;

test('the page and the worker stay within their size budgets; load times are printed', async () => {
  // Not counted: the service worker, and embed.js, which runs on course pages, not in the lab.
  const files = readdirSync(DIST).filter((f) => /\.(wasm|js)$/.test(f) && f !== 'sw.js' && f !== 'embed.js');
  const gz = (path) => gzipSync(readFileSync(path), { level: 9 }).length;
  const code = files.reduce((sum, f) => sum + gz(join(DIST, f)), 0);
  const raw = files.reduce((sum, f) => sum + statSync(join(DIST, f)).size, 0);
  const sum = (names) => names.reduce((total, f) => total + gz(join(DIST, f)), 0);
  const workerFiles = files.filter((f) => f.startsWith('worker'));
  assert.ok(workerFiles.some((f) => f.endsWith('.wasm')), `no worker wasm among ${files.join(', ')}`);
  const plannerFiles = files.filter((f) => f.startsWith('planner'));
  assert.ok(plannerFiles.some((f) => f.endsWith('.wasm')), `no planner wasm among ${files.join(', ')}`);
  const observerFiles = files.filter((f) => f.startsWith('observer'));
  assert.ok(observerFiles.some((f) => f.endsWith('.wasm')), `no observer wasm among ${files.join(', ')}`);
  const importerFiles = files.filter((f) => f.startsWith('importer'));
  assert.ok(importerFiles.some((f) => f.endsWith('.wasm')), `no importer wasm among ${files.join(', ')}`);
  const pageFiles = files.filter((f) => !['worker', 'planner', 'observer', 'importer'].some((w) => f.startsWith(w)));
  assert.ok(pageFiles.some((f) => f.endsWith('.wasm')), `no page wasm among ${files.join(', ')}`);
  const [page, worker, planner, observer, importer] = [pageFiles, workerFiles, plannerFiles, observerFiles, importerFiles].map(sum);
  console.log(`BENCH size page_gzip_bytes=${page} worker_gzip_bytes=${worker} planner_gzip_bytes=${planner} observer_gzip_bytes=${observer} importer_gzip_bytes=${importer}`);
  assert.ok(page <= PAGE_BUDGET_GZIP, `the page's wasm and JS are ${page} bytes gzipped, over ${PAGE_BUDGET_GZIP}`);
  assert.ok(page + worker <= TOTAL_BUDGET_GZIP, `page and model worker are ${page + worker} bytes gzipped, over ${TOTAL_BUDGET_GZIP}`);
  assert.ok(planner <= PLANNER_BUDGET_GZIP, `the planner's wasm and JS are ${planner} bytes gzipped, over ${PLANNER_BUDGET_GZIP}`);
  assert.ok(observer <= OBSERVER_BUDGET_GZIP, `the observer's wasm and JS are ${observer} bytes gzipped, over ${OBSERVER_BUDGET_GZIP}`);
  assert.ok(importer <= IMPORTER_BUDGET_GZIP, `the importer's wasm and JS are ${importer} bytes gzipped, over ${IMPORTER_BUDGET_GZIP}`);
  const modelDir = join(DIST, 'models', 'decode-lab-tiny-v1');
  const weights = readdirSync(modelDir).filter((f) => f.endsWith('.safetensors'))
    .map((f) => `${f}=${gz(join(modelDir, f))}`).join(' ');
  console.log(`BENCH size wasm_and_js_bytes=${raw} wasm_and_js_gzip_bytes=${code} weights_gzip_bytes: ${weights}`);
  await loadFigures('cpu', ['--disable-gpu']);
  await loadFigures('webgpu', ['--enable-unsafe-webgpu']);
});

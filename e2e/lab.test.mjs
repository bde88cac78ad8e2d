// The lab in Debian's headless Chromium: the decoding-step tables must hold exactly the
// numbers `decode-lab pipeline --json` prints for the same settings.
//
// Needs: DIST_DIR (Trunk's output), DECODE_LAB_BIN (the CLI), CHROMIUM (default
// /usr/bin/chromium). `cargo xtask test` builds both and sets them.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import { chromium } from 'playwright-core';
import { serve, BASE_ARGS } from './serve.mjs';

const DIST = process.env.DIST_DIR ?? join(import.meta.dirname, '..', 'dist');
const CLI = process.env.DECODE_LAB_BIN ?? join(import.meta.dirname, '..', 'target', 'debug', 'decode-lab');
const CHROMIUM = process.env.CHROMIUM ?? '/usr/bin/chromium';
// Both sides compute in f64; only the decimal round trip of the printed numbers differs.
const TOLERANCE = 1e-12;

let server;
let browser;
let url;

before(async () => {
  ({ server, url } = await serve(DIST));
  browser = await chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: [...BASE_ARGS, '--disable-gpu'],
  });
});

after(async () => {
  await browser?.close();
  server?.close();
});

function cli(args) {
  return JSON.parse(execFileSync(CLI, ['pipeline', ...args, '--json'], { encoding: 'utf8' }));
}

/** Every stage on the page: its label and, per token row, the probability cell's full value. */
async function stagesOnPage(page) {
  return page.$$eval('figure.stage', (figures) => figures.map((f) => ({
    stage: f.dataset.stage,
    caption: f.querySelector('table caption')?.textContent ?? '',
    probs: [...f.querySelectorAll('tbody tr')].map((tr) => Number(tr.querySelectorAll('td')[1].dataset.value)),
  })));
}

/** The decoding-step panel (the Generate panel has fields with the same labels). */
const stepPanel = (page) => page.locator('section[aria-labelledby="step-title"]');

const LABELS = {
  constraints: 'constraints', temperature: 'temperature', top_k: 'top-k', top_p: 'top-p', min_p: 'min-p',
  typical: 'typical', epsilon: 'epsilon', eta: 'eta', top_n_sigma: 'top-n-sigma', top_h: 'top-h', xtc: 'xtc',
};

function assertSameAsCli(onPage, fromCli, vocab) {
  assert.deepEqual(onPage.map((s) => s.stage), fromCli.stages.map((s) => LABELS[s.stage]));
  fromCli.stages.forEach((stage, i) => {
    const expected = new Array(vocab).fill(0);
    for (const t of stage.tokens) expected[t.id] = t.prob;
    assert.match(onPage[i].caption, /^Each token's share after/);
    assert.equal(onPage[i].probs.length, vocab);
    onPage[i].probs.forEach((p, id) => {
      assert.ok(Math.abs(p - expected[id]) <= TOLERANCE, `${stage.stage} token ${id}: page ${p}, cli ${expected[id]}`);
    });
  });
}

test('the decoding step matches decode-lab pipeline after changing the temperature', async () => {
  const page = await browser.newPage();
  const errors = [];
  page.on('pageerror', (e) => errors.push(String(e)));
  await page.goto(url);
  const step = stepPanel(page);
  await step.getByLabel('Temperature', { exact: true }).waitFor();

  // The chapter's example is the default.
  assert.equal(await step.getByLabel('Logits').inputValue(), '1.2, 0.1, 2.4, 1.7');
  await page.locator('figure.stage').first().waitFor();
  const defaults = cli(['--logits', '1.2,0.1,2.4,1.7', '--temperature', '0.7', '--top-k', '3', '--seed', '7']);
  assertSameAsCli(await stagesOnPage(page), defaults, 4);
  assert.equal(await page.locator('#chosen strong').textContent(), String(defaults.token));
  assert.match(await page.locator('.chapter-line code').textContent(), /^2 \[0\.116 0\.238 0\.646\]$/);

  await step.getByLabel('Temperature', { exact: true }).fill('1.3');
  await step.getByLabel('Top-p', { exact: true }).fill('0.8');
  await page.waitForFunction(() => document.querySelector('figure.stage[data-stage="top-p"]'));
  const changed = cli(['--logits', '1.2,0.1,2.4,1.7', '--temperature', '1.3', '--top-k', '3', '--top-p', '0.8', '--seed', '7']);
  assertSameAsCli(await stagesOnPage(page), changed, 4);
  assert.equal(await page.locator('#chosen strong').textContent(), String(changed.token));
  assert.deepEqual(errors, []);
});

test('bad input is explained in words, not a crash', async () => {
  const page = await browser.newPage();
  const errors = [];
  page.on('pageerror', (e) => errors.push(String(e)));
  await page.goto(url);
  await page.locator('figure.stage').first().waitFor();
  const step = stepPanel(page);
  await step.getByLabel('Temperature', { exact: true }).fill('-1');
  assert.equal(await step.locator('#temperature-problem').textContent(),
    'Temperature -1 is invalid: it must be a finite number, at least 0 (0 means greedy).');
  assert.equal(await step.getByLabel('Temperature', { exact: true }).getAttribute('aria-invalid'), 'true');
  await step.getByLabel('Temperature', { exact: true }).fill('0.7');
  await step.getByLabel('Logits').fill('1, NaN, 2');
  assert.match(await step.locator('#logits-problem').textContent(), /^Logit 1 is NaN/);
  await step.getByLabel('Logits').fill('1, 2, 3');
  await page.locator('figure.stage').first().waitFor();
  assert.deepEqual(errors, []);
});

test('the sampler chain reorders with the keyboard, and every engine runs the same settings', async () => {
  const page = await browser.newPage();
  const errors = [];
  page.on('pageerror', (e) => errors.push(String(e)));
  const settings = ['--logits', '3,2,1', '--temperature', '0.5', '--top-p', '0.8', '--seed', '7'];
  await page.goto(`${url}?panel=step&logits=3,2,1&temperature=0.5&top_k=0&top_p=0.8&seed=7`);
  await page.locator('figure.stage').first().waitFor();
  const step = stepPanel(page);

  // The conformance view: each engine's column is the CLI's final distribution under
  // --engine, and the words say who keeps what (the example).
  assert.equal(await page.getByTestId('conformance-summary').textContent(),
    'lab, hf and vllm keep {0}; llama.cpp keeps {0, 1}.');
  for (const [column, engine] of ['lab', 'hf', 'llama.cpp', 'vllm'].entries()) {
    const expected = [0, 0, 0];
    for (const t of cli([...settings, '--engine', engine]).final) expected[t.id] = t.prob;
    const cells = await page.$$eval('[data-testid="engine-conformance"] tbody tr',
      (rows, c) => rows.map((r) => Number(r.querySelectorAll('td')[c].dataset.value)), column);
    cells.forEach((p, id) => assert.ok(Math.abs(p - expected[id]) <= TOLERANCE, `${engine} token ${id}: ${p}`));
  }

  // Keyboard only: move temperature after top-p. Focus stays on the moved sampler.
  const order = () => page.$$eval('[data-testid="sampler-chain"] li', (items) => items.map((li) => li.dataset.sampler));
  assert.deepEqual((await order()).slice(0, 5), ['temperature', 'top_n_sigma', 'top_h', 'top_k', 'top_p']);
  await step.getByRole('button', { name: 'Move temperature later' }).focus();
  for (let k = 0; k < 4; k++) {
    await page.keyboard.press('Enter');
    await page.waitForFunction((n) => document.querySelectorAll('[data-testid="sampler-chain"] li')[n]?.dataset.sampler === 'temperature', k + 1);
  }
  assert.deepEqual((await order()).slice(0, 6), ['top_n_sigma', 'top_h', 'top_k', 'top_p', 'temperature', 'min_p']);
  assert.equal(await page.evaluate(() => document.activeElement?.id), 'chain-temperature-later');
  await page.waitForURL(/samplers=/);
  const samplers = new URL(page.url()).searchParams.get('samplers');
  const moved = cli([...settings, '--samplers', samplers]);
  await page.waitForFunction(() => document.querySelector('figure.stage:last-of-type')?.dataset.stage === 'temperature');
  assertSameAsCli(await stagesOnPage(page), moved, 3);
  assert.deepEqual(moved.final.map((t) => t.id), [0, 1], 'top-p before temperature keeps {0, 1}');

  await step.getByRole('button', { name: "Use the engine's order" }).click();
  await page.waitForURL((u) => !u.searchParams.has('samplers'));
  assert.deepEqual(errors, []);
  await page.close();
});

// The Observe panel in headless Chromium: the shipped demo telemetry observed in the
// observation worker, its figures checked against a direct computation over the same lines
// and against `decode-lab observe`; learner files with a tampered record and a duplicate
// outcome; the baseline changed with the keyboard; axe-core on the result.

import { test, before, after } from 'node:test';
import { execFileSync } from 'node:child_process';
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gunzipSync } from 'node:zlib';
import { chromium } from 'playwright-core';
import { serve, BASE_ARGS } from './serve.mjs';

const DIST = process.env.DIST_DIR ?? join(import.meta.dirname, '..', 'dist');
const CHROMIUM = process.env.CHROMIUM ?? '/usr/bin/chromium';
const CLI = process.env.DECODE_LAB_BIN ?? join(import.meta.dirname, '..', 'target', 'debug', 'decode-lab');
const AXE = createRequire(import.meta.url).resolve('axe-core/axe.min.js');
const DEMO = join(import.meta.dirname, '..', 'models', 'decode-lab-tiny-v1', 'demo');
const TIMEOUT = 120_000;

let server;
let url;
let browser;

before(async () => {
  ({ server, url } = await serve(DIST));
  browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: [...BASE_ARGS, '--disable-gpu'] });
});

after(async () => {
  await browser?.close();
  server?.close();
});

async function open(search) {
  const context = await browser.newContext();
  const page = await context.newPage();
  const errors = [];
  page.on('pageerror', (e) => errors.push(String(e)));
  await page.goto(url + search);
  return { context, page, errors };
}

async function assertAccessible(page, label) {
  await page.addScriptTag({ path: AXE });
  const violations = await page.evaluate(async () => {
    const result = await window.axe.run(document, { resultTypes: ['violations'] });
    return result.violations.map((v) => `${v.id} (${v.impact}): ${v.help}\n    ${v.nodes.map((n) => n.target.join(' ')).join('\n    ')}`);
  });
  assert.deepEqual(violations, [], `axe-core on ${label}:\n${violations.join('\n')}`);
}

/** The versions table's rows as arrays of cell texts. */
const rows = (page) => page.locator('#obs-versions-table tbody tr').evaluateAll((trs) =>
  trs.map((tr) => [...tr.querySelectorAll('th, td')].map((c) => c.textContent)));

const nearestRank = (values, p) => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.max(1, Math.ceil(p * sorted.length)) - 1];
};

test('the demo is observed in the worker: figures equal a direct computation and the CLI; the rare slice stops the candidate', async () => {
  const lines = gunzipSync(readFileSync(join(DEMO, 'runs.jsonl.gz'))).toString('utf8');
  const outcomes = gunzipSync(readFileSync(join(DEMO, 'outcomes.jsonl.gz'))).toString('utf8');
  const manifest = JSON.parse(readFileSync(join(DEMO, 'traffic.json'), 'utf8'));

  // Directly: p99 TTFT (nearest rank) and the outcome rate per version and slice.
  const accepted = new Map(outcomes.trim().split('\n').map((l) => JSON.parse(l)).map((o) => [o.run_id, o.outcome === 'accepted']));
  const direct = new Map();
  for (const line of lines.trim().split('\n')) {
    const r = JSON.parse(line);
    for (const slice of ['all', r.tags.slice]) {
      const key = `${r.version_id} ${slice}`;
      const group = direct.get(key) ?? { ttft: [], joined: 0, accepted: 0 };
      group.ttft.push(r.ttft_us / 1000);
      if (accepted.has(r.run_id)) {
        group.joined += 1;
        group.accepted += accepted.get(r.run_id) ? 1 : 0;
      }
      direct.set(key, group);
    }
  }

  // The CLI on the same files.
  const dir = mkdtempSync(join(tmpdir(), 'observe-'));
  writeFileSync(join(dir, 'runs.jsonl'), lines);
  writeFileSync(join(dir, 'outcomes.jsonl'), outcomes);
  const cli = JSON.parse(execFileSync(CLI, ['observe', join(dir, 'runs.jsonl'), '--outcomes', join(dir, 'outcomes.jsonl'),
    '--baseline', manifest.baseline, '--json'], { encoding: 'utf8', maxBuffer: 1 << 26 }));

  const { context, page, errors } = await open('?panel=observe&obs-demo=1');
  await page.locator('.obs-verdict').waitFor({ timeout: TIMEOUT });
  const table = await rows(page);
  assert.equal(table.length, direct.size);
  for (const [version, slice, runs, ttft, , , , rate] of table) {
    const group = direct.get(`${version} ${slice}`);
    assert.ok(group, `${version} ${slice} is in the demo`);
    assert.equal(Number(runs), group.ttft.length, `${version} ${slice} runs`);
    assert.equal(ttft.split(' / ')[1], nearestRank(group.ttft, 0.99).toFixed(2), `${version} ${slice} p99 TTFT`);
    assert.ok(rate.startsWith(`${(100 * group.accepted / group.joined).toFixed(1)} %`), `${version} ${slice} outcome rate ${rate}`);
    const version_ = cli.versions.find((v) => v.version_id === version);
    const summary = slice === 'all' ? version_ : version_.slices.find((s) => s.slice === slice);
    assert.equal(summary.ttft_p99_ms.toFixed(2), ttft.split(' / ')[1]);
    assert.equal(summary.outcomes_joined, group.joined);
  }

  // The verdict: the candidate is stopped, Basque named, the baseline the rollback target.
  const verdict = await page.locator('.obs-verdict').textContent();
  assert.match(verdict, /stop/);
  assert.match(verdict, /eu −\d+\.\d points/);
  assert.ok(verdict.includes(`Roll back to ${manifest.baseline}`), verdict);
  assert.equal(verdict.includes(cli.verdict.split('\n')[0]), true, 'the page says what the CLI says');
  assert.equal(await page.locator('#obs-baseline').inputValue(), manifest.baseline);
  // Every chart has its table, and the alternatives are listed.
  assert.equal(await page.locator('.obs-result svg.chart').count(), 2);
  assert.equal(await page.locator('#obs-ttft-table tbody tr').count(), direct.size);
  assert.equal(await page.locator('#obs-outcomes-table tbody tr').count(), direct.size);
  assert.ok(await page.locator('#obs-alternatives-table tbody tr').count() >= 12);
  assert.match(await page.locator('.obs-conclusions').textContent(), /retrieval wins/);
  await assertAccessible(page, 'observe with the demo');
  assert.deepEqual(errors, []);
  await context.close();
});

test('learner files: a tampered record is rejected by line, a duplicate outcome names its run, and the baseline changes from the keyboard', async () => {
  const lines = gunzipSync(readFileSync(join(DEMO, 'runs.jsonl.gz'))).toString('utf8').trim().split('\n').slice(0, 60);
  const tampered = JSON.parse(lines[4]);
  tampered.steps[0].token += 1;
  lines[4] = JSON.stringify(tampered);
  const ids = lines.map((l) => JSON.parse(l)).map((r) => [r.run_id, r.version_id]);
  const versions = [...new Set(ids.map(([, v]) => v))];
  const outcomes = ids.map(([id], i) => JSON.stringify({ run_id: id, outcome: i % 2 ? 'accepted' : 'rejected', at_s: 1000 + i })).join('\n');

  const { context, page, errors } = await open('?panel=observe');
  // Observing without a file says so at the field.
  await page.locator('#obs-observe').click();
  assert.equal(await page.locator('#obs-runs').getAttribute('aria-invalid'), 'true');
  assert.match(await page.locator('#obs-runs-problem').textContent(), /Choose one or more run logs/);

  await page.locator('#obs-runs').setInputFiles({ name: 'runs.jsonl', mimeType: 'application/x-ndjson', buffer: Buffer.from(lines.join('\n')) });
  await page.locator('#obs-outcomes').setInputFiles({ name: 'outcomes.jsonl', mimeType: 'application/x-ndjson', buffer: Buffer.from(outcomes) });
  await page.locator('#obs-observe').click();
  await page.locator('#obs-rejected-table').waitFor({ timeout: TIMEOUT });
  const rejected = await page.locator('#obs-rejected-table tbody tr').first().textContent();
  assert.match(rejected, /runs\.jsonl/);
  assert.match(rejected, /5/);
  assert.match(rejected, /digest/);
  assert.match(await page.locator('.observe [role=status]').textContent(), /59 runs in \d versions; 1 lines rejected/);

  // The baseline, chosen with the keyboard, observes the same files again against it.
  await page.locator('#obs-baseline').focus();
  await page.keyboard.press('ArrowDown');
  await page.locator('.obs-verdict .chosen').first().waitFor({ timeout: TIMEOUT });
  assert.ok(versions.includes(await page.locator('#obs-baseline').inputValue()));
  assert.match(page.url(), /obs-baseline=[0-9a-f]{12}/);

  // A duplicate outcome is an error that names the run.
  const duplicated = `${outcomes}\n${JSON.stringify({ run_id: ids[0][0], outcome: 'accepted', at_s: 5000 })}`;
  await page.locator('#obs-outcomes').setInputFiles({ name: 'outcomes.jsonl', mimeType: 'application/x-ndjson', buffer: Buffer.from(duplicated) });
  await page.locator('#obs-runs').setInputFiles({ name: 'runs.jsonl', mimeType: 'application/x-ndjson', buffer: Buffer.from(lines.join('\n')) });
  await page.locator('#obs-observe').click();
  await page.locator('.observe [role=alert]').waitFor({ timeout: TIMEOUT });
  assert.ok((await page.locator('.observe [role=alert]').textContent()).includes(ids[0][0]));
  await assertAccessible(page, 'observe with an error');
  assert.deepEqual(errors, []);
  await context.close();
});

test('after a first visit the demo is observed offline: the worker, the identifier and the telemetry are cached', async () => {
  const { context, page, errors } = await open('?panel=observe');
  await page.evaluate(() => navigator.serviceWorker.ready.then(() => true));
  await context.setOffline(true);
  await page.goto(`${url}?panel=observe&obs-demo=1`);
  await page.locator('.obs-verdict').waitFor({ timeout: TIMEOUT });
  assert.match(await page.locator('.obs-verdict').textContent(), /Roll back to/);
  assert.deepEqual(errors, []);
  await context.close();
});

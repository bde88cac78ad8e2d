// The Compare panel in Debian's headless Chromium: two policies on the same draws and each
// one's tree of paths, run in the model worker. Every table must hold exactly the numbers
// `decode-lab compare --json` and `decode-lab paths --json` print for the same settings;
// the panel passes axe-core after a run in chart and table view, keeps its fields in the
// URL, and names a bad value at its field.
//
// Needs: DIST_DIR (Trunk's output), DECODE_LAB_BIN (the CLI), CHROMIUM (default
// /usr/bin/chromium). `cargo xtask test` builds both and sets them.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { chromium } from 'playwright-core';
import { serve, BASE_ARGS } from './serve.mjs';

const DIST = process.env.DIST_DIR ?? join(import.meta.dirname, '..', 'dist');
const CLI = process.env.DECODE_LAB_BIN ?? join(import.meta.dirname, '..', 'target', 'debug', 'decode-lab');
const CHROMIUM = process.env.CHROMIUM ?? '/usr/bin/chromium';
const AXE = createRequire(import.meta.url).resolve('axe-core/axe.min.js');
const RUN_TIMEOUT = 180_000;

let server;
let browser;
let url;

before(async () => {
  ({ server, url } = await serve(DIST));
  browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: [...BASE_ARGS, '--disable-gpu'] });
});

after(async () => {
  await browser?.close();
  server?.close();
});

function cli(args) {
  return JSON.parse(execFileSync(CLI, [...args, '--json'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] }));
}

async function assertAccessible(page, label) {
  await page.addScriptTag({ path: AXE });
  const violations = await page.evaluate(async () => {
    const result = await window.axe.run(document, { resultTypes: ['violations'] });
    return result.violations.map((v) => `${v.id} (${v.impact}): ${v.help}\n    ${v.nodes.map((n) => n.target.join(' ')).join('\n    ')}`);
  });
  assert.deepEqual(violations, [], `axe-core on ${label}:\n${violations.join('\n')}`);
}

/** Each body row of table `id`: its header and every cell's data-value (or text). */
async function rows(page, id) {
  return page.locator(`#${id} tbody tr`).evaluateAll((trs) => trs.map((tr) => ({
    header: tr.querySelector('th').textContent,
    cells: [...tr.querySelectorAll('td')].map((td) => td.dataset.value ?? td.textContent),
  })));
}

// The browser's f64 exp (Rust's own, in WebAssembly) and the CLI's (the C library's) may
// differ in the last bit, as in lab.test.mjs; counts and token ids must be equal.
const TOLERANCE = 1e-12;

/** A cell's data-value against the CLI's JSON value: the same number to TOLERANCE, or "inf". */
function same(cell, value) {
  if (value === 'inf') return cell === 'inf';
  return Math.abs(Number(cell) - value) <= TOLERANCE * Math.max(1, Math.abs(value));
}

function assertCells(cells, values, what) {
  assert.equal(cells.length, values.length, what);
  cells.forEach((cell, i) => assert.ok(same(cell, values[i]), `${what}, column ${i}: page ${cell}, CLI ${values[i]}`));
}

const PROMPT = 'To insert a table, ';
const A = ['--temperature', '0.7', '--top-k', '0', '--top-p', '1', '--min-p', '0'];
const B = ['--temperature', '1.2', '--top-k', '0', '--top-p', '0.8', '--min-p', '0', '--engine', 'llama.cpp'];

test('the Compare panel holds the numbers of decode-lab compare and paths, and passes axe-core', async () => {
  const context = await browser.newContext();
  const page = await context.newPage();
  const errors = [];
  page.on('pageerror', (e) => errors.push(String(e)));
  const search = `?panel=compare&cmp_prompt=${encodeURIComponent(PROMPT)}&cmp_seed=7&cmp_max=12`
    + '&cmp_b_temperature=1.2&cmp_b_engine=llama.cpp&cmp_seeds=40&cmp_depth=2';
  await page.goto(url + search);
  const panel = page.locator('#compare');
  await panel.getByRole('button', { name: 'Compare', exact: true }).click();
  await page.waitForFunction(() => ['done', 'failed'].includes(document.querySelector('#compare')?.dataset.state),
    null, { timeout: RUN_TIMEOUT });
  assert.equal(await panel.getAttribute('data-state'), 'done',
    await panel.locator('[role=alert]').allTextContents().then((t) => t.join(' ')));

  const c = cli(['compare', '--prompt', PROMPT, '--seed', '7', '--max-tokens', '12', '--a', A.join(' '), '--b', B.join(' ')]);
  // The tokens aligned, step by step, and the first divergence in the live region.
  const tokens = await rows(page, 'cmp-tokens');
  assert.equal(tokens.length, Math.max(c.a.steps.length, c.b.steps.length));
  tokens.forEach((row, t) => {
    assert.equal(row.cells[0].split(' ')[0], String(c.a.steps[t]?.token ?? 'nothing'));
    assert.equal(row.cells[1].split(' ')[0], String(c.b.steps[t]?.token ?? 'nothing'));
  });
  const status = await page.getByTestId('cmp-status').textContent();
  if (c.first_divergence === undefined) assert.match(status, /Both policies chose the same/);
  else assert.match(status, new RegExp(`part at step ${c.first_divergence}:`));
  // Each measure's table, value for value.
  const prob = await rows(page, 'cmp-prob-table');
  const kl = await rows(page, 'cmp-kl-table');
  const tv = await rows(page, 'cmp-tv-table');
  assert.equal(prob.length, c.steps.length);
  c.steps.forEach((s, t) => {
    assertCells(prob[t].cells, [s.prob_a, s.prob_b, s.survivors_a, s.survivors_b], `step ${t}`);
    assertCells(kl[t].cells, [s.kl], `KL at step ${t}`);
    assertCells(tv[t].cells, [s.tv], `TV at step ${t}`);
  });
  const shape = await rows(page, 'cmp-shape-table');
  ['distinct_1', 'distinct_2', 'repetition'].forEach((measure, i) => {
    const expected = [c.shape_a[measure], c.shape_b[measure]];
    expected.forEach((x, side) => {
      const cell = shape[i].cells[side];
      assert.ok(x === undefined ? cell === '–' : same(cell, x), `${measure} of ${'ab'[side]}: page ${cell}, CLI ${x}`);
    });
  });

  // Each tree: decode-lab paths with the same policy, seeds 7 to 46, depth 2.
  for (const [name, flags] of [['a', A], ['b', B]]) {
    const tree = cli(['paths', '--prompt', PROMPT, '--seeds', '40', '--first-seed', '7', '--depth', '2', ...flags]);
    const shown = await rows(page, `cmp-tree-${name}-table`);
    assert.equal(shown.length, tree.nodes.length, `tree ${name}`);
    tree.nodes.forEach((n, i) => {
      assertCells(shown[i].cells, [n.runs, n.empirical, n.analytic, n.step_prob, n.ended], `tree ${name} node ${i}`);
    });
  }

  // Every chart has its captioned table; the whole panel is accessible in both views.
  const charts = await panel.locator('svg.chart').count();
  assert.equal(charts, 6);
  assert.ok(await panel.locator('table.mirror caption').count() >= charts);
  await assertAccessible(page, 'compare after a run');
  await page.getByRole('button', { name: 'Table view' }).click();
  await assertAccessible(page, 'compare after a run, table view');
  await page.getByRole('button', { name: 'Table view' }).click();

  // The fields live in the URL; a bad one is named at its field and Compare waits.
  await panel.getByLabel('Seeds per tree').fill('12');
  await page.waitForFunction(() => new URLSearchParams(location.search).get('cmp_seeds') === '12');
  await panel.getByLabel('a: top-p', { exact: true }).fill('2');
  await panel.locator('#cmp-a-top-p-problem').waitFor();
  assert.match(await panel.locator('#cmp-a-top-p-problem').textContent(), /^Policy a: /);
  assert.equal(await panel.getByLabel('a: top-p', { exact: true }).getAttribute('aria-invalid'), 'true');
  assert.ok(await panel.getByRole('button', { name: 'Compare', exact: true }).isDisabled());
  assert.deepEqual(errors, []);
  await context.close();
});

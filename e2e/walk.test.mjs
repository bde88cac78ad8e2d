// Every chart of every panel walked with the keyboard alone (crates/lab/src/widgets/walk.rs):
// each chart is one tab stop named by its visible takeaway; Down, Left, Right, Home, End, Up
// and Escape move as listed, and every move's words in the chart's live region equal what its
// mirror table says of that row (each column header with the row's cell, then "i of n");
// the marks of the row are ringed; axe-core finds nothing on the walked page. Then the
// chart as sound: S, the Listen button and M render into an OfflineAudioContext that the test
// hands the page, and the tones' order and pitches (measured from the rendered samples) are
// the rows' values on the documented scale.
//
// Needs: DIST_DIR (Trunk's output), CHROMIUM (default /usr/bin/chromium).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { chromium } from 'playwright-core';
import { serve, BASE_ARGS } from './serve.mjs';

const DIST = process.env.DIST_DIR ?? join(import.meta.dirname, '..', 'dist');
const CHROMIUM = process.env.CHROMIUM ?? '/usr/bin/chromium';
const AXE = createRequire(import.meta.url).resolve('axe-core/axe.min.js');
const RUN_TIMEOUT = 120_000;
const LEFT = 'Back at the whole chart. Tab moves on.';
// The rows the walk's N and P visit (walk.rs KEY_ROWS).
const KEY_ROWS = 'tr.top, tr.landed, tr.cap-chosen-row, tr.cap-detected-row, tr.breach, tr.over';
// Chartability's smallest text, in CSS pixels as drawn.
const SMALLEST_TEXT_PX = 12;
// Thirty typed logits (their id over four): more than a stage chart draws one bar each.
const MANY = Array.from({ length: 30 }, (_, i) => i / 4).join(',');

/** Waits until the panel `id` finished its run; fails with its message if it failed. */
const finished = (id) => async (page) => {
  await page.waitForFunction((id) => ['done', 'failed'].includes(document.querySelector(`#${id}`)?.dataset.state),
    id, { timeout: RUN_TIMEOUT });
  assert.equal(await page.locator(`#${id}`).getAttribute('data-state'), 'done',
    await page.locator(`#${id} [role=alert]`).allTextContents().then((t) => t.join(' ')));
};

// Each panel with charts, in the state that draws them all.
/** Waits for the decoding step's answer: its stages and its conformance table drawn. */
const stepped = async (page) => {
  await page.locator('figure.stage').first().waitFor();
  await page.getByTestId('engine-conformance').waitFor();
};

const SCENES = [
  // The step's charts come from the model worker's answer.
  { panel: 'step', search: '?panel=step&logits=1.2,0.1,2.4,1.7,0.3,2.0&temperature=0.7&top_k=3&seed=7', ready: stepped },
  { panel: 'step', search: `?panel=step&logits=${MANY}&temperature=1&top_k=25&top_p=1&seed=7`, ready: stepped },
  { panel: 'generate', search: '?panel=generate&backend=cpu&max=6&temperature=0&run=1', ready: finished('generate') },
  {
    panel: 'your-turn', search: '?panel=your-turn&yt_prompt=Once%20upon%20a%20time&yt_n=2&yt_max=4&yt_seed=7',
    act: async (page) => {
      await page.locator('#your-turn').getByLabel('Temperature 1.5').check();
      await page.locator('#your-turn').getByRole('button', { name: '3. Run both' }).click();
    },
    ready: finished('your-turn'),
  },
  {
    panel: 'compare', search: '?panel=compare&cmp_max=6&cmp_seeds=8&cmp_depth=2',
    act: (page) => page.locator('#compare').getByRole('button', { name: 'Compare', exact: true }).click(), ready: finished('compare'),
  },
  { panel: 'kv-cache', search: '?panel=kv-cache' },
  { panel: 'memory', search: '?panel=memory' },
  { panel: 'checkpoint', search: '?panel=checkpoint' },
  {
    panel: 'capacity', search: '?panel=capacity',
    act: (page) => page.locator('#cap-plan').click(), ready: (page) => page.locator('.cap-decision').waitFor({ timeout: RUN_TIMEOUT }),
  },
  { panel: 'observe', search: '?panel=observe&obs-demo=1', ready: (page) => page.locator('.obs-verdict').waitFor({ timeout: RUN_TIMEOUT }) },
];

// Each walked chart's takeaway and its reading grade.
const GRADES = [];

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

/** The chart's mirror table as the walk must say it: headers, and each row's cells and group. */
async function mirror(walk) {
  return walk.evaluate((root, KEY_ROWS) => {
    const clean = (e) => e.textContent.trim();
    const table = root.querySelector('table');
    return {
      headers: [...table.querySelectorAll('thead th')].map(clean),
      rows: [...table.querySelectorAll('tbody > tr')].map((tr) => ({
        cells: [...tr.querySelectorAll('th, td')].map(clean),
        group: tr.dataset.group ?? null,
        key: tr.matches(KEY_ROWS),
      })),
    };
  }, KEY_ROWS);
}

/** An English word's syllables by the rule of thumb walk.rs uses: vowel groups, less a silent final "e" or "ed". */
function syllables(word) {
  const w = word.toLowerCase().replace(/[^a-z]/g, '');
  let count = (w.match(/[aeiouy]+/g) ?? []).length;
  const silent = (w.endsWith('e') && !w.endsWith('le')) || (w.endsWith('ed') && !w.endsWith('ted') && !w.endsWith('ded'));
  if (silent && count > 1) count -= 1;
  return Math.max(count, 1);
}

/** Flesch–Kincaid grade, as walk.rs's `grade`: 0.39 words per sentence + 11.8 syllables per word − 15.59. */
function grade(text) {
  const words = text.split(/[\s/]+/).filter((w) => /[\p{L}\p{N}]/u.test(w));
  const sentences = Math.max(1, (text.trim().match(/[.!?](?=\s|$)/g) ?? []).length);
  const n = Math.max(1, words.length);
  return 0.39 * n / sentences + 11.8 * words.reduce((a, w) => a + syllables(w), 0) / n - 15.59;
}

/** What row i says, computed here from the table: each header with its non-empty cell, then its place. */
function says(table, i, place, of) {
  const parts = table.headers.map((h, k) => [h, table.rows[i].cells[k] ?? '']).filter(([, c]) => c !== '').map(([h, c]) => `${h} ${c}`);
  parts.push(`${place + 1} of ${of}`);
  return parts.join(', ');
}

/** Presses `key` in the focused chart and returns what its live region then says. */
async function press(page, walk, key) {
  const live = walk.locator('.walk-live');
  await live.evaluate((e) => { e.textContent = ''; });
  await page.keyboard.press(key);
  return (await live.textContent()).trim();
}

/** Row i's marks are ringed, and nothing else is; returns how many marks it has. */
async function assertRinged(walk, rows, label) {
  const { ringed, marked } = await walk.evaluate((root, rows) => ({
    ringed: [...root.querySelectorAll('.walk-at')].map((e) => Number(e.dataset.point)),
    marked: rows.flatMap((i) => [...root.querySelectorAll(`[data-point="${i}"]`)].map(() => i)),
  }), rows);
  assert.deepEqual(ringed.sort((a, b) => a - b), marked.sort((a, b) => a - b), `${label}: the ring is on rows ${rows}`);
  return marked.length;
}

/** Walks one chart from its focus through every row, up and out, checking every word. */
async function walkChart(page, chart, label) {
  const walk = chart.locator('xpath=ancestor::*[@data-walk][1]');
  const table = await mirror(walk);
  const n = table.rows.length;
  // One tab stop, named by its visible takeaway.
  assert.equal(await chart.getAttribute('tabindex'), '0', label);
  assert.equal(await chart.locator('[tabindex], a, button, input').count(), 0, `${label}: nothing inside is focusable`);
  // Nor is anything around it: the chart is the only tab stop on the way to its marks.
  const around = await chart.evaluate((svg) => {
    const stops = [];
    for (let e = svg.parentElement; e && e.localName !== 'main'; e = e.parentElement) {
      if (e.hasAttribute('tabindex')) stops.push(`${e.localName}.${[...e.classList].join('.')}`);
    }
    return stops;
  });
  assert.deepEqual(around, [], `${label}: a tab stop around the chart`);
  const takeaway = (await walk.locator('.takeaway').first().textContent()).trim();
  assert.ok(takeaway.length > 0, `${label}: a takeaway`);
  assert.equal(await chart.getAttribute('aria-label'), takeaway, `${label}: the takeaway is the chart's name`);
  GRADES.push({ label, grade: grade(takeaway), takeaway });
  const caption = (await walk.locator('table caption').first().textContent()).trim();
  GRADES.push({ label: `${label}'s table caption`, grade: grade(caption), takeaway: caption });
  assert.ok(n > 0, `${label}: the table has rows`);
  // Every label drawn at 12 px or more.
  const small = await chart.evaluate((svg, least) => [...svg.querySelectorAll('text')]
    .map((t) => {
      // The drawn scale, rotation or not (a y-axis title is turned a quarter).
      const m = t.getScreenCTM();
      return { text: t.textContent, px: parseFloat(getComputedStyle(t).fontSize) * (m ? Math.hypot(m.a, m.b) : 0) };
    })
    .filter((t) => t.px < least - 0.01).map((t) => `"${t.text}" ${t.px.toFixed(1)} px`), SMALLEST_TEXT_PX);
  assert.deepEqual(small, [], `${label}: labels under ${SMALLEST_TEXT_PX} px`);
  const unsounded = await walk.evaluate((root, n) => Array.from({ length: n }, (_, i) => i)
    .filter((i) => root.querySelector(`[data-point="${i}"]`) && !root.querySelector(`[data-point="${i}"][data-sound]`)), n);
  assert.deepEqual(unsounded, [], `${label}: every drawn row has a value to sound`);
  await chart.focus();
  assert.ok(await chart.evaluate((e) => e === document.activeElement), `${label}: focused`);
  const names = [...new Set(table.rows.map((r) => r.group))];
  const grouped = names.length >= 2 && names.every((g) => g !== null);
  const groups = grouped ? names.map((g) => table.rows.flatMap((r, i) => (r.group === g ? [i] : []))) : [table.rows.map((_, i) => i)];
  let marks = 0;
  for (const [g, members] of groups.entries()) {
    if (grouped) {
      const key = g === 0 ? 'ArrowDown' : 'ArrowRight';
      const noun = members.length === 1 ? 'point' : 'points';
      assert.equal(await press(page, walk, key), `${names[g]}: ${members.length} ${noun}, group ${g + 1} of ${names.length}`, `${label}: group ${g}`);
      await assertRinged(walk, members, `${label} group ${g}`);
    }
    for (const [place, i] of members.entries()) {
      const key = place === 0 ? 'ArrowDown' : 'ArrowRight';
      const expected = says(table, i, place, members.length) + (grouped ? ` in ${names[g]}` : '');
      assert.equal(await press(page, walk, key), expected, `${label}: row ${i}`);
      marks += await assertRinged(walk, [i], `${label} row ${i}`);
    }
    // Right at the last stays there; Home and End go to the first and the last.
    const last = members.at(-1);
    assert.equal(await press(page, walk, 'ArrowRight'), says(table, last, members.length - 1, members.length) + (grouped ? ` in ${names[g]}` : ''));
    assert.equal(await press(page, walk, 'Home'), says(table, members[0], 0, members.length) + (grouped ? ` in ${names[g]}` : ''));
    assert.equal(await press(page, walk, 'End'), says(table, last, members.length - 1, members.length) + (grouped ? ` in ${names[g]}` : ''));
    if (grouped) {
      const noun = members.length === 1 ? 'point' : 'points';
      assert.equal(await press(page, walk, 'ArrowUp'), `${names[g]}: ${members.length} ${noun}, group ${g + 1} of ${names.length}`);
    }
  }
  assert.ok(marks > 0, `${label}: some row has marks`);
  // Up to the whole chart, the keys, then Escape back to the chart and out.
  const noun = n === 1 ? 'point' : 'points';
  const whole = grouped
    ? `The whole chart: ${n} ${noun} in ${names.length} groups. Down goes to the groups. H lists the keys.`
    : `The whole chart: ${n} ${noun}. Down goes to the points. H lists the keys.`;
  assert.equal(await press(page, walk, 'ArrowUp'), whole, `${label}: up to the chart`);
  assert.equal(await assertRinged(walk, [], `${label} at the chart`), 0);
  assert.match(await press(page, walk, 'h'), /^The keys in this chart\. Left and Right: the next point\./);
  await press(page, walk, 'End');
  assert.equal(await press(page, walk, 'Escape'), LEFT, `${label}: Escape`);
  assert.equal(await chart.getAttribute('data-at'), 'chart');
  await assertRinged(walk, [], `${label} after Escape`);

  // Page Down from the chart: the first row, then ten of its siblings at a time.
  const siblingsOf = (i) => groups.find((m) => m.includes(i));
  const say = (i) => {
    const members = siblingsOf(i);
    const place = members.indexOf(i);
    const g = groups.indexOf(members);
    return says(table, i, place, members.length) + (grouped ? ` in ${names[g]}` : '');
  };
  assert.equal(await press(page, walk, 'PageDown'), say(0), `${label}: Page Down from the chart`);
  const first = siblingsOf(0);
  for (let place = 10; place < first.length + 10; place += 10) {
    const to = first[Math.min(place, first.length - 1)];
    assert.equal(await press(page, walk, 'PageDown'), say(to), `${label}: Page Down to row ${to}`);
  }
  assert.equal(await press(page, walk, 'PageUp'), say(first[Math.max(0, first.length - 1 - 10)]), `${label}: Page Up`);
  await press(page, walk, 'Escape');
  // N and P: the table's key rows in order, wrapping round.
  const keys = table.rows.flatMap((r, i) => (r.key ? [i] : []));
  if (keys.length === 0) {
    assert.equal(await press(page, walk, 'n'), 'This chart has no key point.', `${label}: N`);
  } else {
    for (const i of [...keys, keys[0]]) assert.equal(await press(page, walk, 'n'), say(i), `${label}: N to row ${i}`);
    assert.equal(await press(page, walk, 'p'), say(keys.at(-1)), `${label}: P wraps to the last key row`);
    await assertRinged(walk, [keys.at(-1)], `${label} at its last key row`);
  }
  await press(page, walk, 'Escape');
  return n;
}

test('every chart of every panel is walked with the keyboard, each move saying its mirror-table row', { timeout: 10 * RUN_TIMEOUT }, async () => {
  const context = await browser.newContext();
  const page = await context.newPage();
  const errors = [];
  page.on('pageerror', (e) => errors.push(String(e)));
  const walked = [];
  for (const scene of SCENES) {
    await page.goto(url + scene.search);
    await page.locator('main section.panel h2').first().waitFor();
    if (scene.act) await scene.act(page);
    if (scene.ready) await scene.ready(page);
    // Every picture of the panel is a walkable chart.
    const unwalkable = await page.locator('main svg[role=img], main svg.chart:not([data-walk-chart])').count();
    assert.equal(unwalkable, 0, `${scene.panel}: a chart without the walk`);
    const charts = page.locator('main [data-walk-chart]');
    const count = await charts.count();
    for (let k = 0; k < count; k++) {
      const rows = await walkChart(page, charts.nth(k), `${scene.panel} chart ${k + 1} of ${count}`);
      walked.push(`${scene.panel}#${k + 1}:${rows}`);
    }
    await page.addScriptTag({ path: AXE });
    const violations = await page.evaluate(async () => {
      const result = await window.axe.run(document, { resultTypes: ['violations'] });
      return result.violations.map((v) => `${v.id} (${v.impact}): ${v.help}\n    ${v.nodes.map((n) => n.target.join(' ')).join('\n    ')}`);
    });
    assert.deepEqual(violations, [], `axe-core on ${scene.panel} after the walk:\n${violations.join('\n')}`);
  }
  console.log(`walked ${walked.length} charts (panel#chart:rows): ${walked.join(' ')}`);
  for (const g of GRADES) console.log(`grade ${g.grade.toFixed(1)} ${g.label}: ${g.takeaway}`);
  const hard = GRADES.filter((g) => g.grade > 9).map((g) => `${g.label} (grade ${g.grade.toFixed(1)}): ${g.takeaway}`);
  assert.deepEqual(hard, [], 'takeaways and table captions above grade 9 (Chartability: reading level)');
  for (const panel of ['step', 'generate', 'your-turn', 'compare', 'kv-cache', 'memory', 'capacity', 'observe']) {
    assert.ok(walked.some((w) => w.startsWith(`${panel}#`)), `${panel} has a chart walked`);
  }
  assert.deepEqual(errors, []);
  await context.close();
});

/** The documented scale (walk.rs): 220 Hz for the smallest value, two octaves up for the largest. */
function pitches(values) {
  const finite = values.filter(Number.isFinite);
  const [lo, hi] = [Math.min(...finite), Math.max(...finite)];
  return values.map((v) => (Number.isFinite(v) ? 220 * 2 ** (2 * (hi > lo ? (v - lo) / (hi - lo) : 0.5)) : null));
}

/** The pitch of `samples` between `from` and `to` seconds: upward zero crossings, interpolated. */
function measure(samples, rate, from, to) {
  const crossings = [];
  for (let n = Math.ceil(from * rate); n < to * rate; n++) {
    const [a, b] = [samples[n - 1], samples[n]];
    if (a < 0 && b >= 0) crossings.push((n - 1 + a / (a - b)) / rate);
  }
  if (crossings.length < 3) return null;
  return (crossings.length - 1) / (crossings.at(-1) - crossings[0]);
}

/** Hands the page an OfflineAudioContext, runs `act`, renders it, and returns each tone slot's measured pitch. */
async function rendered(page, slots, act) {
  const seconds = 0.05 + slots * 0.2 + 0.2;
  await page.evaluate((seconds) => { window.walkAudioContext = new OfflineAudioContext(1, Math.ceil(seconds * 44100), 44100); }, seconds);
  await act();
  const samples = await page.evaluate(async () => {
    const buffer = await window.walkAudioContext.startRendering();
    delete window.walkAudioContext;
    return Array.from(buffer.getChannelData(0));
  });
  return Array.from({ length: slots }, (_, k) => measure(samples, 44100, 0.05 + 0.2 * k + 0.03, 0.05 + 0.2 * k + 0.12));
}

test('a chart plays as tones, pitch rising with each row\'s value: S, Listen and M, rendered offline', { timeout: 2 * RUN_TIMEOUT }, async () => {
  const context = await browser.newContext();
  const page = await context.newPage();
  const errors = [];
  page.on('pageerror', (e) => errors.push(String(e)));
  // The chapter's example: after top-k, four rows, token 1 removed (probability 0).
  await page.goto(`${url}?panel=step`);
  const chart = page.locator('main [data-walk-chart]').nth(2);
  await chart.waitFor();
  const walk = chart.locator('xpath=ancestor::*[@data-walk][1]');
  const values = await walk.evaluate((root) => [...root.querySelectorAll('tbody > tr')].map((_, i) =>
    Number(root.querySelector(`[data-point="${i}"][data-sound]`)?.dataset.sound)));
  const probabilities = await walk.evaluate((root) => [...root.querySelectorAll('tbody > tr td:nth-of-type(2)')].map((td) => Number(td.dataset.value)));
  assert.deepEqual(values, probabilities, 'each bar sounds as its probability after the stage');
  const expected = pitches(values);
  const close = (got, want) => got !== null && Math.abs(got - want) / want < 0.01;

  // S in the focused chart.
  await chart.focus();
  const played = await rendered(page, values.length, () => page.keyboard.press('s'));
  console.log(`tones: values ${values.map((v) => v.toFixed(4))} expected ${expected.map((f) => f.toFixed(1))} Hz measured ${played.map((f) => f?.toFixed(1))} Hz`);
  played.forEach((hz, k) => assert.ok(close(hz, expected[k]), `S: tone ${k} is ${hz} Hz, expected ${expected[k]}`));
  // The highest value is the highest tone, the removed token the lowest.
  const order = (xs) => xs.map((x, k) => [x, k]).sort((a, b) => a[0] - b[0]).map(([, k]) => k);
  assert.deepEqual(order(played), order(values), 'the tones rise and fall with the rows');

  // The Listen button plays the same.
  const listened = await rendered(page, values.length, () => walk.locator('.walk-listen').click());
  listened.forEach((hz, k) => assert.ok(close(hz, expected[k]), `Listen: tone ${k} is ${hz} Hz, expected ${expected[k]}`));

  // M: each move then sounds its own point, on the whole chart's scale.
  await chart.focus();
  assert.equal(await press(page, walk, 'm'), 'Each move now sounds its point.');
  const [moved] = await rendered(page, 1, () => page.keyboard.press('End'));
  assert.ok(close(moved, expected.at(-1)), `M: End sounds ${moved} Hz, expected ${expected.at(-1)}`);
  assert.equal(await press(page, walk, 'm'), 'Moves are silent again.');
  const [silent] = await rendered(page, 1, () => page.keyboard.press('Home'));
  assert.equal(silent, null, 'no tone once M is off');
  assert.deepEqual(errors, []);
  await context.close();
});

test('a stage of thirty tokens draws its 19 tallest bars and the rest as one, and lists every token under a disclosure', { timeout: RUN_TIMEOUT }, async () => {
  const context = await browser.newContext();
  const page = await context.newPage();
  await page.goto(`${url}?panel=step&logits=${MANY}&temperature=1&top_k=25&top_p=1&seed=7`);
  const stage = page.locator('figure.stage[data-stage="top-k"]');
  await stage.waitFor();
  const seen = await stage.evaluate((f) => ({
    bars: f.querySelectorAll('svg [data-point]').length,
    rows: [...f.querySelectorAll('[data-walk] tbody > tr')].map((tr) => tr.querySelector('th').textContent),
    rest: [...f.querySelectorAll('[data-walk] tbody > tr:last-child td')].map((td) => td.textContent),
    restProb: Number(f.querySelector('[data-walk] tbody > tr:last-child td:nth-of-type(2)').dataset.value),
    all: [...f.querySelectorAll('details.all-tokens tbody > tr')].map((tr) => Number(tr.querySelectorAll('td')[1].dataset.value)),
  }));
  // The tallest after top-k 25 are ids 11 to 29; the rest are ids 0 to 10 (0 to 4 removed).
  assert.deepEqual(seen.rows, [...Array.from({ length: 19 }, (_, i) => String(11 + i)), 'The other 11 tokens']);
  assert.equal(seen.bars, 20);
  assert.deepEqual(seen.rest.slice(0, 1).concat(seen.rest.slice(2, 3)), ['—', '6 kept, 5 removed']);
  assert.equal(seen.all.length, 30, 'the whole vocabulary, one row each');
  const byHand = seen.all.slice(0, 11).reduce((a, b) => a + b, 0);
  assert.ok(Math.abs(seen.restProb - byHand) < 1e-12, `the rest holds ${seen.restProb}, its tokens ${byHand}`);
  await context.close();
});

// The lab's dark and light themes in Debian's headless Chromium. For every panel, three ways:
// theme=dark on a system that prefers light, theme=light on a system that prefers dark, and
// no theme key (auto) on a system that prefers dark. Each time: the page's data-theme is what
// the URL asked; the body's background is dark or light as it should be; axe-core finds no
// violation; every drawn chart mark (of any walkable chart, with its own and its ancestors'
// opacity applied) has at least 3:1 contrast against the page (its labels 4.5:1); and the
// focus ring has 3:1. The capacity panel is planned first, so its chart is
// there to check; the other panels are checked as they load (Generate and Your turn draw
// their charts only after a run, so their marks are not checked here).
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
const PANELS = ['step', 'generate', 'your-turn', 'kv-cache', 'memory', 'checkpoint', 'capacity'];
// The panels that draw a chart before anything is run (capacity once planned).
const CHARTED = ['step', 'kv-cache', 'memory', 'capacity'];
// A smaller device, so that the memory panel also draws bars over its budget.
const EXTRA = { memory: '&mem_dev=8' };
const PLAN_TIMEOUT = 60_000;

// Each mode: the URL's theme key, the system's preference, the data-theme expected, and
// whether the page should then be dark.
const MODES = [
  { key: '&theme=dark', colorScheme: 'light', dataTheme: 'dark', dark: true },
  { key: '&theme=light', colorScheme: 'dark', dataTheme: 'light', dark: false },
  { key: '', colorScheme: 'dark', dataTheme: 'auto', dark: true },
];

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

/** axe-core over the whole page (as panels.test.mjs runs it); fails listing every violation. */
async function assertAccessible(page, label) {
  await page.addScriptTag({ path: AXE });
  const violations = await page.evaluate(async () => {
    const result = await window.axe.run(document, { resultTypes: ['violations'] });
    return result.violations.map((v) => `${v.id} (${v.impact}): ${v.help}\n    ${v.nodes.map((n) => n.target.join(' ')).join('\n    ')}`);
  });
  assert.deepEqual(violations, [], `axe-core on ${label}:\n${violations.join('\n')}`);
}

/**
 * In the page: the body's background, its relative luminance, every visible chart mark and
 * label with its painted colour's WCAG contrast against that background, and the focused
 * element's outline (if any) with its contrast.
 */
function measure() {
  const parse = (css) => {
    const m = /^rgba?\(([^)]*)\)$/.exec(css.trim());
    if (!m) return null;
    const [r, g, b, a = 1] = m[1].split(/[\s,/]+/).filter(Boolean).map(Number);
    return { r, g, b, a };
  };
  const channel = (v) => {
    const s = v / 255;
    return s <= 0.04045 ? s / 12.92 : ((s + 0.055) / 1.055) ** 2.4;
  };
  const luminance = (c) => 0.2126 * channel(c.r) + 0.7152 * channel(c.g) + 0.0722 * channel(c.b);
  // A translucent colour as it shows over the background.
  const over = (c, bg) => ({ r: c.r * c.a + bg.r * (1 - c.a), g: c.g * c.a + bg.g * (1 - c.a), b: c.b * c.a + bg.b * (1 - c.a), a: 1 });
  const contrast = (c, bg) => {
    const [hi, lo] = [luminance(over(c, bg)), luminance(bg)].sort((x, y) => y - x);
    return (hi + 0.05) / (lo + 0.05);
  };
  const bodyCss = getComputedStyle(document.body).backgroundColor;
  const bg = parse(bodyCss);
  const marks = [];
  // Every walkable chart's marks, the page's and the workers' (class `chart` or not).
  for (const el of document.querySelectorAll(':is(.chart, [data-walk-chart]) :is(rect, path, line, circle, polyline, polygon, text)[class]')) {
    const style = getComputedStyle(el);
    // What the mark shows through: its own opacity and every ancestor's, with its paint's
    // `fill-opacity` or `stroke-opacity`.
    let opacity = 1;
    for (let at = el; at && at !== document.documentElement; at = at.parentElement) opacity *= Number(getComputedStyle(at).opacity);
    if (el.getClientRects().length === 0 || style.visibility !== 'visible' || opacity === 0) continue;
    const box = el.getBBox();
    const area = ['rect', 'circle'].includes(el.localName);
    if (area ? box.width <= 0 || box.height <= 0 : box.width + box.height <= 0) continue;
    // Lines paint their stroke; shapes their fill, or their stroke when unfilled.
    const stroked = ['line', 'polyline'].includes(el.localName) || style.fill === 'none';
    const paint = stroked ? style.stroke : style.fill;
    const painted = parse(paint);
    const own = Number(stroked ? style.strokeOpacity : style.fillOpacity);
    const colour = painted && { ...painted, a: painted.a * opacity * own };
    marks.push({
      what: `${el.localName}.${[...el.classList].join('.')}`,
      text: el.localName === 'text',
      paint,
      ratio: colour && bg ? contrast(colour, bg) : 0,
    });
  }
  let focus = null;
  const active = document.activeElement;
  if (active && active !== document.body && active.matches(':focus-visible')) {
    const style = getComputedStyle(active);
    const colour = parse(style.outlineColor);
    focus = {
      what: active.outerHTML.slice(0, 80),
      style: style.outlineStyle,
      width: parseFloat(style.outlineWidth),
      ratio: colour && bg ? contrast(colour, bg) : 0,
    };
  }
  return { bodyCss, alpha: bg?.a ?? 0, luminance: bg ? luminance(bg) : NaN, marks, focus };
}

for (const mode of MODES) {
  const name = mode.key ? mode.key.slice(1) : 'no theme key';
  test(`${name} on a system that prefers ${mode.colorScheme}: every panel is ${mode.dark ? 'dark' : 'light'}, passes axe-core, and its chart marks and focus ring have 3:1`, async () => {
    const context = await browser.newContext({ colorScheme: mode.colorScheme });
    const page = await context.newPage();
    const errors = [];
    page.on('pageerror', (e) => errors.push(String(e)));
    for (const slug of PANELS) {
      const label = `${slug} (${name}, system ${mode.colorScheme})`;
      await page.goto(`${url}?panel=${slug}${EXTRA[slug] ?? ''}${mode.key}`);
      await page.locator('main section.panel h2').first().waitFor();
      await page.waitForFunction((want) => document.documentElement.dataset.theme === want, mode.dataTheme, { timeout: 5_000 })
        .catch(() => {});
      assert.equal(await page.evaluate(() => document.documentElement.dataset.theme), mode.dataTheme, `${label}: data-theme`);
      // The decoding step's charts come from the model worker's answer.
      if (slug === 'step') await page.locator('figure.stage').first().waitFor();
      if (slug === 'capacity') {
        await page.getByRole('button', { name: 'Plan', exact: true }).click();
        await page.locator('.cap-decision').waitFor({ timeout: PLAN_TIMEOUT });
        await page.locator('.cap-sweep svg.chart').waitFor();
      }

      const seen = await page.evaluate(measure);
      assert.equal(seen.alpha, 1, `${label}: the body's background is ${seen.bodyCss}, not opaque`);
      if (mode.dark) {
        assert.ok(seen.luminance < 0.1, `${label}: the body's background ${seen.bodyCss} is not dark (luminance ${seen.luminance.toFixed(3)})`);
      } else {
        assert.ok(seen.luminance > 0.5, `${label}: the body's background ${seen.bodyCss} is not light (luminance ${seen.luminance.toFixed(3)})`);
      }
      const shapes = seen.marks.filter((m) => !m.text);
      if (CHARTED.includes(slug)) assert.ok(shapes.length > 0, `${label}: no chart marks drawn`);
      const faint = seen.marks.filter((m) => m.ratio < (m.text ? 4.5 : 3))
        .map((m) => `${m.what} ${m.paint} ${m.ratio.toFixed(2)}:1`);
      assert.deepEqual([...new Set(faint)], [], `${label}: chart marks below 3:1 (labels 4.5:1) against ${seen.bodyCss}`);

      await assertAccessible(page, label);

      // The first Tab reaches the skip link; its focus ring is drawn on the page.
      await page.keyboard.press('Tab');
      const { focus } = await page.evaluate(measure);
      assert.ok(focus, `${label}: nothing took the keyboard's focus`);
      assert.ok(focus.style !== 'none' && focus.width >= 2, `${label}: no focus ring on ${focus.what}`);
      assert.ok(focus.ratio >= 3, `${label}: the focus ring on ${focus.what} is ${focus.ratio.toFixed(2)}:1`);
    }
    assert.deepEqual(errors, []);
    await context.close();
  });
}

// The style sheet writes the dark palette twice (for theme=dark, and inside the media query
// for auto on a dark system); CSS cannot share one block between the two. Both must give
// every colour variable the same value.
test('theme=dark and auto on a dark system resolve every colour variable alike', async () => {
  const palette = async (colorScheme, key) => {
    const context = await browser.newContext({ colorScheme });
    const page = await context.newPage();
    await page.goto(`${url}?panel=step${key}`);
    await page.locator('main section.panel h2').first().waitFor();
    const values = await page.evaluate(() => {
      const names = [...document.styleSheets].flatMap((sheet) => [...sheet.cssRules])
        .filter((rule) => rule.selectorText === ':root')
        .flatMap((rule) => [...rule.style].filter((p) => p.startsWith('--')));
      const style = getComputedStyle(document.documentElement);
      return Object.fromEntries(names.map((n) => [n, style.getPropertyValue(n).trim()]));
    });
    await context.close();
    return values;
  };
  const dark = await palette('light', '&theme=dark');
  const auto = await palette('dark', '');
  assert.ok(Object.keys(dark).length >= 20, `only ${Object.keys(dark).length} colour variables found`);
  assert.deepEqual(auto, dark);
  assert.notDeepEqual(dark, await palette('light', ''), 'the light palette is not the dark one');
});

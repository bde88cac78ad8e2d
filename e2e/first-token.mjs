// Cold and warm first token and decode speed per backend in headless Chromium with WebGPU
// (SwiftShader), side by side for builds of the lab. Each round opens each build in a new
// browser context per backend: the cold figure is navigation start to the first token on
// the page. The page then generates again until a run began after the GPU's start had
// finished (at once for `cpu`), and once more: the warm figures are that run's time to first
// token and decode tokens per second, from its record. Medians over ROUNDS. Not a test: a
// benchmark to run by hand, for BENCHMARKS.md.
//
//   node e2e/first-token.mjs DIST_A [DIST_B ...]   (env: CHROMIUM, ROUNDS, TOKENS, BACKENDS)
import { chromium } from 'playwright-core';
import { serve, BASE_ARGS } from './serve.mjs';

const CHROMIUM = process.env.CHROMIUM ?? '/usr/bin/chromium';
const ROUNDS = Number(process.env.ROUNDS ?? 5);
const TOKENS = Number(process.env.TOKENS ?? 64);
const BACKENDS = (process.env.BACKENDS ?? 'cpu gpu auto').split(' ').filter(Boolean);
const dists = process.argv.slice(2);
if (dists.length === 0) throw new Error('usage: node e2e/first-token.mjs DIST_A [DIST_B ...]');

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};
const decodeTokS = (record) => {
  const decode = record.token_latencies_us.slice(1);
  return decode.length / (decode.reduce((a, b) => a + b, 0) / 1e6);
};
/** A run that began after the GPU's start had finished (or a build without segments). */
const settled = (r) => !r.backend.segments || r.backend.segments[0].backend === 'webgpu'
  || r.degraded_reason || r.backend.auto;

async function record(page) {
  return JSON.parse(await page.getByTestId('run-record').textContent());
}

async function again(page) {
  const last = await page.getByTestId('run-record').textContent();
  await page.getByRole('button', { name: 'Generate', exact: true }).click();
  await page.waitForFunction((l) => document.querySelector('#generate')?.dataset.state === 'done'
    && document.querySelector('[data-testid=run-record]')?.textContent !== l, last, { timeout: 180_000 });
  return record(page);
}

const servers = await Promise.all(dists.map((d) => serve(d)));
const browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: [...BASE_ARGS, '--enable-unsafe-webgpu'] });
const samples = dists.map(() => Object.fromEntries(BACKENDS.map((b) => [b, { cold: [], warm: [], tokS: [], on: new Set(), phases: [] }])));
for (let round = 0; round < ROUNDS; round++) {
  for (const [i, { url }] of servers.entries()) {
    for (const backend of BACKENDS) {
      const context = await browser.newContext();
      const page = await context.newPage();
      await page.goto(`${url}?panel=generate&backend=${backend}&prompt=The%20model&max=${TOKENS}&temperature=0&top_k=0&run=1`);
      await page.waitForFunction(() => document.querySelector('#generate')?.dataset.state === 'done', null, { timeout: 180_000 });
      const s = samples[i][backend];
      s.cold.push(Number(await page.getByTestId('timings').getAttribute('data-first-token-ms')));
      let r = await record(page);
      while (!settled(r)) {
        await page.waitForTimeout(250);
        r = await again(page);
      }
      r = await again(page);
      const phases = await page.getByTestId('timings').getAttribute('data-gpu-start-ms');
      if (phases) s.phases.push(phases.split(' ').map(Number));
      s.warm.push(r.ttft_us / 1e3);
      s.tokS.push(decodeTokS(r));
      s.on.add(r.backend.name);
      await context.close();
    }
  }
}
await browser.close();
for (const { server } of servers) server.close();
for (const [i, dist] of dists.entries()) {
  for (const backend of BACKENDS) {
    const s = samples[i][backend];
    console.log(`${dist} backend=${backend} cold_first_token_ms=${median(s.cold).toFixed(0)} warm_ttft_ms=${median(s.warm).toFixed(1)} `
      + `warm_decode_tok_s=${median(s.tokS).toFixed(0)} warm_runs_on=${[...s.on].join('+')} (${ROUNDS} rounds)`
      + (s.phases.length ? ` gpu_start_ms: device=${median(s.phases.map((p) => p[0])).toFixed(0)}`
        + ` weights_and_pipelines=${median(s.phases.map((p) => p[1])).toFixed(0)} canary=${median(s.phases.map((p) => p[2])).toFixed(0)}` : ''));
  }
}

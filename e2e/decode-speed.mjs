// The model worker's decode speed in headless Chromium, side by side for two builds of the
// lab: each build generates the same greedy run on the CPU reference a few times, in
// alternation, and the medians of each step's model time, policy time and whole-token
// latency (from the run records) are printed. Not a test: a benchmark to run by hand.
//
//   node e2e/decode-speed.mjs DIST_A [DIST_B ...]   (env: CHROMIUM, ROUNDS, TOKENS)
import { chromium } from 'playwright-core';
import { serve, BASE_ARGS } from './serve.mjs';

const CHROMIUM = process.env.CHROMIUM ?? '/usr/bin/chromium';
const ROUNDS = Number(process.env.ROUNDS ?? 5);
const TOKENS = Number(process.env.TOKENS ?? 128);
const dists = process.argv.slice(2);
if (dists.length === 0) throw new Error('usage: node e2e/decode-speed.mjs DIST_A [DIST_B ...]');

const mean = (xs) => xs.reduce((a, b) => a + b, 0) / xs.length;
const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};

const servers = await Promise.all(dists.map((d) => serve(d)));
const extra = (process.env.CHROMIUM_ARGS ?? '').split(' ').filter(Boolean);
const browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: [...BASE_ARGS, '--disable-gpu', ...extra] });
const samples = dists.map(() => ({ model: [], policy: [], token: [] }));
for (let round = 0; round < ROUNDS; round++) {
  for (const [i, { url }] of servers.entries()) {
    const context = await browser.newContext();
    const page = await context.newPage();
    // A stop token the model never makes here would be a different run; greedy, no stops.
    await page.goto(`${url}?panel=generate&backend=cpu&prompt=The%20model&temperature=0&max=${TOKENS}&run=1`);
    await page.waitForFunction(() => ['done', 'failed'].includes(document.querySelector('#generate')?.dataset.state),
      null, { timeout: 300_000 });
    const record = JSON.parse(await page.getByTestId('run-record').textContent());
    // Decode steps only: step 0 is the prefill.
    const steps = record.steps.slice(1);
    samples[i].model.push(...steps.map((s) => s.model_us));
    samples[i].policy.push(...steps.map((s) => s.policy_us));
    samples[i].token.push(...record.token_latencies_us.slice(1));
    await context.close();
  }
}
for (const [i, dist] of dists.entries()) {
  const s = samples[i];
  // A worker's clock ticks in 100 µs steps without cross-origin isolation: the means carry
  // the resolution the medians lack.
  console.log(`BENCH decode-speed ${dist} steps=${s.model.length}`
    + ` model_us median=${median(s.model).toFixed(0)} mean=${mean(s.model).toFixed(1)}`
    + ` policy_us median=${median(s.policy).toFixed(0)} mean=${mean(s.policy).toFixed(1)}`
    + ` token_us median=${median(s.token).toFixed(0)} mean=${mean(s.token).toFixed(1)}`);
}
await browser.close();
for (const { server } of servers) server.close();

// Times the CPU reference forward pass compiled to wasm32-unknown-unknown (no imports, no
// glue), side by side for each .wasm given (default: the release build of the example), in
// Node or, with --chromium, in a page of Debian's headless Chromium (through e2e/'s
// playwright-core): one cold run of 255 decode steps, then the median of 7 prefills of 16, 64
// and 256 tokens and of 7 runs of 255 decode steps; twice, alternating. See
// crates/model/examples/wasm_speed.rs for the build commands.
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { dirname, join } from 'node:path';

const root = join(dirname(fileURLToPath(import.meta.url)), '../..');
const target = process.env.CARGO_TARGET_DIR ?? join(root, 'target');
const args = process.argv.slice(2);
const inChromium = args.includes('--chromium');
const files = args.filter((a) => a !== '--chromium');
if (files.length === 0) files.push(join(target, 'wasm32-unknown-unknown/release/examples/wasm_speed.wasm'));

/** Runs in Node or in the page: instantiates the module and times it. */
async function measure(bytes) {
  const { instance } = await WebAssembly.instantiate(bytes, {});
  const { load, prefill, decode } = instance.exports;
  if (load() !== 1) throw new Error('the built-in model did not load');
  const steps = 255;
  const time = (run) => {
    const start = performance.now();
    run();
    return performance.now() - start;
  };
  const median = (run) => Array.from({ length: 7 }, () => time(run)).sort((a, b) => a - b)[3];
  const figures = [`cold_decode_us_per_step=${(time(() => decode(steps)) * 1000 / steps).toFixed(1)}`];
  for (const n of [16, 64, 256]) figures.push(`prefill_${n}_ms=${median(() => prefill(n)).toFixed(3)}`);
  figures.push(`decode_us_per_step=${(median(() => decode(steps)) * 1000 / steps).toFixed(1)}`);
  figures.push(`last_token=${decode(steps)}`);
  return figures.join(' ');
}

let browser;
let where = `node ${process.version}`;
if (inChromium) {
  const { chromium } = await import(join(root, 'e2e/node_modules/playwright-core/index.mjs'));
  browser = await chromium.launch({ executablePath: process.env.CHROMIUM ?? '/usr/bin/chromium', headless: true, args: ['--no-sandbox'] });
  where = `chromium ${browser.version()}`;
}
for (let round = 1; round <= 2; round++) {
  for (const file of files) {
    const bytes = readFileSync(file);
    let figures;
    if (browser) {
      const page = await browser.newPage();
      figures = await page.evaluate(async ([b64, source]) => {
        const run = (0, eval)(`(${source})`);
        return run(Uint8Array.from(atob(b64), (c) => c.charCodeAt(0)));
      }, [bytes.toString('base64'), measure.toString()]);
      await page.close();
    } else {
      figures = await measure(bytes);
    }
    console.log(`BENCH wasm model ${file} round ${round}: ${figures} (${where})`);
  }
}
await browser?.close();

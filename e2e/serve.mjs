// A static file server for Trunk's output (DIST_DIR), shared by the browser tests.
import { createServer } from 'node:http';
import { readFile } from 'node:fs/promises';
import { extname, join, normalize } from 'node:path';

const TYPES = {
  '.html': 'text/html',
  '.js': 'text/javascript',
  '.wasm': 'application/wasm',
  '.css': 'text/css',
  '.json': 'application/json',
};

/** Serves `dist` on a free port of 127.0.0.1; resolves to `{ server, url }`. */
export async function serve(dist) {
  const server = createServer(async (req, res) => {
    const path = normalize(decodeURIComponent(new URL(req.url, 'http://x').pathname)).replace(/^(\.\.[/\\])+/, '');
    const file = join(dist, path === '/' ? 'index.html' : path);
    try {
      const body = await readFile(file);
      res.writeHead(200, { 'content-type': TYPES[extname(file)] ?? 'application/octet-stream' });
      res.end(body);
    } catch {
      res.writeHead(404).end('not found');
    }
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { server, url: `http://127.0.0.1:${server.address().port}/` };
}

/** Chromium flags for a closed network, run as root. */
export const BASE_ARGS = ['--no-sandbox', '--disable-background-networking', '--disable-component-update',
  '--disable-sync', '--no-first-run', '--disable-quic'];

/**
 * Presses Generate on `page` (a finished run on the Generate panel) until a run began after
 * the GPU's start had finished: on the GPU from its first step, fallen back, or with `auto`'s
 * decision. A run that asks for the GPU starts on the CPU while the GPU's canary runs beside
 * it (SwiftShader takes seconds), so a test of the GPU path waits for it this way. Resolves
 * to that run's record.
 */
export async function afterGpuStart(page, timeoutMs = 120_000) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const text = await page.getByTestId('run-record').textContent();
    const record = JSON.parse(text);
    if (record.backend.segments?.[0]?.backend === 'webgpu' || record.degraded_reason || record.backend.auto) return record;
    if (Date.now() > deadline) throw new Error(`no run reached the GPU in ${timeoutMs} ms: ${JSON.stringify(record.backend)}`);
    await page.waitForTimeout(250);
    await page.getByRole('button', { name: 'Generate', exact: true }).click();
    // A new record: its timings differ from the last one's.
    await page.waitForFunction((last) => document.querySelector('#generate')?.dataset.state === 'done'
      && document.querySelector('[data-testid=run-record]')?.textContent !== last, text, { timeout: timeoutMs });
  }
}

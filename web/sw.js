// The lab's service worker: after a first visit, the lab loads and runs with the network
// off. Installing it caches the page, every same-origin asset the page names (Trunk's hashed
// wasm, JS and CSS) and the model's files; afterwards the page itself is fetched network
// first (a new build shows as soon as it is reachable) and everything else cache first.
// Nothing is ever requested from another origin.
const CACHE = 'decode-lab-v1';
const MODEL_FILES = ['config.json', 'tokenizer.json', 'model.f32.safetensors', 'model.int8.safetensors']
  .map((f) => `models/decode-lab-tiny-v1/${f}`);
// The model worker's files: Trunk does not hash a worker's names, and the page does not name them.
const WORKER_FILES = ['worker_loader.js', 'worker.js', 'worker_bg.wasm'];
// The capacity planner's worker, likewise: cached at install, so Plan works offline.
const PLANNER_FILES = ['planner_loader.js', 'planner.js', 'planner_bg.wasm'];
// The observation worker and what it reads (the language identifier, the alternatives and
// the demo telemetry): cached at install, so the Observe panel works offline.
// The importer of other engines' policies, likewise.
const IMPORTER_FILES = ['importer_loader.js', 'importer.js', 'importer_bg.wasm'];
const OBSERVER_FILES = ['observer_loader.js', 'observer.js', 'observer_bg.wasm',
  ...['langid.bin', 'alternatives.json', 'demo/traffic.json', 'demo/runs.jsonl.gz', 'demo/outcomes.jsonl.gz']
    .map((f) => `models/decode-lab-tiny-v1/${f}`)];

const scope = () => new URL(self.registration.scope);
const sameOrigin = (url) => new URL(url).origin === self.location.origin;

self.addEventListener('install', (event) => {
  event.waitUntil((async () => {
    const cache = await caches.open(CACHE);
    const page = await fetch(scope(), { cache: 'no-cache' });
    const html = await page.clone().text();
    await cache.put(scope(), page);
    const named = [...html.matchAll(/(?:href|src)="([^"#]+)"/g)]
      .map((m) => new URL(m[1], scope()).href)
      .filter((u) => sameOrigin(u) && !u.startsWith('data:'));
    const files = [...MODEL_FILES, ...WORKER_FILES, ...PLANNER_FILES, ...IMPORTER_FILES, ...OBSERVER_FILES].map((f) => new URL(f, scope()).href);
    await cache.addAll([...new Set([...named, ...files])]);
    await self.skipWaiting();
  })());
});

self.addEventListener('activate', (event) => {
  event.waitUntil((async () => {
    for (const key of await caches.keys()) {
      if (key !== CACHE) await caches.delete(key);
    }
    await self.clients.claim();
  })());
});

self.addEventListener('fetch', (event) => {
  const { request } = event;
  if (request.method !== 'GET' || !sameOrigin(request.url)) return;
  event.respondWith((async () => {
    const cache = await caches.open(CACHE);
    if (request.mode === 'navigate') {
      try {
        const fresh = await fetch(request);
        if (fresh.ok) await cache.put(scope(), fresh.clone());
        return fresh;
      } catch {
        return (await cache.match(scope())) ?? Response.error();
      }
    }
    const cached = await cache.match(request);
    if (cached) return cached;
    const fresh = await fetch(request);
    if (fresh.ok) await cache.put(request, fresh.clone());
    return fresh;
  })());
});

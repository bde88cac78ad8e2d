// Times the capacity simulator compiled to wasm32-unknown-unknown (no imports, no glue):
// the median of 5 simulations of 100,000 and of 1,000,000 requests, on one replica and on 8
// behind kv-aware routing. See
// crates/capacity/examples/wasm_speed.rs for the build command.
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { dirname, join } from "node:path";

const root = join(dirname(fileURLToPath(import.meta.url)), "../..");
const target = process.env.CARGO_TARGET_DIR ?? join(root, "target");
const wasm = readFileSync(
  join(target, "wasm32-unknown-unknown/release/examples/wasm_speed.wasm"),
);
const { instance } = await WebAssembly.instantiate(wasm, {});
const { prepare, simulate_prepared } = instance.exports;

for (const [n, replicas] of [[100_000, 1], [1_000_000, 1], [100_000, 8], [1_000_000, 8]]) {
  if (prepare(n, replicas) !== n) throw new Error(`prepare(${n}, ${replicas}) failed`);
  const times = [];
  let iterations = 0;
  for (let i = 0; i < 5; i++) {
    const start = performance.now();
    iterations = simulate_prepared();
    times.push(performance.now() - start);
  }
  times.sort((a, b) => a - b);
  console.log(
    `BENCH wasm capacity simulate ${n} requests on ${replicas} replica(s): median ${(times[2] / 1000).toFixed(3)} s ` +
      `(min ${(times[0] / 1000).toFixed(3)} s, ${iterations} iterations, node ${process.version})`,
  );
}

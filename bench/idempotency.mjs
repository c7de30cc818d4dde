#!/usr/bin/env node
/**
 * What an Idempotency-Key costs a put (issue 33, item 5): the same put with and without a
 * key (a fresh one per request), at --clients concurrent clients for --seconds each, against
 * a running gateway. Prints throughput and latency of both and their ratio.
 *
 *   node bench/idempotency.mjs --url http://127.0.0.1:8080 --token <api key> \
 *     --class <class> --field <soft field> [--clients 64] [--seconds 10]
 *
 * The field should be soft (last write wins), so every put applies whatever the others did.
 */
import { randomUUID } from 'node:crypto';
import { parseArgs } from 'node:util';

const { values: o } = parseArgs({
  options: {
    url: { type: 'string' },
    token: { type: 'string' },
    class: { type: 'string' },
    field: { type: 'string' },
    clients: { type: 'string', default: '64' },
    seconds: { type: 'string', default: '10' },
  },
});
for (const k of ['url', 'token', 'class', 'field']) if (!o[k]) throw new Error(`--${k} is required`);
const clients = Number(o.clients);
const ms = Number(o.seconds) * 1000;

async function phase(withKey) {
  const lat = [];
  let errors = 0;
  const end = Date.now() + ms;
  const run = randomUUID().slice(0, 8);
  await Promise.all(
    Array.from({ length: clients }, async (_, c) => {
      const rid = `bench-${run}-${c}`;
      while (Date.now() < end) {
        const headers = { authorization: `Bearer ${o.token}`, 'content-type': 'application/json' };
        if (withKey) headers['idempotency-key'] = randomUUID();
        const t0 = performance.now();
        const res = await fetch(`${o.url}/v1/records/${o.class}/${rid}/fields/${o.field}`, {
          method: 'PUT',
          headers,
          body: JSON.stringify({ value: lat.length, expected_version: 0 }),
        });
        await res.arrayBuffer();
        if (res.status >= 300) errors++;
        else lat.push(performance.now() - t0);
      }
    }),
  );
  lat.sort((a, b) => a - b);
  const q = (p) => lat[Math.min(lat.length - 1, Math.floor(p * lat.length))] ?? NaN;
  return { puts_per_s: lat.length / (ms / 1000), p50_ms: q(0.5), p99_ms: q(0.99), errors };
}

const without = await phase(false);
const withKey = await phase(true);
console.log(
  JSON.stringify(
    {
      clients,
      seconds: ms / 1000,
      without_key: without,
      with_key: withKey,
      throughput_ratio: withKey.puts_per_s / without.puts_per_s,
      p50_ratio: withKey.p50_ms / without.p50_ms,
    },
    null,
    2,
  ),
);

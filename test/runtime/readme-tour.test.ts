/**
 * The README's tour, run as a reader pastes it (bash and curl against a gateway with the
 * example classes and keys): every call prints its status code, each `# -> NNN` comment is the
 * status that call gets (the others succeed), and the history holds the refusals the README
 * says it holds and not the ones it says it does not.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { ROOT } from '../setup/build.js';
import { children, cleanEnv, ensureBuilt, runProgram, start, stop } from '../setup/cli.js';
import { freshDatabase, type TestDb } from '../setup/db.js';
import { freePort } from '../setup/ports.js';

let d: TestDb;
let base: string;
beforeAll(async () => {
  await ensureBuilt();
  d = await freshDatabase();
  const port = await freePort();
  base = `http://127.0.0.1:${port}`;
  await start(
    ['serve', '--database-url', d.url, '--identity', 'apikey', '--apikeys', 'examples/apikeys.yaml', '--classes', 'examples/classes', '--listen', `127.0.0.1:${port}`, '--metrics-port', '0'],
    cleanEnv(),
  );
}, 180_000);
afterAll(async () => {
  await Promise.all([...children].map((c) => stop(c).catch(() => undefined)));
  await d?.drop();
});

/** The sh blocks of the tour and the hand-over, as one script. */
function tourScript(): string {
  const readme = readFileSync(join(ROOT, 'README.md'), 'utf8');
  const tour = readme.slice(readme.indexOf('## A two-minute tour'), readme.indexOf('### Watch changes as they happen'));
  return [...tour.matchAll(/```sh\n([\s\S]*?)```/g)].map((m) => m[1]).join('\n');
}

/** Each `call` of the script with the status its `# -> NNN` comment gives (none: a success). */
function expectedStatuses(script: string): (number | null)[] {
  const lines = script.split('\n');
  const out: (number | null)[] = [];
  for (let i = 0; i < lines.length; i++) {
    if (!lines[i].startsWith('call ')) continue;
    let j = i;
    while (lines[j].trimEnd().endsWith('\\') || /'[^']*$/.test(lines.slice(i, j + 1).join('\n').replace(/'[^']*'/g, ''))) j++;
    const comment = /^# -> (\d{3})\b/.exec(lines[j + 1] ?? '');
    out.push(comment ? Number(comment[1]) : null);
  }
  return out;
}

test('the tour prints a status code after every body, each as the README says, and history keeps only the outcomes it names', async () => {
  const script = tourScript();
  expect(script).toContain("call() { curl -s -w '\\n%{http_code}\\n' \"$@\"; }");
  expect(script).toContain('K=http://127.0.0.1:8080');
  const expected = expectedStatuses(script);
  expect(expected.length).toBeGreaterThan(15);
  expect(expected.filter((s) => s !== null)).toEqual([201, 409, 200, 409, 403, 200, 409, 422, 200, 200]);

  const r = await runProgram('bash', ['-c', script.replace('K=http://127.0.0.1:8080', `K=${base}`)]);
  expect(r.code, r.stderr).toBe(0);
  // Body, newline, status: the status is a line of its own, and every call printed one.
  const lines = r.stdout.split('\n');
  const statuses = lines.filter((l) => /^\d{3}$/.test(l)).map(Number);
  expect(statuses.length, r.stdout).toBe(expected.length);
  expected.forEach((want, i) => {
    if (want === null) expect(statuses[i], `call ${i + 1}\n${r.stdout}`).toBeLessThan(300);
    else expect(statuses[i], `call ${i + 1}\n${r.stdout}`).toBe(want);
  });

  // The last call is the history: bob's SCOPE_DENIED is a row, alice's INVALID_CHECKPOINT is not.
  const history = JSON.parse(lines[lines.length - 3]) as { history: { field: string; outcome: string }[] };
  expect(history.history.filter((h) => h.field === 'status').map((h) => h.outcome)).toEqual(['applied', 'scope_denied', 'applied']);
  // The refused transaction's other write is a not_applied row (issue 33).
  expect(new Set(history.history.map((h) => h.outcome))).toEqual(new Set(['applied', 'stale', 'scope_denied', 'held', 'not_applied']));
}, 120_000);

/**
 * examples/langgraph as its README runs it, against a gateway with examples/classes/langgraph.yaml:
 * one process interrupts the graph, another resumes it; two processes racing on one thread end
 * with one step written and one ThreadConflictError. Also: the shipped class file and the
 * example's are the same classes, only the role subjects differ.
 */
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { promisify } from 'node:util';
import { parseAllDocuments } from 'yaml';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { ROOT } from '../setup/build.js';
import { KEYS, startTestGateway, type TestGateway } from '../setup/gateway.js';
import { langgraphClasses } from './classes.js';

const run = promisify(execFile);
let t: TestGateway;
beforeAll(async () => {
  t = await startTestGateway(langgraphClasses());
});
afterAll(async () => {
  await t?.close();
});

const env = () => ({ ...process.env, KSLATE_URL: t.url, KSLATE_TOKEN: KEYS.alice, KSLATE_PREFIX: 'example' });
const node = (args: string[], extra: Record<string, string> = {}) => run(process.execPath, args, { cwd: ROOT, env: { ...env(), ...extra } });

test('interrupted by one process, resumed by another', async () => {
  const a = JSON.parse((await node(['examples/langgraph/graph.mjs', 'start', 'ticket-1'])).stdout);
  expect(a.interrupted_before).toEqual(['act']);
  expect(a.steps).toHaveLength(1);
  const b = JSON.parse((await node(['examples/langgraph/graph.mjs', 'resume', 'ticket-1'], { KSLATE_TOKEN: KEYS.bob })).stdout);
  expect(b.done).toBe(true);
  expect(b.steps[0]).toBe(a.steps[0]);
  expect(b.steps[1]).toMatch(/^act \(pid \d+\)$/);
}, 60_000);

test('two processes racing on one thread: one step written, one refused', async () => {
  await node(['examples/langgraph/graph.mjs', 'start', 'race-1']);
  const { stdout } = await node(['examples/langgraph/race.mjs', 'race-1']);
  expect(stdout).toMatch(/exited 0: \{"done":true/);
  expect(stdout).toMatch(/exited 3: \{"refused":"ThreadConflictError"/);
}, 60_000);

test('examples/classes/langgraph.yaml is the shipped classes with the development keys', () => {
  const load = (p: string) => parseAllDocuments(readFileSync(new URL(`../../${p}`, import.meta.url), 'utf8')).map((d) => d.toJS());
  const shipped = load('integrations/langgraph/classes/langgraph.yaml');
  const example = load('examples/classes/langgraph.yaml');
  expect(example.map((c) => c.spec.roles.graph.subjects)).toEqual([
    ['apikey:alice', 'apikey:bob', 'apikey:carol'],
    ['apikey:alice', 'apikey:bob', 'apikey:carol'],
  ]);
  const strip = (cs: any[]) => cs.map((c) => ({ ...c, spec: { ...c.spec, roles: { graph: { ...c.spec.roles.graph, subjects: [] } } } }));
  expect(strip(example)).toEqual(strip(shipped));
  expect(langgraphClasses().map((c) => c.name)).toEqual(['langgraph-checkpoints', 'langgraph-store']);
});

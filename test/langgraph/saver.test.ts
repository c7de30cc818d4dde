/**
 * KslateSaver beyond the conformance suite: a real two-node graph interrupted by one worker
 * and resumed by another (separate clients, as separate processes would be), and two workers
 * resuming one thread at once: one writes the next step, the other gets ThreadConflictError
 * and the thread does not fork.
 */
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { Annotation, END, START, StateGraph } from '@langchain/langgraph';
import { emptyCheckpoint, uuid6 } from '@langchain/langgraph-checkpoint';
import { kslate } from '@kslate/client';
import { KslateSaver, ThreadConflictError } from '@kslate/langgraph';
import { KEYS, startTestGateway, type TestGateway } from '../setup/gateway.js';
import { langgraphClasses } from './classes.js';

let t: TestGateway;
beforeAll(async () => {
  t = await startTestGateway(langgraphClasses());
});
afterAll(async () => {
  await t?.close();
});

const State = Annotation.Root({ steps: Annotation<string[]>({ reducer: (a, b) => a.concat(b), default: () => [] }) });

function graph(saver: KslateSaver, inB?: () => Promise<void>) {
  return new StateGraph(State)
    .addNode('plan', async () => ({ steps: ['plan'] }))
    .addNode('act', async () => {
      await inB?.();
      return { steps: ['act'] };
    })
    .addEdge(START, 'plan')
    .addEdge('plan', 'act')
    .addEdge('act', END)
    .compile({ checkpointer: saver, interruptBefore: ['act'] });
}

test('a graph interrupted by one worker is resumed by another', async () => {
  const prefix = randomUUID();
  const config = { configurable: { thread_id: 'ticket-1' } };
  const first = graph(new KslateSaver({ url: t.url, token: KEYS.alice, prefix }));
  expect((await first.invoke({ steps: [] }, config)).steps).toEqual(['plan']);
  expect((await first.getState(config)).next).toEqual(['act']);

  // Another worker (its own client, identity and saver) picks the thread up.
  const second = graph(new KslateSaver({ client: kslate({ url: t.url, token: KEYS.bob }), prefix }));
  expect((await second.getState(config)).values).toEqual({ steps: ['plan'] });
  expect(await second.invoke(null, config)).toEqual({ steps: ['plan', 'act'] });
  const history = [];
  for await (const s of second.getStateHistory(config)) history.push(s.values.steps);
  expect(history[0]).toEqual(['plan', 'act']);
  expect(history.length).toBeGreaterThanOrEqual(3);
});

test('two workers resuming one thread: one writes the next step, the other gets ThreadConflictError', async () => {
  const prefix = randomUUID();
  const config = { configurable: { thread_id: 'ticket-2' } };
  await graph(new KslateSaver({ url: t.url, token: KEYS.alice, prefix })).invoke({ steps: [] }, config);
  // Both workers are inside `act` before either writes: both resumed from the same checkpoint.
  let arrived = 0;
  let release!: () => void;
  const both = new Promise<void>((r) => (release = r));
  const barrier = async () => {
    if (++arrived === 2) release();
    await both;
  };
  const a = graph(new KslateSaver({ url: t.url, token: KEYS.alice, prefix }), barrier).invoke(null, config);
  const b = graph(new KslateSaver({ url: t.url, token: KEYS.bob, prefix }), barrier).invoke(null, config);
  const results = await Promise.allSettled([a, b]);
  const ok = results.filter((r) => r.status === 'fulfilled');
  const refused = results.filter((r): r is PromiseRejectedResult => r.status === 'rejected');
  expect(ok).toHaveLength(1);
  expect(refused).toHaveLength(1);
  expect(refused[0].reason).toBeInstanceOf(ThreadConflictError);
  expect(String(refused[0].reason.message)).toMatch(/has moved on/);
  // One line of history: plan, act once.
  const saver = new KslateSaver({ url: t.url, token: KEYS.alice, prefix });
  const state = await graph(saver).getState(config);
  expect(state.values).toEqual({ steps: ['plan', 'act'] });
  // The refused step is in the audit trail: a STALE attempt on the thread's head by the loser.
  const rows = await saver.threadHistory('ticket-2');
  const stale = rows.filter((r) => r.outcome === 'stale');
  expect(stale).toHaveLength(1);
  const winner = rows.find((r) => r.outcome === 'applied')!.author;
  expect(refused[0].reason.currentAuthor).toBe(winner);
  expect(stale[0].author).not.toBe(winner);
});

test('puts racing from one parent: exactly one moves the head; the audit history shows both writers', async () => {
  const prefix = randomUUID();
  const thread = 'race-3';
  const mk = (token: string) => new KslateSaver({ url: t.url, token, prefix });
  const root = await mk(KEYS.alice).put({ configurable: { thread_id: thread } }, { ...emptyCheckpoint(), id: uuid6(3) }, { source: 'input', step: -1, parents: {} }, {});
  const workers = [KEYS.alice, KEYS.bob, KEYS.alice, KEYS.bob].map(mk);
  const results = await Promise.allSettled(
    workers.map((s) => s.put(root, { ...emptyCheckpoint(), id: uuid6(3) }, { source: 'loop', step: 0, parents: {} }, {})),
  );
  expect(results.filter((r) => r.status === 'fulfilled')).toHaveLength(1);
  for (const r of results) if (r.status === 'rejected') expect(r.reason).toBeInstanceOf(ThreadConflictError);
  const latest = await mk(KEYS.alice).getTuple({ configurable: { thread_id: thread } });
  expect(latest?.parentConfig?.configurable?.checkpoint_id).toBe(root.configurable?.checkpoint_id);
  const listed = [];
  for await (const x of mk(KEYS.bob).list({ configurable: { thread_id: thread } })) listed.push(x.checkpoint.id);
  expect(listed).toHaveLength(2);
});

test('deleteThread hides the thread; a new run on it starts empty', async () => {
  const prefix = randomUUID();
  const saver = new KslateSaver({ url: t.url, token: KEYS.alice, prefix });
  const config = { configurable: { thread_id: 'gone-1' } };
  await graph(saver).invoke({ steps: [] }, config);
  expect(await saver.getTuple(config)).toBeDefined();
  await saver.deleteThread('gone-1');
  expect(await saver.getTuple(config)).toBeUndefined();
  expect((await graph(saver).invoke({ steps: [] }, config)).steps).toEqual(['plan']);
});

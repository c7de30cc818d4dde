/** A gateway with gRPC for a fuzz file, seeded with a few records so reads find something. */
import { incident } from '../fixtures/classes.js';
import { startTestGateway, type TestGateway } from '../setup/gateway.js';
import { freePort } from '../setup/ports.js';

export async function fuzzGateway(): Promise<TestGateway> {
  const t = await startTestGateway([incident], { extraArgs: ['--grpc-port', String(await freePort())] });
  for (let i = 1; i <= 12; i += 2) {
    await t.call('alice', 'PUT', `/v1/records/incident/fz-${i}/fields/title`, { value: `t${i}`, expected_version: 0 });
    await t.call('alice', 'POST', `/v1/records/incident/fz-${i}/fields/notes/entries`, { entry: { n: i }, evidence: 'seed' });
  }
  return t;
}

/** Mostly alice (responder), sometimes bob (reviewer: SCOPE_DENIED paths), rarely a bad key (401). */
export function whoFor(index: number): string {
  if (index % 97 === 0) return 'not-a-key';
  return index % 5 === 0 ? 'bob' : 'alice';
}

/** A tally of answers by code, for the closing figures. */
export function tally(): { add(code: string): void; toString(): string } {
  const counts = new Map<string, number>();
  return {
    add: (code) => void counts.set(code, (counts.get(code) ?? 0) + 1),
    toString: () => [...counts].sort((a, b) => b[1] - a[1]).map(([k, v]) => `${k}=${v}`).join(' '),
  };
}

/**
 * LangGraph's own checkpointer conformance suite (@langchain/langgraph-checkpoint-validation
 * 1.1, its exported test function: the CLI of 1.1.1 does not start) against KslateSaver on a
 * real gateway. The suite's files call vitest's globals, so they are set before it loads.
 */
import { randomUUID } from 'node:crypto';
import * as vitest from 'vitest';
import { KslateSaver } from '@kslate/langgraph';
import { KEYS, startTestGateway, type TestGateway } from '../setup/gateway.js';
import { langgraphClasses } from './classes.js';

const { describe, it, test, expect, beforeAll, afterAll, beforeEach, afterEach } = vitest;
Object.assign(globalThis, { describe, it, test, expect, beforeAll, afterAll, beforeEach, afterEach });
const { validate } = await import('@langchain/langgraph-checkpoint-validation');

let t: TestGateway;

validate<KslateSaver>({
  checkpointerName: '@kslate/langgraph',
  beforeAllTimeout: 60_000,
  async beforeAll() {
    t = await startTestGateway(langgraphClasses());
  },
  async afterAll() {
    await t?.close();
  },
  // Every checkpointer its own prefix: a fresh, empty space in the shared class.
  createCheckpointer: () => new KslateSaver({ url: t.url, token: KEYS.alice, prefix: randomUUID() }),
});

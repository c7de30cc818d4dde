// A two-node LangGraph graph (plan -> act) checkpointed in kslate, interrupted before `act`.
//
//   node examples/langgraph/graph.mjs start  ticket-1   # runs `plan`, stops before `act`
//   node examples/langgraph/graph.mjs resume ticket-1   # another process: runs `act`
//
// KSLATE_URL (default http://127.0.0.1:8080, what `npm start` serves) and KSLATE_TOKEN
// (default alice-dev-key, a key of examples/apikeys.yaml) say where and who. With
// WAIT_FOR_GO=1, `act` prints "in act" and waits for a line on stdin (race.mjs uses it to
// hold two workers inside the same step).
import { createInterface } from 'node:readline';
import { Annotation, END, START, StateGraph } from '@langchain/langgraph';
import { kslate } from '@kslate/client';
import { KslateSaver, ThreadConflictError } from '@kslate/langgraph';

const [cmd, thread = 'ticket-1'] = process.argv.slice(2);
const client = kslate({ url: process.env.KSLATE_URL ?? 'http://127.0.0.1:8080', token: process.env.KSLATE_TOKEN ?? 'alice-dev-key' });
const checkpointer = new KslateSaver({ client, prefix: process.env.KSLATE_PREFIX });

const goLine = () => new Promise((resolve) => createInterface({ input: process.stdin }).once('line', resolve));

const State = Annotation.Root({ steps: Annotation({ reducer: (a, b) => a.concat(b), default: () => [] }) });
const graph = new StateGraph(State)
  .addNode('plan', async () => ({ steps: [`plan (pid ${process.pid})`] }))
  .addNode('act', async () => {
    if (process.env.WAIT_FOR_GO === '1') {
      console.log('in act');
      await goLine();
    }
    return { steps: [`act (pid ${process.pid})`] };
  })
  .addEdge(START, 'plan')
  .addEdge('plan', 'act')
  .addEdge('act', END)
  .compile({ checkpointer, interruptBefore: ['act'] });

const config = { configurable: { thread_id: thread } };
try {
  if (cmd === 'start') {
    const out = await graph.invoke({ steps: [] }, config);
    const state = await graph.getState(config);
    console.log(JSON.stringify({ interrupted_before: state.next, steps: out.steps }));
  } else if (cmd === 'resume') {
    const out = await graph.invoke(null, config);
    console.log(JSON.stringify({ done: true, steps: out.steps }));
  } else {
    console.error('usage: graph.mjs start|resume THREAD');
    process.exit(2);
  }
} catch (e) {
  if (e instanceof ThreadConflictError) {
    console.log(JSON.stringify({ refused: e.name, message: e.message }));
    process.exit(3);
  }
  throw e;
}
process.exit(0);

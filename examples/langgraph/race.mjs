// Two processes resume the same interrupted thread at once. Both are held inside `act` (so
// both resumed from the same checkpoint) and then let go together: one writes the next step,
// the other's write is refused with ThreadConflictError, and the thread does not fork.
//
//   node examples/langgraph/graph.mjs start race-1
//   node examples/langgraph/race.mjs race-1
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const thread = process.argv[2] ?? 'race-1';
const script = fileURLToPath(new URL('graph.mjs', import.meta.url));

function worker() {
  const child = spawn(process.execPath, [script, 'resume', thread], { env: { ...process.env, WAIT_FOR_GO: '1' }, stdio: ['pipe', 'pipe', 'inherit'] });
  let out = '';
  const inAct = new Promise((resolve) =>
    child.stdout.on('data', (b) => {
      out += b;
      if (out.includes('in act')) resolve();
    }),
  );
  const done = new Promise((resolve) => child.on('exit', (code) => resolve({ pid: child.pid, code, out: out.replace('in act\n', '').trim() })));
  return { child, inAct, done };
}

const a = worker();
const b = worker();
await Promise.all([a.inAct, b.inAct]);
a.child.stdin.end('go\n');
b.child.stdin.end('go\n');
const results = await Promise.all([a.done, b.done]);
for (const r of results) console.log(`worker ${r.pid} exited ${r.code}: ${r.out}`);
const codes = results.map((r) => r.code).sort();
process.exit(codes[0] === 0 && codes[1] === 3 ? 0 : 1);

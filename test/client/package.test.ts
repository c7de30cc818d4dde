/**
 * The packages as users get them: a consumer file touching every method of @kslate/client
 * type-checks with `tsc --noEmit` and no Node types; `npm pack` of @kslate/client and
 * @kslate/langgraph gives tarballs that install into an empty project, whose code then
 * writes through both against a real gateway. (Packed with --ignore-scripts: prepack would
 * rebuild dist/ while other test files import it; `npm ci` built it already.)
 */
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { ROOT } from '../setup/build.js';
import { KEYS, startTestGateway, type TestGateway } from '../setup/gateway.js';
import { langgraphClasses } from '../langgraph/classes.js';

const run = promisify(execFile);

let t: TestGateway;
let dir: string;
beforeAll(async () => {
  t = await startTestGateway(langgraphClasses(['apikey:alice']));
  dir = mkdtempSync(join(tmpdir(), 'kslate-pack-'));
});
afterAll(async () => {
  await t?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

test('a consumer using every method type-checks (tsc --noEmit, no Node types)', async () => {
  const tsc = join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc');
  const r = await run(process.execPath, [tsc, '-p', join(ROOT, 'test/client/consumer/tsconfig.json')], { cwd: ROOT }).catch((e) => e);
  expect(`${r.stdout ?? ''}${r.stderr ?? ''}`).toBe('');
}, 120_000);

test('npm pack of both packages installs into an empty project and works', async () => {
  const pack = async (ws: string) => {
    const { stdout } = await run('npm', ['pack', '--silent', '--ignore-scripts', '--pack-destination', dir, '-w', ws], { cwd: ROOT });
    return join(dir, stdout.trim().split('\n').pop()!);
  };
  const client = await pack('@kslate/client');
  const langgraph = await pack('@kslate/langgraph');
  const proj = join(dir, 'app');
  const lock = JSON.parse(readFileSync(join(ROOT, 'package-lock.json'), 'utf8')).packages;
  const v = (name: string) => lock[`node_modules/${name}`].version as string;
  await run('mkdir', ['-p', proj]);
  writeFileSync(join(proj, 'package.json'), JSON.stringify({ name: 'app', private: true, type: 'module' }));
  await run(
    'npm',
    ['install', '--no-audit', '--no-fund', '--prefer-offline', client, langgraph, `@langchain/core@${v('@langchain/core')}`, `@langchain/langgraph-checkpoint@${v('@langchain/langgraph-checkpoint')}`],
    { cwd: proj },
  );
  writeFileSync(
    join(proj, 'main.js'),
    `import { kslate } from '@kslate/client';
     import { KslateStore } from '@kslate/langgraph';
     const [url, token] = process.argv.slice(2);
     const store = new KslateStore({ client: kslate({ url, token }), prefix: 'packed' });
     await store.put(['notes'], 'n1', { text: 'from a packed tarball' });
     console.log(JSON.stringify((await store.get(['notes'], 'n1')).value));`,
  );
  const { stdout } = await run(process.execPath, ['main.js', t.url, KEYS.alice], { cwd: proj });
  expect(JSON.parse(stdout)).toEqual({ text: 'from a packed tarball' });
  const files = (await run('tar', ['-tzf', client])).stdout.split('\n');
  expect(files).toEqual(expect.arrayContaining(['package/dist/index.js', 'package/dist/index.d.ts', 'package/README.md']));
}, 300_000);

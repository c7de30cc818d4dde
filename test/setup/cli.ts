/**
 * Running the compiled CLI (bin/kslate.js -> dist/) as a user does: real child processes,
 * their output collected, every child stopped when the file ends.
 */
import { spawn, type ChildProcess, type SpawnOptions } from 'node:child_process';
import { mkdirSync, rmSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { distIsFresh, ROOT } from './build.js';

export const BIN = join(ROOT, 'bin', 'kslate.js');
export const TSC = join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc');

/** The environment without any KSLATE_* variable, so only what a test sets counts. */
export function cleanEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) if (!k.startsWith('KSLATE_')) env[k] = v;
  return { ...env, ...extra };
}

export interface Run {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

export const children = new Set<ChildProcess>();

export function run(file: string, args: string[], env: NodeJS.ProcessEnv = cleanEnv(), timeoutMs = 30_000): Promise<Run> {
  return new Promise((resolvePromise, reject) => {
    const child = spawn(process.execPath, [file, ...args], { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] });
    children.add(child);
    let stdout = '';
    let stderr = '';
    child.stdout!.on('data', (d) => (stdout += d));
    child.stderr!.on('data', (d) => (stderr += d));
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`${args.join(' ')} did not exit within ${timeoutMs} ms\nstdout: ${stdout}\nstderr: ${stderr}`));
    }, timeoutMs);
    child.once('error', reject);
    // 'close' comes after 'exit' once the pipes are drained, so the output is complete.
    child.once('close', (code, signal) => {
      clearTimeout(timer);
      children.delete(child);
      resolvePromise({ code, signal, stdout, stderr });
    });
  });
}

export const kslate = (args: string[], env?: NodeJS.ProcessEnv, timeoutMs?: number) => run(BIN, args, env, timeoutMs);

/** Another program (npm, bash) in the repository, as a user runs it: its exit code and output. */
export function runProgram(command: string, args: string[], env: NodeJS.ProcessEnv = cleanEnv()): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolvePromise, reject) => {
    const child = spawn(command, args, { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] });
    children.add(child);
    let stdout = '';
    let stderr = '';
    child.stdout!.on('data', (d) => (stdout += d));
    child.stderr!.on('data', (d) => (stderr += d));
    child.once('error', reject);
    child.once('close', (code) => {
      children.delete(child);
      resolvePromise({ code, stdout, stderr });
    });
  });
}

export interface Served {
  child: ChildProcess;
  stdout: () => string;
  stderr: () => string;
  /** Resolves with the exit code and signal once the process has exited and its pipes are drained. */
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

/**
 * Start a long-running command (`serve`, `dev`) and wait until its output matches `ready`.
 * `detached` puts it in a process group of its own, so a test can signal the whole group as
 * a terminal's Ctrl-C does.
 */
export function start(
  args: string[],
  env: NodeJS.ProcessEnv,
  opts: { ready?: RegExp; timeoutMs?: number; detached?: boolean } = {},
): Promise<Served> {
  const ready = opts.ready ?? /listening/;
  const timeoutMs = opts.timeoutMs ?? 40_000;
  return new Promise((resolvePromise, reject) => {
    const spawnOpts: SpawnOptions = { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe'], detached: opts.detached ?? false };
    const child = spawn(process.execPath, [BIN, ...args], spawnOpts);
    children.add(child);
    let stdout = '';
    let stderr = '';
    let isReady = false;
    const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((r) =>
      child.once('close', (code, signal) => {
        children.delete(child);
        r({ code, signal });
      }),
    );
    const served: Served = { child, stdout: () => stdout, stderr: () => stderr, exited };
    const timer = setTimeout(
      () => reject(new Error(`${args[0]} did not print ${ready} within ${timeoutMs} ms\nstdout: ${stdout}\nstderr: ${stderr}`)),
      timeoutMs,
    );
    child.stdout!.on('data', (d) => {
      stdout += d;
      if (!isReady && ready.test(stdout)) {
        isReady = true;
        clearTimeout(timer);
        resolvePromise(served);
      }
    });
    child.stderr!.on('data', (d) => (stderr += d));
    child.once('error', reject);
    void exited.then(({ code }) => {
      clearTimeout(timer);
      if (!isReady) reject(new Error(`${args[0]} exited with ${code} before it was ready\nstdout: ${stdout}\nstderr: ${stderr}`));
    });
  });
}

/** SIGTERM, then SIGKILL after 5 s; resolves once the child has exited. */
export async function stop(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((r) => child.once('exit', () => r()));
  child.kill('SIGTERM');
  const t = setTimeout(() => child.kill('SIGKILL'), 5_000);
  await exited;
  clearTimeout(t);
  children.delete(child);
}

export async function getJson(
  url: string,
  headers: Record<string, string> = {},
  init: RequestInit = {},
): Promise<{ status: number; body: any; headers: Headers }> {
  const res = await fetch(url, { ...init, headers });
  const text = await res.text();
  let body: unknown = text;
  try {
    body = JSON.parse(text);
  } catch {
    /* keep text */
  }
  return { status: res.status, body, headers: res.headers };
}

/** The JSON log lines of a process's stdout (other lines skipped). */
export function logLines(stdout: string): { level: string; msg: string; [k: string]: unknown }[] {
  return stdout
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => {
      try {
        return JSON.parse(l);
      } catch {
        return null;
      }
    })
    .filter((x) => x !== null);
}

/** Build dist/ (what bin/kslate.js runs) unless it is already newer than every source; throws with tsc's output when the build fails. */
export async function ensureBuilt(): Promise<void> {
  if (distIsFresh()) return;
  // One build at a time across test files (cli, watch fan-out): two tsc runs writing dist/
  // together on a 2-core machine starve every other test. A lock directory, taken over
  // when older than the build's own bound.
  const lock = join(ROOT, '.build-lock');
  for (;;) {
    try {
      mkdirSync(lock);
      break;
    } catch {
      try {
        if (Date.now() - statSync(lock).mtimeMs > 150_000) rmSync(lock, { recursive: true, force: true });
      } catch {
        /* released meanwhile */
      }
      await new Promise((r) => setTimeout(r, 500));
      if (distIsFresh()) return;
    }
  }
  try {
    if (distIsFresh()) return;
    // -b as `npm run build` does: it keeps dist/'s tsbuildinfo, by which npm start skips an up-to-date build.
    const build = await run(TSC, ['-b', join(ROOT, 'tsconfig.build.json')], cleanEnv(), 120_000);
    if (build.code !== 0) throw new Error(`build failed:\n${build.stdout}\n${build.stderr}`);
  } finally {
    rmSync(lock, { recursive: true, force: true });
  }
}

import { createHash } from 'node:crypto';
import { mkdirSync, mkdtempSync, renameSync, rmSync, symlinkSync, unlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';

// Pass-through spy, to count comparisons without changing them.
vi.mock('node:crypto', async (importOriginal) => {
  const real = await importOriginal<typeof import('node:crypto')>();
  return { ...real, timingSafeEqual: vi.fn(real.timingSafeEqual) };
});

const crypto = await import('node:crypto');
const { ApiKeyProvider } = await import('../../runtime/identity/apikey.js');

const ALICE_KEY = 'alice-key-5b1e0c9d';
const BOB_KEY = 'dev-bob-secret-a8f2';
const CAROL_KEY = 'carol-key-77c4e1aa';
const ALL_KEYS = [ALICE_KEY, BOB_KEY, CAROL_KEY];

const sha = (s: string) => createHash('sha256').update(s).digest('hex');

type Line = { level: 'warn' | 'info' | 'error'; msg: string };

function recorder() {
  const lines: Line[] = [];
  return {
    lines,
    warn: (msg: string) => lines.push({ level: 'warn', msg }),
    info: (msg: string) => lines.push({ level: 'info', msg }),
    error: (msg: string) => lines.push({ level: 'error', msg }),
    of: (level: Line['level']) => lines.filter((l) => l.level === level).map((l) => l.msg),
  };
}

let dir: string;
let file: string;
let log: ReturnType<typeof recorder>;
const open: { close(): void }[] = [];

async function openProvider(path = file) {
  const p = await ApiKeyProvider.open(path, log);
  open.push(p);
  return p;
}

function expectNoKeyLogged() {
  for (const { msg } of log.lines) for (const k of ALL_KEYS) expect(msg).not.toContain(k);
}

const settle = (ms = 300) => new Promise((r) => setTimeout(r, ms));
const waitFor = (fn: () => unknown) => vi.waitFor(fn, { timeout: 3000, interval: 20 });

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'kslate-apikey-'));
  file = join(dir, 'apikeys.yaml');
  log = recorder();
});

afterEach(() => {
  for (const p of open.splice(0)) p.close();
  rmSync(dir, { recursive: true, force: true });
  vi.mocked(crypto.timingSafeEqual).mockClear();
});

describe('ApiKeyProvider: authentication', () => {
  it('accepts a key listed by sha256', async () => {
    writeFileSync(file, `keys:\n  - name: alice\n    sha256: ${sha(ALICE_KEY)}\n`);
    const p = await openProvider();
    expect(p.kind).toBe('apikey');
    await expect(p.authenticate(ALICE_KEY)).resolves.toEqual({
      author: 'apikey:alice',
      provider: 'apikey',
      name: 'alice',
      strength: 'shared-secret',
    });
  });

  it('accepts a sha256 written in upper case', async () => {
    writeFileSync(file, `keys:\n  - name: alice\n    sha256: ${sha(ALICE_KEY).toUpperCase()}\n`);
    const p = await openProvider();
    expect((await p.authenticate(ALICE_KEY))?.name).toBe('alice');
  });

  it('accepts a plaintext key and warns naming only the entry', async () => {
    writeFileSync(
      file,
      `keys:\n  - name: alice\n    sha256: ${sha(ALICE_KEY)}\n  - name: dev-bob\n    key: ${BOB_KEY}\n`,
    );
    const p = await openProvider();
    expect(await p.authenticate(BOB_KEY)).toEqual({
      author: 'apikey:dev-bob',
      provider: 'apikey',
      name: 'dev-bob',
      strength: 'shared-secret',
    });
    const warnings = log.of('warn');
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toContain('"dev-bob"');
    expect(warnings[0]).toContain(file);
    expect(warnings[0]).not.toContain('alice');
    expectNoKeyLogged();
  });

  it('does not warn for sha256 entries', async () => {
    writeFileSync(file, `keys:\n  - name: alice\n    sha256: ${sha(ALICE_KEY)}\n`);
    await openProvider();
    expect(log.of('warn')).toEqual([]);
  });

  it('answers null for a key it does not hold', async () => {
    writeFileSync(file, `keys:\n  - name: alice\n    sha256: ${sha(ALICE_KEY)}\n  - name: bob\n    key: ${BOB_KEY}\n`);
    const p = await openProvider();
    for (const t of [CAROL_KEY, '', sha(ALICE_KEY), ALICE_KEY.toUpperCase(), `${ALICE_KEY} `]) {
      expect(await p.authenticate(t), JSON.stringify(t)).toBeNull();
    }
  });

  it('finds the entry by digest and compares that one digest in constant time', async () => {
    writeFileSync(
      file,
      `keys:\n` +
        `  - name: alice\n    sha256: ${sha(ALICE_KEY)}\n` +
        `  - name: bob\n    key: ${BOB_KEY}\n` +
        `  - name: carol\n    sha256: ${sha(CAROL_KEY)}\n`,
    );
    const p = await openProvider();
    const spy = vi.mocked(crypto.timingSafeEqual);
    for (const [key, name] of [[ALICE_KEY, 'alice'], [BOB_KEY, 'bob'], [CAROL_KEY, 'carol']]) {
      spy.mockClear();
      expect((await p.authenticate(key))?.name).toBe(name);
      // One comparison whatever the number of keys (not one per entry), of the presented digest.
      expect(spy).toHaveBeenCalledTimes(1);
      expect(Buffer.from(spy.mock.calls[0][0] as Uint8Array).toString('hex')).toBe(sha(key));
      expect(Buffer.from(spy.mock.calls[0][1] as Uint8Array).toString('hex')).toBe(sha(key));
    }
    spy.mockClear();
    expect(await p.authenticate('nobody')).toBeNull();
    expect(spy).toHaveBeenCalledTimes(0);
  });

  it('matches among many keys, and a reload indexes the new list', async () => {
    const many = Array.from({ length: 500 }, (_, i) => `many-key-${i}-${'x'.repeat(i % 7)}`);
    writeFileSync(file, `keys:\n${many.map((k, i) => `  - name: k${i}\n    sha256: ${sha(k)}\n`).join('')}`);
    const p = await openProvider();
    for (const i of [0, 1, 250, 499]) expect((await p.authenticate(many[i]))?.name).toBe(`k${i}`);
    expect(await p.authenticate('many-key-500-')).toBeNull();
    // The same keys under other names: the old index must not answer.
    writeFileSync(file, `keys:\n${many.slice(0, 3).map((k, i) => `  - name: renamed${i}\n    sha256: ${sha(k)}\n`).join('')}`);
    await vi.waitFor(async () => expect((await p.authenticate(many[1]))?.name).toBe('renamed1'), { timeout: 5000 });
    expect(await p.authenticate(many[250])).toBeNull();
  });

  it('keeps a token that matched (no digest again), never one that did not, and forgets them on reload', async () => {
    writeFileSync(file, `keys:\n  - name: alice\n    sha256: ${sha(ALICE_KEY)}\n  - name: bob\n    key: ${BOB_KEY}\n`);
    const p = await openProvider();
    const spy = vi.mocked(crypto.timingSafeEqual);
    expect((await p.authenticate(ALICE_KEY))?.name).toBe('alice');
    spy.mockClear();
    for (let i = 0; i < 3; i++) expect((await p.authenticate(ALICE_KEY))?.name).toBe('alice');
    expect(spy).toHaveBeenCalledTimes(0);
    // A token that did not match is judged afresh every time: nothing was kept for it.
    for (let i = 0; i < 2; i++) expect(await p.authenticate(`${ALICE_KEY}x`)).toBeNull();
    expect(await p.authenticate(sha(BOB_KEY))).toBeNull();
    // A reload that removes alice: her kept token stops working at once.
    writeFileSync(file, `keys:\n  - name: bob\n    key: ${BOB_KEY}\n`);
    await vi.waitFor(async () => expect(await p.authenticate(ALICE_KEY)).toBeNull(), { timeout: 5000 });
    spy.mockClear();
    expect((await p.authenticate(BOB_KEY))?.name).toBe('bob');
    expect(spy).toHaveBeenCalledTimes(1);
  });

  it('accepts an empty key list, warning that nothing is accepted', async () => {
    writeFileSync(file, 'keys: []\n');
    const p = await openProvider();
    expect(await p.authenticate(ALICE_KEY)).toBeNull();
    expect(log.of('warn').join('\n')).toMatch(/lists no keys/);
  });
});

describe('ApiKeyProvider: invalid file at open', () => {
  async function openError(content: string | null): Promise<string> {
    if (content !== null) writeFileSync(file, content);
    const e = await ApiKeyProvider.open(file, log).then(
      (p) => {
        p.close();
        return undefined;
      },
      (err: unknown) => err,
    );
    expect(e).toBeInstanceOf(Error);
    const msg = (e as Error).message;
    expect(msg).toContain(file);
    expect(msg).toMatch(/keys: \[/); // says what the format is
    for (const k of ALL_KEYS) expect(msg).not.toContain(k);
    expect(msg).not.toContain(sha(ALICE_KEY));
    return msg;
  }

  it('names the path when the file is missing', async () => {
    expect(await openError(null)).toMatch(/does not exist/);
  });

  it('rejects a directory', async () => {
    file = join(dir, 'sub');
    mkdirSync(file);
    expect(await openError(null)).toMatch(/directory/);
  });

  it('rejects duplicate names', async () => {
    const msg = await openError(
      `keys:\n  - name: alice\n    sha256: ${sha(ALICE_KEY)}\n  - name: alice\n    key: ${BOB_KEY}\n`,
    );
    expect(msg).toMatch(/keys\[1\].*"alice".*duplicate name.*keys\[0\]/);
  });

  it('rejects two names sharing one key', async () => {
    const msg = await openError(
      `keys:\n  - name: alice\n    sha256: ${sha(ALICE_KEY)}\n  - name: eve\n    key: ${ALICE_KEY}\n`,
    );
    expect(msg).toMatch(/"eve".*same key as name "alice"/);
  });

  it('rejects a sha256 that is not 64 hex characters, without quoting it', async () => {
    // A plaintext key pasted into sha256 must not end up in the message.
    expect(await openError(`keys:\n  - name: alice\n    sha256: ${ALICE_KEY}\n`)).toMatch(/64 hexadecimal/);
    expect(await openError(`keys:\n  - name: alice\n    sha256: ${sha(ALICE_KEY).slice(1)}\n`)).toMatch(
      /64 hexadecimal/,
    );
    expect(await openError(`keys:\n  - name: alice\n    sha256: ${sha(ALICE_KEY).slice(1)}z\n`)).toMatch(
      /64 hexadecimal/,
    );
  });

  it('requires exactly one of sha256 or key', async () => {
    expect(
      await openError(`keys:\n  - name: alice\n    sha256: ${sha(ALICE_KEY)}\n    key: ${ALICE_KEY}\n`),
    ).toMatch(/"alice".*exactly one of "sha256" or "key"/);
    expect(await openError(`keys:\n  - name: alice\n`)).toMatch(/exactly one of "sha256" or "key"/);
  });

  it('requires a non-empty string name', async () => {
    expect(await openError(`keys:\n  - name: ""\n    key: ${ALICE_KEY}\n`)).toMatch(/keys\[0\].*"name"/);
    expect(await openError(`keys:\n  - sha256: ${sha(ALICE_KEY)}\n`)).toMatch(/keys\[0\].*"name"/);
    expect(await openError(`keys:\n  - name: 42\n    key: ${ALICE_KEY}\n`)).toMatch(/keys\[0\].*"name"/);
  });

  it('requires a non-empty string key', async () => {
    expect(await openError(`keys:\n  - name: alice\n    key: ""\n`)).toMatch(/"key" must be/);
    expect(await openError(`keys:\n  - name: alice\n    key: 12345\n`)).toMatch(/"key" must be/);
  });

  it('rejects a file without a keys list', async () => {
    expect(await openError('')).toMatch(/empty/);
    expect(await openError('- a\n- b\n')).toMatch(/top level/);
    expect(await openError('users: []\n')).toMatch(/"keys" is missing/);
    expect(await openError('keys: alice\n')).toMatch(/"keys" is missing or not a list/);
    expect(await openError('keys:\n  - alice\n')).toMatch(/keys\[0\] must be a mapping/);
  });

  it('reports a YAML syntax error by position without quoting the file', async () => {
    const msg = await openError(`keys:\n  - name: alice\n    key: "${ALICE_KEY}\n  - name: [bob\n`);
    expect(msg).toMatch(/not valid YAML at line \d+, column \d+/);
  });

  it('reports a duplicate mapping key as invalid YAML', async () => {
    const msg = await openError(`keys:\n  - name: alice\n    name: bob\n    key: ${ALICE_KEY}\n`);
    expect(msg).toMatch(/DUPLICATE_KEY/);
  });

  it('logs nothing containing a key while failing', async () => {
    await openError(`keys:\n  - name: alice\n    key: ${ALICE_KEY}\n  - name: alice\n    key: ${BOB_KEY}\n`);
    expectNoKeyLogged();
  });
});

describe('ApiKeyProvider: reload', () => {
  const aliceOnly = `keys:\n  - name: alice\n    sha256: ${sha(ALICE_KEY)}\n`;
  const bobOnly = `keys:\n  - name: bob\n    key: ${BOB_KEY}\n`;

  it('reloads when the file is rewritten in place', async () => {
    writeFileSync(file, aliceOnly);
    const p = await openProvider();
    writeFileSync(file, bobOnly);
    await waitFor(async () => expect((await p.authenticate(BOB_KEY))?.name).toBe('bob'));
    expect(await p.authenticate(ALICE_KEY)).toBeNull();
    expect(log.of('info').some((m) => m.includes('reloaded 1 key'))).toBe(true);
    // The plaintext warning comes with the load that introduced it.
    expect(log.of('warn').some((m) => m.includes('"bob"'))).toBe(true);
    expectNoKeyLogged();
  });

  it('reloads when an editor replaces the file by rename', async () => {
    writeFileSync(file, aliceOnly);
    const p = await openProvider();
    const tmp = join(dir, '.apikeys.yaml.swp');
    writeFileSync(tmp, bobOnly);
    renameSync(tmp, file);
    await waitFor(async () => expect((await p.authenticate(BOB_KEY))?.name).toBe('bob'));
    expect(await p.authenticate(ALICE_KEY)).toBeNull();

    // And keeps following the new file after the rename.
    writeFileSync(file, aliceOnly);
    await waitFor(async () => expect((await p.authenticate(ALICE_KEY))?.name).toBe('alice'));
  });

  it('reloads when a Kubernetes secret volume swaps its ..data symlink', async () => {
    mkdirSync(join(dir, '..v1'));
    writeFileSync(join(dir, '..v1', 'apikeys.yaml'), aliceOnly);
    symlinkSync('..v1', join(dir, '..data'));
    symlinkSync(join('..data', 'apikeys.yaml'), file);
    const p = await openProvider();
    expect((await p.authenticate(ALICE_KEY))?.name).toBe('alice');

    mkdirSync(join(dir, '..v2'));
    writeFileSync(join(dir, '..v2', 'apikeys.yaml'), bobOnly);
    symlinkSync('..v2', join(dir, '..data_tmp'));
    renameSync(join(dir, '..data_tmp'), join(dir, '..data'));
    rmSync(join(dir, '..v1'), { recursive: true });

    await waitFor(async () => expect((await p.authenticate(BOB_KEY))?.name).toBe('bob'));
    expect(await p.authenticate(ALICE_KEY)).toBeNull();
  });

  it('keeps the previous keys when a reload fails, says why and what to do', async () => {
    writeFileSync(file, aliceOnly);
    const p = await openProvider();
    writeFileSync(file, `keys:\n  - name: bob\n    key: ${BOB_KEY}\n  - name: bob\n    key: ${CAROL_KEY}\n`);
    await waitFor(() => expect(log.of('error')).toHaveLength(1));
    const err = log.of('error')[0]!;
    expect(err).toContain(file);
    expect(err).toMatch(/duplicate name/);
    expect(err).toMatch(/previous 1 key/);
    expect(err).toMatch(/Fix the file/);
    expect((await p.authenticate(ALICE_KEY))?.name).toBe('alice');
    expect(await p.authenticate(BOB_KEY)).toBeNull();
    expectNoKeyLogged();

    // A later good version is picked up.
    writeFileSync(file, bobOnly);
    await waitFor(async () => expect((await p.authenticate(BOB_KEY))?.name).toBe('bob'));
  });

  it('keeps the previous keys on a YAML error without logging the file contents', async () => {
    writeFileSync(file, aliceOnly);
    const p = await openProvider();
    writeFileSync(file, `keys:\n  - name: bob\n    key: "${BOB_KEY}\n  - [\n`);
    await waitFor(() => expect(log.of('error')).toHaveLength(1));
    expect(log.of('error')[0]).toMatch(/not valid YAML at line/);
    expect((await p.authenticate(ALICE_KEY))?.name).toBe('alice');
    expectNoKeyLogged();
  });

  it('keeps the previous keys while the file is missing, reporting it once', async () => {
    writeFileSync(file, aliceOnly);
    const p = await openProvider();
    unlinkSync(file);
    await waitFor(() => expect(log.of('error')).toHaveLength(1));
    expect(log.of('error')[0]).toMatch(/does not exist/);
    writeFileSync(join(dir, 'unrelated'), 'x');
    await settle();
    expect(log.of('error')).toHaveLength(1);
    expect((await p.authenticate(ALICE_KEY))?.name).toBe('alice');

    writeFileSync(file, bobOnly);
    await waitFor(async () => expect((await p.authenticate(BOB_KEY))?.name).toBe('bob'));
  });

  it('does not re-read the file for changes to other files in the directory', async () => {
    writeFileSync(file, aliceOnly);
    await openProvider();
    const infosBefore = log.of('info').length;
    writeFileSync(join(dir, 'other.txt'), 'x');
    writeFileSync(join(dir, 'other.txt'), 'xy');
    await settle();
    expect(log.of('info')).toHaveLength(infosBefore);
  });

  it('debounces a burst of writes into one reload', async () => {
    writeFileSync(file, aliceOnly);
    const p = await openProvider();
    for (let i = 0; i < 5; i++) writeFileSync(file, `keys:\n  - name: k${i}\n    sha256: ${sha(`k${i}`)}\n`);
    await waitFor(async () => expect((await p.authenticate('k4'))?.name).toBe('k4'));
    await settle();
    expect(log.of('info').filter((m) => m.includes('reloaded'))).toHaveLength(1);
  });

  it('waits for a write to finish instead of reading it half-written', async () => {
    writeFileSync(file, aliceOnly);
    const p = await openProvider();
    writeFileSync(file, 'keys:\n  - name: bob\n    ke');
    await settle(30);
    writeFileSync(file, bobOnly);
    await waitFor(async () => expect((await p.authenticate(BOB_KEY))?.name).toBe('bob'));
    expect(log.of('error')).toEqual([]);
  });

  it('stops watching after close', async () => {
    const watchers = () => process.getActiveResourcesInfo().filter((r) => r === 'FSEventWrap').length;
    await settle(50); // handles closed by earlier tests go away on a later tick
    const before = watchers();
    writeFileSync(file, aliceOnly);
    const p = await ApiKeyProvider.open(file, log);
    expect(watchers()).toBe(before + 1);
    p.close();
    await settle(50);
    expect(watchers()).toBe(before);
    writeFileSync(file, bobOnly);
    await settle();
    expect(await p.authenticate(BOB_KEY)).toBeNull();
    expect((await p.authenticate(ALICE_KEY))?.name).toBe('alice');
  });
});

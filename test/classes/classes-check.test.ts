import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { classesCheck } from '../../runtime/classes-check.js';

const created: string[] = [];
afterAll(() => Promise.all(created.map((d) => rm(d, { recursive: true, force: true }))));

async function dirWith(files: Record<string, string>): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'kslate-check-'));
  created.push(dir);
  for (const [name, text] of Object.entries(files)) await writeFile(join(dir, name), text);
  return dir;
}

const doc = (name: string, fields = '    title: { kind: versioned }\n') =>
  `apiVersion: kslate.dev/v1\nkind: SharedContext\nmetadata:\n  name: ${name}\nspec:\n  fields:\n${fields}`;

async function check(dir: string): Promise<{ code: number; lines: string[] }> {
  const lines: string[] = [];
  const code = await classesCheck(dir, (line) => lines.push(line));
  return { code, lines };
}

describe('classesCheck', () => {
  it('prints ok with the class names and exits 0', async () => {
    const dir = await dirWith({ 'a.yaml': `${doc('incident')}---\n${doc('handoff')}`, 'b.json': JSON.stringify({ apiVersion: 'kslate.dev/v1', kind: 'SharedContext', metadata: { name: 'ticket' }, spec: { fields: { t: { kind: 'soft' } } } }) });
    expect(await check(dir)).toEqual({ code: 0, lines: ['ok: 3 classes (incident, handoff, ticket)'] });
  });

  it('says "class" for one and lists nothing for none', async () => {
    expect(await check(await dirWith({ 'a.yaml': doc('incident') }))).toEqual({ code: 0, lines: ['ok: 1 class (incident)'] });
    expect(await check(await dirWith({}))).toEqual({ code: 0, lines: ['ok: 0 classes'] });
  });

  it('prints one line per problem and exits 1', async () => {
    const dir = await dirWith({
      'a.yaml': doc('incident', '    title: { kind: versioned, typ: string }\n    n: { kind: soft, leaseSeconds: 5 }\n'),
      'b.yaml': doc('fine'),
      'c.yaml': doc('fine'),
    });
    expect(await check(dir)).toEqual({
      code: 1,
      lines: [
        'a.yaml: spec.fields.title.typ: unknown key (allowed: kind, type, enum, requireEvidence, minIdentityStrength, leaseSeconds, durability)',
        'a.yaml: spec.fields.n.leaseSeconds: only allowed on task fields',
        'c.yaml: duplicate class name "fine" (first in b.yaml)',
      ],
    });
  });

  it('exits 1 for a missing directory', async () => {
    const { code, lines } = await check(join(tmpdir(), 'kslate-no-such-dir-', String(process.pid)));
    expect(code).toBe(1);
    expect(lines).toHaveLength(1);
    expect(lines[0]).toContain('cannot read the classes directory');
  });

  it('passes the shipped examples', async () => {
    const { code, lines } = await check(fileURLToPath(new URL('../../examples/classes', import.meta.url)));
    expect(lines).toEqual([expect.stringMatching(/^ok: \d+ class(es)? \(.*\bincident\b.*\)$/)]);
    expect(code).toBe(0);
  });
});

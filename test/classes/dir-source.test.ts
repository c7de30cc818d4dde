import { mkdir, mkdtemp, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { readClassDir } from '../../runtime/classes/dir.js';

const created: string[] = [];
afterAll(() => Promise.all(created.map((d) => rm(d, { recursive: true, force: true }))));

async function dirWith(files: Record<string, string>): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'kslate-classes-'));
  created.push(dir);
  for (const [name, text] of Object.entries(files)) {
    await mkdir(join(dir, name, '..'), { recursive: true });
    await writeFile(join(dir, name), text);
  }
  return dir;
}

function yamlClass(name: string, extra = ''): string {
  return `apiVersion: kslate.dev/v1
kind: SharedContext
metadata:
  name: ${name}
spec:
  fields:
    title: { kind: versioned, type: string }
${extra}`;
}

function jsonClass(name: string): string {
  return JSON.stringify({
    apiVersion: 'kslate.dev/v1',
    kind: 'SharedContext',
    metadata: { name, namespace: 'team-b' },
    spec: { fields: { note: { kind: 'append' } }, roles: { w: { subjects: ['apikey:w'], write: ['note'] } } },
  }, null, 2);
}

const names = (r: Awaited<ReturnType<typeof readClassDir>>) => r.manifests.map((m) => m.metadata.name);

describe('readClassDir', () => {
  it('reads yaml, yml and json files in name order, several documents per file, skipping empty ones', async () => {
    const dir = await dirWith({
      'b.yaml': `# two classes and some empty documents\n---\n${yamlClass('beta')}---\n# nothing here\n---\n${yamlClass('gamma')}---\n`,
      'a.json': jsonClass('alpha'),
      'c.yml': yamlClass('delta'),
      'empty.yaml': '# no documents at all\n',
      'blank.json': '\n',
      'notes.txt': 'not a class',
      'README.md': '# not a class',
    });
    const result = await readClassDir(dir);
    expect(result.problems).toEqual([]);
    expect(names(result)).toEqual(['alpha', 'beta', 'gamma', 'delta']);
    expect(result.manifests[0].metadata.namespace).toBe('team-b');
    expect(result.manifests[0].spec.roles.w).toEqual({ subjects: ['apikey:w'], read: [], write: ['note'] });
    expect(result.manifests[1].metadata.namespace).toBe('default');
  });

  it('resolves YAML anchors and merge keys, as kubectl does', async () => {
    const dir = await dirWith({
      'anchors.yaml': yamlClass('anchored', '    body: &text { kind: versioned, type: string }\n    other: *text\n    strict: { <<: *text, requireEvidence: true }\n'),
    });
    const result = await readClassDir(dir);
    expect(result.problems).toEqual([]);
    expect(result.manifests[0].spec.fields.strict).toEqual({ kind: 'versioned', type: 'string', requireEvidence: true });
    expect(result.manifests[0].spec.fields.other).toEqual({ kind: 'versioned', type: 'string' });
  });

  it('does not descend into subdirectories, even one named like a class file', async () => {
    const dir = await dirWith({ 'top.yaml': yamlClass('top'), 'sub/inner.yaml': yamlClass('inner'), 'odd.yaml/x.yaml': yamlClass('odd') });
    const result = await readClassDir(dir);
    expect(result).toEqual({
      manifests: [expect.objectContaining({ metadata: { name: 'top', namespace: 'default' } })],
      problems: [],
      duplicates: [],
    });
  });

  it('follows symlinked files, as a ConfigMap volume mounts them', async () => {
    const dir = await dirWith({ '..data/real.yaml': yamlClass('linked') });
    await symlink(join(dir, '..data', 'real.yaml'), join(dir, 'linked.yaml'));
    expect(names(await readClassDir(dir))).toEqual(['linked']);
  });

  it('prefixes problems with the file, and with #n when the file has several documents', async () => {
    const dir = await dirWith({
      'multi.yaml': `${yamlClass('good')}---\n${yamlClass('Bad')}`,
      'single.yaml': yamlClass('other', '  ttl: soon\n'),
    });
    const result = await readClassDir(dir);
    expect(result.problems).toEqual([
      'multi.yaml#2: metadata.name: must match ^[a-z][a-z0-9-]{0,62}$',
      'single.yaml: spec.ttl: must be a positive duration such as 90s, 15m, 72h or 1h30m',
    ]);
    expect(names(result)).toEqual(['good']);
  });

  it('reports a YAML syntax error with its file and line, and keeps the other documents', async () => {
    const dir = await dirWith({
      'broken.yaml': `${yamlClass('fine')}---\napiVersion: kslate.dev/v1\nkind: [SharedContext\nmetadata:\n  name: x\n`,
    });
    const result = await readClassDir(dir);
    expect(names(result)).toEqual(['fine']);
    expect(result.problems.length).toBeGreaterThan(0);
    expect(result.problems[0]).toMatch(/^broken\.yaml#2: YAML syntax error: .* at line 11, column 1$/);
  });

  it('reports duplicate keys in YAML as an error', async () => {
    const dir = await dirWith({ 'dup.yaml': `${yamlClass('x')}metadata:\n  name: y\n` });
    const result = await readClassDir(dir);
    expect(result.problems).toEqual([expect.stringMatching(/^dup\.yaml: YAML syntax error: Map keys must be unique at line 8, column 1$/)]);
    expect(result.manifests).toEqual([]);
  });

  it('reports a JSON syntax error with its line', async () => {
    const dir = await dirWith({ 'bad.json': '{\n  "apiVersion": "kslate.dev/v1",\n  "kind": "SharedContext",\n}\n' });
    const result = await readClassDir(dir);
    expect(result.manifests).toEqual([]);
    expect(result.problems).toEqual([expect.stringMatching(/^bad\.json: JSON syntax error: .* at line 4, column 1$/)]);
  });

  it('leaves out a second manifest of the same name and namespace and says where the first was', async () => {
    const dir = await dirWith({
      'a.yaml': yamlClass('incident'),
      'b.yaml': `${yamlClass('other')}---\n${yamlClass('incident')}`,
    });
    const result = await readClassDir(dir);
    expect(names(result)).toEqual(['incident', 'other']);
    expect(result.manifests[0].metadata.namespace).toBe('default');
    expect(result.problems).toEqual(['b.yaml#2: duplicate class name "incident" (first in a.yaml)']);
    expect(result.duplicates).toEqual([]);
  });

  it('keeps a same-name manifest from another namespace for the reconciler to refuse, and reports it', async () => {
    // Which namespace keeps the name is the reconciler's call (the holder), not file order's.
    const dir = await dirWith({ 'a.yaml': yamlClass('incident'), 'c.json': jsonClass('incident') });
    const result = await readClassDir(dir);
    expect(result.manifests.map((m) => `${m.metadata.namespace}/${m.metadata.name}`)).toEqual([
      'default/incident',
      'team-b/incident',
    ]);
    expect(result.problems).toEqual([]);
    expect(result.duplicates).toEqual([expect.stringMatching(/^c\.json: duplicate class name "incident" \(first in a\.yaml\)/)]);
  });

  it('reports a missing directory as one problem instead of throwing', async () => {
    const dir = join(await dirWith({}), 'does-not-exist');
    const result = await readClassDir(dir);
    expect(result.manifests).toEqual([]);
    expect(result.problems).toHaveLength(1);
    expect(result.problems[0]).toMatch(new RegExp(`^${dir.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}: cannot read the classes directory \\(ENOENT`));
  });

  it('reports a file given instead of a directory as one problem', async () => {
    const dir = await dirWith({ 'x.yaml': yamlClass('x') });
    const result = await readClassDir(join(dir, 'x.yaml'));
    expect(result.manifests).toEqual([]);
    expect(result.problems).toEqual([expect.stringContaining('ENOTDIR')]);
  });

  it('reads the examples directory without problems', async () => {
    const result = await readClassDir(fileURLToPath(new URL('../../examples/classes', import.meta.url)));
    expect(result.problems).toEqual([]);
    expect(names(result)).toContain('incident');
  });
});

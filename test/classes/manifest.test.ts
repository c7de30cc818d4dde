import { readFile } from 'node:fs/promises';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { parseDuration, parseManifest } from '../../handlers/class-schema.js';
import type { ClassManifest } from '../../handlers/types.js';

type Doc = Record<string, any>;

/** A small valid manifest; every test gets a fresh copy to break. */
function good(): Doc {
  return {
    apiVersion: 'kslate.dev/v1',
    kind: 'SharedContext',
    metadata: { name: 'incident', namespace: 'team-a' },
    spec: {
      fields: {
        status: { kind: 'versioned', type: 'string', enum: ['open', 'resolved'] },
        notes: { kind: 'append', type: 'object' },
        triage: { kind: 'task', leaseSeconds: 300 },
        scratch: { kind: 'soft' },
      },
      roles: {
        responder: { subjects: ['apikey:alice', 'k8s-sa:team-a/responder'], read: ['*'], write: ['status', 'notes'] },
      },
      checkpoint: { sections: ['summary'], requiredForResolve: ['responder'] },
    },
  };
}

function accept(mutate: (doc: Doc) => void = () => {}): ClassManifest {
  const doc = good();
  mutate(doc);
  const result = parseManifest(doc);
  if (!result.ok) throw new Error(`expected a valid manifest, got:\n${result.problems.join('\n')}`);
  return result.manifest;
}

function problems(mutate: (doc: Doc) => void): string[] {
  const doc = good();
  mutate(doc);
  const result = parseManifest(doc);
  if (result.ok) throw new Error('expected problems, the manifest was accepted');
  return result.problems;
}

describe('parseManifest: a good manifest', () => {
  it('is accepted with defaults filled in', () => {
    const m = accept((d) => {
      delete d.metadata.namespace;
      d.spec.roles.reviewer = { subjects: ['apikey:bob'] };
    });
    expect(m.metadata).toEqual({ name: 'incident', namespace: 'default' });
    expect(m.spec.ttl).toBeNull();
    expect(m.spec.roles.reviewer).toEqual({ subjects: ['apikey:bob'], read: [], write: [] });
    expect(m.spec.fields.scratch).toEqual({ kind: 'soft' });
  });

  it('keeps every setting it was given', () => {
    const m = accept((d) => {
      Object.assign(d.spec, { idPattern: '^[a-z]+$', ttl: '72h', minIdentityStrength: 'sa-bound', requireEvidence: true });
      d.spec.fields.triage.minIdentityStrength = 'pod-bound';
      d.spec.fields.notes.requireEvidence = true;
    });
    expect(m.spec).toMatchObject({ idPattern: '^[a-z]+$', ttl: '72h', minIdentityStrength: 'sa-bound', requireEvidence: true });
    expect(m.spec.fields.triage).toEqual({ kind: 'task', leaseSeconds: 300, minIdentityStrength: 'pod-bound' });
    expect(m.spec.fields.notes).toEqual({ kind: 'append', type: 'object', requireEvidence: true });
    expect(m.spec.checkpoint).toEqual({ sections: ['summary'], requiredForResolve: ['responder'] });
  });

  it('ignores keys outside spec that a cluster adds (status, labels)', () => {
    const m = accept((d) => {
      d.status = { conditions: [] };
      d.metadata.labels = { app: 'x' };
      d.metadata.uid = 'abc';
    });
    expect(m).not.toHaveProperty('status');
    expect(m.metadata).toEqual({ name: 'incident', namespace: 'team-a' });
  });

  it('accepts ttl: null, roles omitted and every identity strength', () => {
    expect(accept((d) => { d.spec.ttl = null; }).spec.ttl).toBeNull();
    const m = accept((d) => {
      delete d.spec.roles;
      delete d.spec.checkpoint;
    });
    expect(m.spec.roles).toEqual({});
    for (const s of ['pod-bound', 'sa-bound', 'issuer-declared', 'shared-secret']) {
      accept((d) => { d.spec.minIdentityStrength = s; d.spec.fields.status.minIdentityStrength = s; });
    }
  });

  it('accepts the bounds of names and leases', () => {
    accept((d) => { d.metadata.name = 'a'; });
    accept((d) => { d.metadata.name = `a${'-'.repeat(62)}`; });
    accept((d) => { d.spec.fields[`_${'x'.repeat(62)}`] = { kind: 'soft' }; });
    accept((d) => { d.spec.fields['Mixed-Case_9'] = { kind: 'soft' }; });
    accept((d) => { d.spec.fields.triage.leaseSeconds = 1; });
    accept((d) => { d.spec.fields.triage.leaseSeconds = 86400; });
  });

  it('accepts every subject form', () => {
    accept((d) => {
      d.spec.roles.responder.subjects = ['apikey:dev-bob', 'oidc:user|123@example.com', 'k8s-sa:team-a/*', 'k8s-sa:kube-system/sa.with.dots'];
    });
  });

  it('accepts enum values of the declared type, and anything without a type', () => {
    accept((d) => { d.spec.fields.n = { kind: 'versioned', type: 'number', enum: [1, 2.5] }; });
    accept((d) => { d.spec.fields.n = { kind: 'versioned', type: 'boolean', enum: [true] }; });
    accept((d) => { d.spec.fields.n = { kind: 'versioned', type: 'object', enum: [{ a: 1 }] }; });
    accept((d) => { d.spec.fields.n = { kind: 'versioned', type: 'array', enum: [[1], []] }; });
    accept((d) => { d.spec.fields.n = { kind: 'append', enum: [1, 'a', null, { b: [true] }] }; });
    accept((d) => { d.spec.fields.n = { kind: 'soft', type: 'any', enum: ['x', 2] }; });
  });

  it('accepts an empty requiredForResolve without a status field', () => {
    accept((d) => {
      delete d.spec.fields.status;
      d.spec.roles.responder.write = ['notes'];
      d.spec.checkpoint.requiredForResolve = [];
    });
  });
});

describe('parseManifest: each rule', () => {
  // [rule, how to break the good manifest, the problem expected (a prefix of one line)]
  const cases: [string, (d: Doc) => void, string][] = [
    ['top-level keys are required', (d) => { for (const k of Object.keys(d)) delete d[k]; d.x = 1; }, 'apiVersion: is required'],
    ['apiVersion is kslate.dev/v1', (d) => { d.apiVersion = 'kslate.dev/v2'; }, 'apiVersion: must be kslate.dev/v1'],
    ['apiVersion is required', (d) => { delete d.apiVersion; }, 'apiVersion: is required'],
    ['kind is SharedContext', (d) => { d.kind = 'ConfigMap'; }, 'kind: must be SharedContext'],
    ['metadata is required', (d) => { delete d.metadata; }, 'metadata: is required'],
    ['metadata.name is required', (d) => { delete d.metadata.name; }, 'metadata.name: is required'],
    ['metadata.name is lowercase', (d) => { d.metadata.name = 'Incident'; }, 'metadata.name: must match'],
    ['metadata.name starts with a letter', (d) => { d.metadata.name = '1ncident'; }, 'metadata.name: must match'],
    ['metadata.name has at most 63 characters', (d) => { d.metadata.name = 'a'.repeat(64); }, 'metadata.name: must match'],
    ['metadata.name has no underscore', (d) => { d.metadata.name = 'in_cident'; }, 'metadata.name: must match'],
    ['metadata.namespace is a namespace name', (d) => { d.metadata.namespace = 'Team A'; }, 'metadata.namespace: must be a Kubernetes namespace name'],
    ['spec is required', (d) => { delete d.spec; }, 'spec: is required'],
    ['spec is a mapping', (d) => { d.spec = ['x']; }, 'spec: must be a mapping'],
    ['unknown keys in spec are refused', (d) => { d.spec.requireEvidnce = true; }, 'spec.requireEvidnce: unknown key'],
    ['unknown keys in a field are refused', (d) => { d.spec.fields.status.requireEvidnce = true; }, 'spec.fields.status.requireEvidnce: unknown key'],
    ['unknown keys in a role are refused', (d) => { d.spec.roles.responder.writes = []; }, 'spec.roles.responder.writes: unknown key'],
    ['unknown keys in checkpoint are refused', (d) => { d.spec.checkpoint.section = []; }, 'spec.checkpoint.section: unknown key'],
    ['idPattern compiles as a RegExp', (d) => { d.spec.idPattern = '^[a-z'; }, 'spec.idPattern: is not a valid regular expression'],
    ['idPattern is a string', (d) => { d.spec.idPattern = 5; }, 'spec.idPattern: must be a regular expression string'],
    ['ttl is a duration', (d) => { d.spec.ttl = '30d'; }, 'spec.ttl: must be a positive duration'],
    ['ttl is positive', (d) => { d.spec.ttl = '0s'; }, 'spec.ttl: must be a positive duration'],
    ['ttl is a string', (d) => { d.spec.ttl = 3600; }, 'spec.ttl: must be a duration string'],
    ['minIdentityStrength is a known strength', (d) => { d.spec.minIdentityStrength = 'strong'; }, 'spec.minIdentityStrength: must be one of pod-bound, sa-bound, issuer-declared, shared-secret'],
    ['requireEvidence is a boolean', (d) => { d.spec.requireEvidence = 'yes'; }, 'spec.requireEvidence: must be true or false'],
    ['fields is required', (d) => { delete d.spec.fields; }, 'spec.fields: is required'],
    ['fields is a mapping', (d) => { d.spec.fields = ['status']; }, 'spec.fields: must be a mapping'],
    ['at least one field', (d) => { d.spec.fields = {}; delete d.spec.roles; delete d.spec.checkpoint; }, 'spec.fields: must define at least one field'],
    ['field names start with a letter or _', (d) => { d.spec.fields['9lives'] = { kind: 'soft' }; }, 'spec.fields["9lives"]: is not a valid field name'],
    ['field names have no spaces', (d) => { d.spec.fields['two words'] = { kind: 'soft' }; }, 'spec.fields["two words"]: is not a valid field name'],
    ['field names have at most 63 characters', (d) => { d.spec.fields[`f${'x'.repeat(63)}`] = { kind: 'soft' }; }, `spec.fields.f${'x'.repeat(63)}: is not a valid field name`],
    ['a field definition is a mapping', (d) => { d.spec.fields.scratch = 'soft'; }, 'spec.fields.scratch: must be a mapping'],
    ['a field has a kind', (d) => { delete d.spec.fields.scratch.kind; }, 'spec.fields.scratch.kind: is required'],
    ['kind is versioned|soft|append|task', (d) => { d.spec.fields.scratch.kind = 'temp'; }, 'spec.fields.scratch.kind: must be one of versioned, soft, append, task'],
    ['type is a known type', (d) => { d.spec.fields.scratch.type = 'text'; }, 'spec.fields.scratch.type: must be one of string, integer, number, boolean, object, array, any'],
    ['task fields have no type', (d) => { d.spec.fields.triage.type = 'string'; }, 'spec.fields.triage.type: not allowed on task fields'],
    ['task fields have no enum', (d) => { d.spec.fields.triage.enum = ['a']; }, 'spec.fields.triage.enum: not allowed on task fields'],
    ['enum is a list', (d) => { d.spec.fields.status.enum = 'open'; }, 'spec.fields.status.enum: must be a list of JSON values'],
    ['enum holds JSON values', (d) => { d.spec.fields.scratch.enum = [new Date(0)]; }, 'spec.fields.scratch.enum: must be a list of JSON values'],
    ['enum is not empty', (d) => { d.spec.fields.status.enum = []; }, 'spec.fields.status.enum: must list at least one value'],
    ['enum values match type string', (d) => { d.spec.fields.status.enum = ['open', 3]; }, "spec.fields.status.enum[1]: 3 is not of the field's type string"],
    ['enum values match type integer', (d) => { d.spec.fields.n = { kind: 'versioned', type: 'integer', enum: [1, 2.5] }; }, 'spec.fields.n.enum[1]: 2.5 is not'],
    ['enum values match type number', (d) => { d.spec.fields.n = { kind: 'versioned', type: 'number', enum: ['1'] }; }, 'spec.fields.n.enum[0]: "1" is not'],
    ['enum values match type boolean', (d) => { d.spec.fields.n = { kind: 'soft', type: 'boolean', enum: ['true'] }; }, 'spec.fields.n.enum[0]: "true" is not'],
    ['enum values match type object', (d) => { d.spec.fields.n = { kind: 'append', type: 'object', enum: [[1]] }; }, 'spec.fields.n.enum[0]: [1] is not'],
    ['enum values match type array', (d) => { d.spec.fields.n = { kind: 'soft', type: 'array', enum: [{}] }; }, 'spec.fields.n.enum[0]: {} is not'],
    ['leaseSeconds only on task fields', (d) => { d.spec.fields.scratch.leaseSeconds = 60; }, 'spec.fields.scratch.leaseSeconds: only allowed on task fields'],
    ['leaseSeconds is at least 1', (d) => { d.spec.fields.triage.leaseSeconds = 0; }, 'spec.fields.triage.leaseSeconds: must be a whole number of seconds from 1 to 86400'],
    ['leaseSeconds is at most 86400', (d) => { d.spec.fields.triage.leaseSeconds = 86401; }, 'spec.fields.triage.leaseSeconds: must be a whole number'],
    ['leaseSeconds is an integer', (d) => { d.spec.fields.triage.leaseSeconds = 1.5; }, 'spec.fields.triage.leaseSeconds: must be a whole number'],
    ['leaseSeconds is a number', (d) => { d.spec.fields.triage.leaseSeconds = '300'; }, 'spec.fields.triage.leaseSeconds: must be a whole number'],
    ['field minIdentityStrength is a known strength', (d) => { d.spec.fields.triage.minIdentityStrength = 'pod'; }, 'spec.fields.triage.minIdentityStrength: must be one of'],
    ['field requireEvidence is a boolean', (d) => { d.spec.fields.notes.requireEvidence = 1; }, 'spec.fields.notes.requireEvidence: must be true or false'],
    ['roles is a mapping', (d) => { d.spec.roles = ['responder']; }, 'spec.roles: must be a mapping'],
    ['role names are names', (d) => { d.spec.roles['on call'] = { subjects: [] }; }, 'spec.roles["on call"]: is not a valid role name'],
    ['a role has subjects', (d) => { delete d.spec.roles.responder.subjects; }, 'spec.roles.responder.subjects: is required'],
    ['subjects is a list', (d) => { d.spec.roles.responder.subjects = 'apikey:alice'; }, 'spec.roles.responder.subjects: must be a list of subjects'],
    ['a subject is a string', (d) => { d.spec.roles.responder.subjects = [42]; }, 'spec.roles.responder.subjects[0]: must be a string'],
    ['a subject names its provider', (d) => { d.spec.roles.responder.subjects = ['alice']; }, 'spec.roles.responder.subjects[0]: "alice" must have the form <provider>:<name>'],
    ['a subject provider is apikey, k8s-sa or oidc', (d) => { d.spec.roles.responder.subjects = ['ldap:alice']; }, 'spec.roles.responder.subjects[0]: "ldap:alice" must have the form'],
    ['a subject has a name', (d) => { d.spec.roles.responder.subjects = ['apikey:']; }, 'spec.roles.responder.subjects[0]: "apikey:" has no name'],
    ['a subject has no whitespace', (d) => { d.spec.roles.responder.subjects = ['oidc:a b']; }, 'spec.roles.responder.subjects[0]: "oidc:a b" must not contain whitespace'],
    ['only k8s-sa has a wildcard', (d) => { d.spec.roles.responder.subjects = ['apikey:*']; }, 'spec.roles.responder.subjects[0]: "apikey:*": wildcards exist only as'],
    ['k8s-sa names are ns/sa', (d) => { d.spec.roles.responder.subjects = ['k8s-sa:responder']; }, 'spec.roles.responder.subjects[0]: "k8s-sa:responder" must be k8s-sa:<namespace>/<serviceaccount>'],
    ['k8s-sa names have one slash', (d) => { d.spec.roles.responder.subjects = ['k8s-sa:a/b/c']; }, 'spec.roles.responder.subjects[0]: "k8s-sa:a/b/c" must be'],
    ['k8s-sa namespaces are namespace names', (d) => { d.spec.roles.responder.subjects = ['k8s-sa:Team/x']; }, 'spec.roles.responder.subjects[0]: "k8s-sa:Team/x" must be'],
    ['k8s-sa wildcard is the whole account name', (d) => { d.spec.roles.responder.subjects = ['k8s-sa:team-a/resp*']; }, 'spec.roles.responder.subjects[0]: "k8s-sa:team-a/resp*" must be'],
    ['read is a list', (d) => { d.spec.roles.responder.read = '*'; }, 'spec.roles.responder.read: must be a list of field names'],
    ['read names existing fields', (d) => { d.spec.roles.responder.read = ['status', 'titel']; }, 'spec.roles.responder.read[1]: "titel" is not a field of this class'],
    ['write names existing fields', (d) => { d.spec.roles.responder.write = ['nope']; }, 'spec.roles.responder.write[0]: "nope" is not a field of this class'],
    ['write holds strings', (d) => { d.spec.roles.responder.write = [1]; }, 'spec.roles.responder.write[0]: must be a non-empty string'],
    ['checkpoint is a mapping', (d) => { d.spec.checkpoint = ['summary']; }, 'spec.checkpoint: must be a mapping'],
    ['checkpoint.sections is a list', (d) => { d.spec.checkpoint.sections = 'summary'; }, 'spec.checkpoint.sections: must be a list of section names'],
    ['checkpoint.sections holds strings', (d) => { d.spec.checkpoint.sections = ['summary', 3]; }, 'spec.checkpoint.sections[1]: must be a non-empty string'],
    ['requiredForResolve names existing roles', (d) => { d.spec.checkpoint.requiredForResolve = ['responder', 'ghost']; }, 'spec.checkpoint.requiredForResolve[1]: "ghost" is not a role of this class'],
    ['requiredForResolve is a list', (d) => { d.spec.checkpoint.requiredForResolve = 'responder'; }, 'spec.checkpoint.requiredForResolve: must be a list of role names'],
    ['requiredForResolve needs a status field', (d) => { delete d.spec.fields.status; d.spec.roles.responder.write = ['notes']; }, 'spec.checkpoint.requiredForResolve: needs a field named status'],
  ];

  it.each(cases)('%s', (_rule, mutate, expected) => {
    const found = problems(mutate);
    expect(found.some((p) => p.startsWith(expected)), `no problem starting with\n  ${expected}\nin\n  ${found.join('\n  ')}`).toBe(true);
  });

  it('names the path of a document that is not a mapping', () => {
    for (const doc of [null, 'text', 42, ['a']]) {
      expect(parseManifest(doc)).toEqual({ ok: false, problems: ['manifest: must be a mapping'] });
    }
  });

  it('lists the allowed keys with an unknown one', () => {
    expect(problems((d) => { d.spec.fields.status.typ = 'string'; })).toContain(
      'spec.fields.status.typ: unknown key (allowed: kind, type, enum, requireEvidence, minIdentityStrength, leaseSeconds, durability)',
    );
  });

  it('reports every problem at once, each on one line', () => {
    const found = problems((d) => {
      d.metadata.name = 'Bad';
      d.spec.ttl = 'soon';
      d.spec.fields.scratch.kind = 'temp';
      d.spec.roles.responder.read = ['ghost'];
    });
    expect(found).toEqual(expect.arrayContaining([
      expect.stringMatching(/^metadata\.name: /),
      expect.stringMatching(/^spec\.ttl: /),
      expect.stringMatching(/^spec\.fields\.scratch\.kind: /),
      expect.stringMatching(/^spec\.roles\.responder\.read\[0\]: /),
    ]));
    for (const p of found) expect(p).not.toContain('\n');
  });

  it('does not mutate its input', () => {
    const doc = good();
    delete doc.metadata.namespace;
    const before = structuredClone(doc);
    parseManifest(doc);
    expect(doc).toEqual(before);
  });

  it('gives each parse its own default lists', () => {
    const a = accept((d) => { d.spec.roles.r = { subjects: [] }; });
    a.spec.roles.r.read.push('x');
    const b = accept((d) => { d.spec.roles.r = { subjects: [] }; });
    expect(b.spec.roles.r.read).toEqual([]);
  });
});

describe('the example class', () => {
  it('is valid and says what the brief says', async () => {
    const text = await readFile(new URL('../../examples/classes/incident.yaml', import.meta.url), 'utf8');
    const result = parseManifest(parse(text));
    if (!result.ok) throw new Error(result.problems.join('\n'));
    const { metadata, spec } = result.manifest;
    expect(metadata).toEqual({ name: 'incident', namespace: 'default' });
    expect(spec.idPattern).toBe('^[a-z0-9-]{1,64}$');
    expect(spec.ttl).toBe('720h');
    expect(spec.fields).toEqual({
      title: { kind: 'versioned', type: 'string' },
      status: { kind: 'versioned', type: 'string', enum: ['open', 'investigating', 'mitigated', 'resolved'] },
      severity: { kind: 'versioned', type: 'integer', enum: [1, 2, 3, 4] },
      summary: { kind: 'versioned', type: 'string' },
      notes: { kind: 'append', type: 'object', requireEvidence: true },
      triage: { kind: 'task', leaseSeconds: 300 },
      scratch: { kind: 'soft', type: 'any' },
    });
    expect(spec.roles).toEqual({
      responder: {
        subjects: ['apikey:alice', 'apikey:carol', 'k8s-sa:default/responder'],
        read: ['*'],
        write: ['title', 'status', 'severity', 'summary', 'notes', 'triage', 'scratch'],
      },
      reviewer: { subjects: ['apikey:bob'], read: ['title', 'status', 'severity', 'summary', 'notes'], write: ['notes'] },
    });
    expect(spec.checkpoint).toEqual({ sections: ['summary', 'next_steps'], requiredForResolve: ['responder'] });
  });
});

describe('parseDuration', () => {
  it.each([
    ['90s', 90_000],
    ['15m', 900_000],
    ['72h', 259_200_000],
    ['720h', 2_592_000_000],
    ['1h30m', 5_400_000],
    ['1h30m15s', 5_415_000],
    ['500ms', 500],
    ['1.5h', 5_400_000],
    ['1.1h', 3_960_000],
    ['.5s', 500],
    ['2us', 0.002],
    ['3µs', 0.003],
    ['1000000ns', 1],
    ['0', 0],
    ['0s', 0],
    ['+5s', 5000],
  ])('%s is %d ms', (s, ms) => {
    expect(parseDuration(s)).toBe(ms);
  });

  it.each([
    [''], ['-5s'], ['-1h30m'], ['5'], ['1d'], ['1w'], ['h'], ['1h 30m'], [' 1h'], ['1H'], ['1.2.3s'], ['abc'], ['5s!'], ['+'], ['.s'],
  ])('%j is not a duration', (s) => {
    expect(parseDuration(s)).toBeNull();
  });
});

/** Class specs for the RBAC tests: roles by subjects, each reading everything. */
import { parseManifest } from '../../handlers/class-schema.js';
import type { ClassSpec } from '../../handlers/types.js';

export function roleSpec(roles: Record<string, string[]>): ClassSpec {
  const parsed = parseManifest({
    apiVersion: 'kslate.dev/v1',
    kind: 'SharedContext',
    metadata: { name: 'x', namespace: 'team-a' },
    spec: {
      fields: { title: { kind: 'versioned' } },
      roles: Object.fromEntries(Object.entries(roles).map(([r, subjects]) => [r, { subjects, read: ['*'] }])),
    },
  });
  if (!parsed.ok) throw new Error(parsed.problems.join('; '));
  return parsed.manifest.spec;
}

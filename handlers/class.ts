/** class: GET /v1/classes/{name} — the class definition; needs a role in the class. */
import type { Ctx } from './context.js';
import { authorize, checkParams, type Outcome } from './pipeline.js';

export async function getClass(ctx: Ctx, input: { name: string; params?: readonly string[] }): Promise<Outcome> {
  const { cls } = await authorize(ctx, input.name, 'read');
  checkParams(input.params, [], { class: input.name }, 'class');
  const s = cls.spec;
  return {
    body: {
      name: cls.name,
      namespace: cls.namespace,
      fields: s.fields,
      roles: s.roles,
      ttl: s.ttl ?? null,
      maxTtl: s.maxTtl ?? null,
      history: s.history ?? {},
      durability: s.durability ?? 'strict',
      checkpoint: s.checkpoint ?? { sections: [], requiredForResolve: [] },
      idPattern: s.idPattern ?? null,
      minIdentityStrength: s.minIdentityStrength ?? 'shared-secret',
      requireEvidence: s.requireEvidence ?? false,
      gone: cls.gone,
    },
  };
}

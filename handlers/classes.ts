/** classes: GET /v1/classes — the classes in which the caller has a role. */
import { rolesOf } from './class-registry.js';
import type { Ctx } from './context.js';
import { checkParams, type Outcome } from './pipeline.js';

export async function classes(ctx: Ctx, input: { params?: readonly string[] } = {}): Promise<Outcome> {
  checkParams(input.params, [], {}, 'classes');
  const all = await ctx.classes.list();
  const mine = all
    .filter((c) => rolesOf(c, ctx.identity.author).length > 0)
    .sort((a, b) => a.name.localeCompare(b.name))
    .map((c) => (c.gone ? { name: c.name, gone: true } : { name: c.name }));
  return { body: { classes: mine } };
}

/** Field value checks: `type` and `enum` (decisions §1). */
import type { FieldDef } from './types.js';
import { jsonEqual } from './format.js';

/** A reason the value does not fit the field, or null when it does. */
export function valueProblem(def: FieldDef, value: unknown): string | null {
  const type = def.type ?? 'any';
  let ok: boolean;
  switch (type) {
    case 'string':
      ok = typeof value === 'string';
      break;
    case 'integer':
      ok = typeof value === 'number' && Number.isInteger(value);
      break;
    case 'number':
      ok = typeof value === 'number' && Number.isFinite(value);
      break;
    case 'boolean':
      ok = typeof value === 'boolean';
      break;
    case 'object':
      ok = value !== null && typeof value === 'object' && !Array.isArray(value);
      break;
    case 'array':
      ok = Array.isArray(value);
      break;
    default:
      ok = true;
  }
  if (!ok) return `must be of type ${type}`;
  if (def.enum && !def.enum.some((e) => jsonEqual(e, value))) {
    return `must be one of ${JSON.stringify(def.enum)}`;
  }
  return null;
}

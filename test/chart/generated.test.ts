/**
 * The committed chart/crds/sharedcontexts.kslate.dev.yaml and chart/values.schema.json are
 * what chart/schema/generate.ts makes of the valibot schemas. `npm run chart:generate`
 * (KSLATE_UPDATE_CHART=1) writes them instead of comparing.
 */
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { expect, test } from 'vitest';
import { CRD_PATH, VALUES_SCHEMA_PATH, crdYaml, valuesSchemaJson } from '../../chart/schema/generate.js';

const update = process.env.KSLATE_UPDATE_CHART === '1';
const root = new URL('../../', import.meta.url);

for (const [path, generate] of [[CRD_PATH, crdYaml], [VALUES_SCHEMA_PATH, valuesSchemaJson]] as const) {
  test(`${path} is fresh (npm run chart:generate rewrites it)`, () => {
    const file = new URL(path, root);
    const text = generate();
    if (update) writeFileSync(file, text);
    expect(existsSync(file), `${path} is missing: run npm run chart:generate`).toBe(true);
    expect(readFileSync(file, 'utf8'), `${path} is stale: run npm run chart:generate`).toBe(text);
  });
}

/**
 * clients/typescript/src/schema.ts is generated from docs/openapi.json by openapi-typescript 7
 * and committed, so the client's types follow the document the gateway serves.
 * `npm run client:generate` (KSLATE_UPDATE_CLIENT=1) writes it instead of comparing.
 */
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import openapiTS, { astToString } from 'openapi-typescript';
import { expect, test } from 'vitest';

const PATH = 'clients/typescript/src/schema.ts';
const update = process.env.KSLATE_UPDATE_CLIENT === '1';

const HEADER = `/**
 * Generated from docs/openapi.json by openapi-typescript 7: do not edit.
 * Regenerate with \`npm run client:generate\` (test/client/generated.test.ts checks it is fresh).
 */
`;

test(`${PATH} is fresh (npm run client:generate rewrites it)`, async () => {
  const doc = new URL('../../docs/openapi.json', import.meta.url);
  const file = new URL(`../../${PATH}`, import.meta.url);
  const ast = await openapiTS(JSON.parse(readFileSync(doc, 'utf8')), { alphabetize: false });
  const text = HEADER + astToString(ast);
  if (update) writeFileSync(file, text);
  expect(existsSync(file), `${PATH} is missing: run npm run client:generate`).toBe(true);
  expect(readFileSync(file, 'utf8'), `${PATH} is stale: run npm run client:generate`).toBe(text);
}, 60_000);

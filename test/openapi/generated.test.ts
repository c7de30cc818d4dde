/**
 * docs/openapi.json is the document the gateway serves at GET /v1/openapi.json, generated from
 * the handlers' valibot schemas (handlers/openapi.ts, runtime/http/openapi.ts).
 * `npm run openapi:generate` (KSLATE_UPDATE_OPENAPI=1) writes it instead of comparing.
 */
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { expect, test } from 'vitest';
import { apiDocumentText } from '../../runtime/http/openapi.js';

const PATH = 'docs/openapi.json';
const update = process.env.KSLATE_UPDATE_OPENAPI === '1';

test(`${PATH} is fresh (npm run openapi:generate rewrites it)`, () => {
  const file = new URL(`../../${PATH}`, import.meta.url);
  const text = apiDocumentText();
  if (update) writeFileSync(file, text);
  expect(existsSync(file), `${PATH} is missing: run npm run openapi:generate`).toBe(true);
  expect(readFileSync(file, 'utf8'), `${PATH} is stale: run npm run openapi:generate`).toBe(text);
});

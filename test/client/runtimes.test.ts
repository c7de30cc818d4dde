/**
 * @kslate/client runs unchanged outside Node: the built package, bundled by esbuild for the
 * web platform, does one put and one get against a real gateway from workerd (Miniflare,
 * without nodejs_compat) and from Chromium (the console tests' @sparticuz/chromium, nothing
 * downloaded), a page of the gateway's own origin so no CORS is involved.
 */
import chromium from '@sparticuz/chromium';
import { build } from 'esbuild';
import { Miniflare } from 'miniflare';
import { chromium as playwright } from 'playwright-core';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { KEYS, startTestGateway, type TestGateway } from '../setup/gateway.js';
import { COMPATIBILITY_DATE } from '../workers/miniflare.js';

const cls = {
  name: 'runtime',
  spec: {
    fields: { memo: { kind: 'soft' as const } },
    roles: { w: { subjects: ['apikey:alice'], read: ['*'], write: ['*'] } },
  },
};

let t: TestGateway;
beforeAll(async () => {
  t = await startTestGateway([cls]);
});
afterAll(async () => {
  await t?.close();
});

/** The package's dist bundled for the web platform: no Node built-in can sneak in. */
async function bundle(entry: string, format: 'esm' | 'iife'): Promise<string> {
  const out = await build({
    stdin: { contents: entry, resolveDir: process.cwd(), loader: 'js' },
    bundle: true,
    platform: 'browser',
    format,
    globalName: format === 'iife' ? 'KslateTest' : undefined,
    write: false,
    logLevel: 'silent',
  });
  return out.outputFiles[0].text;
}

test('in workerd (Miniflare), without nodejs_compat: one put and one get', async () => {
  const script = await bundle(
    `import { kslate } from '@kslate/client';
     export default {
       async fetch(req, env) {
         const r = kslate({ url: env.URL, token: env.TOKEN }).record('runtime', 'workerd');
         const put = await r.put('memo', 'from workerd');
         const got = await r.get();
         return Response.json({ put, got });
       },
     };`,
    'esm',
  );
  const mf = new Miniflare({
    modules: true,
    script,
    compatibilityDate: COMPATIBILITY_DATE,
    bindings: { URL: t.url, TOKEN: KEYS.alice },
    host: '127.0.0.1',
    port: 0,
  });
  try {
    const res = await mf.dispatchFetch('http://worker/');
    const body = (await res.json()) as any;
    expect(res.status, JSON.stringify(body)).toBe(200);
    expect(body.put).toMatchObject({ record: 'runtime/workerd', field: 'memo', version: 1 });
    expect(body.got.fields.memo).toMatchObject({ value: 'from workerd', author: 'apikey:alice' });
  } finally {
    await mf.dispose();
  }
}, 60_000);

test('in Chromium: one put and one get', async () => {
  const script = await bundle(`export { kslate } from '@kslate/client';`, 'iife');
  const browser = await playwright.launch({ executablePath: await chromium.executablePath(), args: chromium.args.filter((a) => a !== '--single-process'), headless: true, timeout: 60_000 });
  try {
    const page = await browser.newPage();
    await page.goto(`${t.url}/healthz`);
    await page.addScriptTag({ content: script });
    const body = await page.evaluate(
      async ({ url, token }) => {
        const r = (globalThis as any).KslateTest.kslate({ url, token }).record('runtime', 'chromium');
        const put = await r.put('memo', 'from chromium');
        const got = await r.get();
        return { put, got, ua: navigator.userAgent };
      },
      { url: t.url, token: KEYS.alice },
    );
    expect(body.ua).toMatch(/Chrome/);
    expect(body.put).toMatchObject({ record: 'runtime/chromium', version: 1 });
    expect(body.got.fields.memo).toMatchObject({ value: 'from chromium' });
  } finally {
    await browser.close();
  }
}, 90_000);

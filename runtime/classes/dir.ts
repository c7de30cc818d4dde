/**
 * Class source without a cluster (decisions §1): SharedContext manifests read from a
 * directory, re-read on every sweep.
 */
import { readdir, readFile } from 'node:fs/promises';
import { extname, join } from 'node:path';
import { parseAllDocuments } from 'yaml';
import { parseManifest } from '../../handlers/class-schema.js';
import type { ClassManifest } from '../../handlers/types.js';
import type { ClassSource } from '../../worker/reconcile-classes.js';

const EXTENSIONS = new Set(['.yaml', '.yml', '.json']);

/** One parsed document of a file, labelled for problem lines. */
interface Doc {
  label: string;
  value: unknown;
}

/**
 * Reads every `*.yaml`, `*.yml` and `*.json` file directly in `dir` (sorted by name) and
 * validates each document as a SharedContext manifest. Never throws: an unreadable
 * directory, a syntax error, an invalid manifest or a second manifest with an already
 * seen class name each become a problem line `<file>[#<doc>]: <problem>`, and the
 * manifest concerned is left out.
 */
export async function readClassDir(
  dir: string,
): Promise<{ manifests: ClassManifest[]; problems: string[]; duplicates: string[]; unreadable?: true }> {
  const manifests: ClassManifest[] = [];
  const problems: string[] = [];
  // Same name from another namespace: kept, because which one wins is the reconciler's call
  // (the namespace that already holds the class), not file order's; still reported.
  const duplicates: string[] = [];

  let names: string[];
  try {
    const entries = await readdir(dir, { withFileTypes: true });
    // Symlinks count: a ConfigMap volume presents its files as symlinks.
    names = entries
      .filter((e) => !e.isDirectory() && EXTENSIONS.has(extname(e.name).toLowerCase()))
      .map((e) => e.name)
      .sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
  } catch (e) {
    return { manifests, problems: [`${dir}: cannot read the classes directory (${errorText(e)})`], duplicates, unreadable: true };
  }

  const firstSeen = new Map<string, { label: string; namespace: string }>();
  for (const name of names) {
    let text: string;
    try {
      text = await readFile(join(dir, name), 'utf8');
    } catch (e) {
      problems.push(`${name}: cannot read (${errorText(e)})`);
      continue;
    }
    const docs = name.toLowerCase().endsWith('.json') ? jsonDoc(name, text, problems) : yamlDocs(name, text, problems);
    for (const { label, value } of docs) {
      const result = parseManifest(value);
      if (!result.ok) {
        for (const problem of result.problems) problems.push(`${label}: ${problem}`);
        continue;
      }
      const className = result.manifest.metadata.name;
      const first = firstSeen.get(className);
      if (first !== undefined) {
        const line = `${label}: duplicate class name "${className}" (first in ${first.label})`;
        if (first.namespace === result.manifest.metadata.namespace) {
          problems.push(line);
          continue;
        }
        duplicates.push(`${line}; class names are one flat namespace, so only the namespace holding it keeps it`);
      } else {
        firstSeen.set(className, { label, namespace: result.manifest.metadata.namespace });
      }
      manifests.push(result.manifest);
    }
  }
  return { manifests, problems, duplicates };
}

/**
 * `--classes DIR` as the sweep's class source. A directory that cannot be read fails the class
 * step (an error each sweep, `kslate sweep` exit 1): it says nothing about any manifest, so
 * nothing is reconciled. A bad file in it is a refused manifest, which the sweep reports
 * without failing.
 */
export async function classDirSource(dir: string): Promise<ClassSource> {
  const read = await readClassDir(dir);
  if (read.unreadable) throw new Error(`${read.problems[0]}; check --classes (KSLATE_CLASSES)`);
  return read;
}

/** The non-empty documents of a YAML stream; `#n` (1-based) labels them when there are several. */
function yamlDocs(file: string, text: string, problems: string[]): Doc[] {
  // Merge keys (`<<: *base`) as kubectl reads them; plain YAML 1.2 would keep `<<` as a key.
  const parsed = parseAllDocuments(text, { merge: true })
    .map((doc, i): { n: number; value?: unknown; errors?: string[] } => {
      // yaml's message is "<what> at line L, column C:" followed by a code frame; keep the first line.
      if (doc.errors.length > 0) return { n: i + 1, errors: doc.errors.map((e) => `YAML syntax error: ${e.message.split('\n')[0].replace(/:$/, '')}`) };
      try {
        return { n: i + 1, value: doc.toJS() };
      } catch (e) {
        return { n: i + 1, errors: [errorText(e)] };
      }
    })
    // A comment alone, or nothing between two `---`, is a null document: skipped.
    .filter((d) => d.errors !== undefined || d.value != null);
  const docs: Doc[] = [];
  for (const { n, value, errors } of parsed) {
    const label = parsed.length > 1 ? `${file}#${n}` : file;
    if (errors) for (const e of errors) problems.push(`${label}: ${e}`);
    else docs.push({ label, value });
  }
  return docs;
}

/** A JSON file holds one document (none when blank); a syntax error is reported with its line and column. */
function jsonDoc(file: string, text: string, problems: string[]): Doc[] {
  text = text.replace(/^\uFEFF/, '');
  if (text.trim() === '') return [];
  try {
    return [{ label: file, value: JSON.parse(text) }];
  } catch (e) {
    const message = errorText(e).replace(/\s*\(line \d+ column \d+\)$/, '');
    const at = /at position (\d+)/.exec(message);
    if (!at) {
      problems.push(`${file}: JSON syntax error: ${message}`);
      return [];
    }
    const before = text.slice(0, Number(at[1])).split('\n');
    const where = `at line ${before.length}, column ${before[before.length - 1].length + 1}`;
    problems.push(`${file}: JSON syntax error: ${message.replace(/ ?in JSON at position \d+/, '')} ${where}`);
    return [];
  }
}

function errorText(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}

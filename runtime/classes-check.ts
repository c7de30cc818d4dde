/**
 * `kslate classes check DIR`: validates a classes directory the way the worker reads it.
 */
import { readClassDir } from './classes/dir.js';

/**
 * Prints one line per problem found in `dir`, or `ok: N classes (names)` when there is
 * none, and returns the process exit code: 1 when any problem was found, else 0.
 */
export async function classesCheck(dir: string, out: (line: string) => void): Promise<number> {
  const { manifests, problems, duplicates } = await readClassDir(dir);
  for (const problem of [...problems, ...duplicates]) out(problem);
  if (problems.length > 0 || duplicates.length > 0) return 1;
  const names = manifests.map((m) => m.metadata.name);
  out(`ok: ${names.length} ${names.length === 1 ? 'class' : 'classes'}${names.length > 0 ? ` (${names.join(', ')})` : ''}`);
  return 0;
}

/** Tests that spawn the CLI run the compiled code in dist/: is it as new as the sources? */
import { existsSync, readdirSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';

export const ROOT = fileURLToPath(new URL('../..', import.meta.url));

/** True when every .ts under the built folders has a dist/ .js at least as new. */
export function distIsFresh(): boolean {
  for (const top of ['handlers', 'runtime', 'db', 'worker']) {
    const stack = [join(ROOT, top)];
    while (stack.length > 0) {
      const d = stack.pop()!;
      if (!existsSync(d)) continue;
      for (const e of readdirSync(d, { withFileTypes: true })) {
        const p = join(d, e.name);
        if (e.isDirectory()) stack.push(p);
        else if (e.name.endsWith('.ts') && !e.name.endsWith('.d.ts')) {
          const out = join(ROOT, 'dist', relative(ROOT, p)).replace(/\.ts$/, '.js');
          if (!existsSync(out) || statSync(out).mtimeMs < statSync(p).mtimeMs) return false;
        }
      }
    }
  }
  return true;
}

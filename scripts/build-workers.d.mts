import type { Metafile } from 'esbuild';
export declare const OUT_DIR: string;
export declare const OUT_FILE: string;
export declare function buildWorkers(opts?: { meta?: boolean; outfile?: string }): Promise<Metafile>;

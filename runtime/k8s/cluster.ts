/**
 * Finding the cluster, and what every call to it shares: a time limit per request and one
 * way to turn a client-node error into a sentence.
 */
import { existsSync } from 'node:fs';
import { delimiter, join } from 'node:path';
import {
  ApiException,
  KubeConfig,
  Observable,
  type ConfigurationOptions,
  type ObservableMiddleware,
} from '@kubernetes/client-node';

/** Where a pod's service-account credentials are mounted. */
export const SA_DIR = '/var/run/secrets/kubernetes.io/serviceaccount';

/**
 * The cluster this process should talk to, or null when there is none: a `KUBECONFIG` file
 * (or list of files, as kubectl reads it) when set, since it is the explicit choice; else
 * the pod's own service account (KUBERNETES_SERVICE_HOST and the mounted token). Unlike
 * kubectl, ~/.kube/config alone does not count: a worker on a laptop must not start editing
 * whatever cluster the current context names. Throws when a named file cannot be loaded.
 */
export function detectCluster(env: NodeJS.ProcessEnv = process.env, saDir = SA_DIR): KubeConfig | null {
  const files = (env.KUBECONFIG ?? '').split(delimiter).filter((f) => f !== '');
  if (files.length > 0) {
    const kc = new KubeConfig();
    try {
      kc.loadFromFile(files[0]!);
      for (const f of files.slice(1)) {
        const more = new KubeConfig();
        more.loadFromFile(f);
        kc.mergeConfig(more);
      }
    } catch (e) {
      throw new Error(`cannot load the Kubernetes client configuration from KUBECONFIG=${env.KUBECONFIG}: ${(e as Error).message}; fix the file or unset KUBECONFIG`);
    }
    return kc;
  }
  const host = env.KUBERNETES_SERVICE_HOST;
  const port = env.KUBERNETES_SERVICE_PORT ?? '443';
  if (!host || !existsSync(`${saDir}/token`)) return null;
  const kc = new KubeConfig();
  // As KubeConfig.loadFromCluster(), but from `env` rather than process.env.
  const server = `${['80', '8080', '8001'].includes(port) ? 'http' : 'https'}://${host.includes(':') ? `[${host}]` : host}:${port}`;
  kc.loadFromOptions({
    clusters: [{ name: 'inCluster', server, caFile: `${saDir}/ca.crt`, skipTLSVerify: false }],
    users: [{ name: 'inClusterUser', authProvider: { name: 'tokenFile', config: { tokenFile: `${saDir}/token` } } }],
    contexts: [{ name: 'inClusterContext', cluster: 'inCluster', user: 'inClusterUser' }],
    currentContext: 'inClusterContext',
  });
  return kc;
}

/** No KUBECONFIG, no ~/.kube/config and no service account of a pod: there is no cluster to ask. */
export class NoClusterError extends Error {}

/**
 * The cluster as kubectl finds it (`KubeConfig.loadFromDefault()`): KUBECONFIG, else
 * ~/.kube/config, else the pod's own service account. `who` prefixes the error, which names
 * where the configuration was looked for. When none of these exists, client-node would fall
 * back to `http://localhost:8080` (an apiserver's old insecure port, and the gateway's own
 * default port): that is refused with NoClusterError instead.
 */
export function loadDefaultKubeConfig(who: string, env: NodeJS.ProcessEnv = process.env, saDir = SA_DIR): KubeConfig {
  // The same places loadFromDefault looks, in its order (Linux and macOS: $HOME).
  const home = env.HOME ? join(env.HOME, '.kube', 'config') : null;
  if (!env.KUBECONFIG && !(home && existsSync(home)) && !existsSync(`${saDir}/token`)) {
    throw new NoClusterError(
      `${who}: no Kubernetes cluster to send TokenReviews to (not in a pod, KUBECONFIG unset, no ~/.kube/config)`,
    );
  }
  const kc = new KubeConfig();
  try {
    kc.loadFromDefault();
  } catch (e) {
    const where = process.env.KUBECONFIG ? `KUBECONFIG=${process.env.KUBECONFIG}` : '~/.kube/config or the in-cluster service account';
    throw new Error(`${who}: cannot load the Kubernetes client configuration from ${where}: ${(e as Error).message}`);
  }
  return kc;
}

/** The API server's address, for messages. */
export function serverOf(kc: KubeConfig): string {
  return kc.getCurrentCluster()?.server ?? '(no current cluster)';
}

/**
 * Request options that abort a call after `timeoutMs` (a fresh signal per request), plus
 * any extra middleware (e.g. setHeaderOptions for a patch content type).
 */
export function callOptions(timeoutMs: number, extra: ObservableMiddleware[] = []): ConfigurationOptions {
  const timeout: ObservableMiddleware = {
    pre: (ctx) => {
      ctx.setSignal(AbortSignal.timeout(timeoutMs));
      return new Observable(Promise.resolve(ctx));
    },
    post: (res) => new Observable(Promise.resolve(res)),
  };
  return { middleware: [timeout, ...extra], middlewareMergeStrategy: 'append' };
}

/** A middleware setting one request header (client-node's setHeaderOptions, as a middleware). */
export function headerMiddleware(key: string, value: string): ObservableMiddleware {
  return {
    pre: (ctx) => {
      ctx.setHeaderParam(key, value);
      return new Observable(Promise.resolve(ctx));
    },
    post: (res) => new Observable(Promise.resolve(res)),
  };
}

/** The HTTP status of a failed call, or null when the server never answered. */
export function statusOf(e: unknown): number | null {
  return e instanceof ApiException ? (e as ApiException<unknown>).code : null;
}

/** What the API server said (its Status message), or why it could not be reached. */
export function apiMessage(e: unknown): string {
  if (e instanceof ApiException) {
    const ex = e as ApiException<unknown>;
    let body: unknown = ex.body;
    if (typeof body === 'string') {
      try {
        body = JSON.parse(body);
      } catch {
        // not JSON: keep the text
      }
    }
    const msg =
      body && typeof body === 'object' && typeof (body as { message?: unknown }).message === 'string'
        ? (body as { message: string }).message
        : typeof body === 'string' && body.trim() !== ''
          ? body.trim().slice(0, 300)
          : '';
    return `HTTP ${ex.code}${msg ? `: ${msg}` : ''}`;
  }
  const err = e as Error & { name?: string; code?: string; cause?: { code?: string; message?: string } };
  if (err?.name === 'TimeoutError' || err?.name === 'AbortError') return 'no answer in time (the request timed out)';
  const code = err?.code ?? err?.cause?.code;
  return `${err?.message ?? String(e)}${code && !String(err?.message).includes(code) ? ` (${code})` : ''}`;
}

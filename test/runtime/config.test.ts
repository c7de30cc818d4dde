/**
 * parseConfig (decisions §6 "Running it"): defaults, flag > environment > default, and
 * bad values refused with both the flag and its KSLATE_* variable named.
 */
import { describe, expect, it } from 'vitest';
import { ConfigError, parseConfig } from '../../runtime/config.js';

function configError(fn: () => unknown): ConfigError {
  try {
    fn();
  } catch (e) {
    expect(e).toBeInstanceOf(ConfigError);
    return e as ConfigError;
  }
  throw new Error('expected a ConfigError, nothing was thrown');
}

describe('defaults (decisions §6, deployment values)', () => {
  it('listen 127.0.0.1:8080, gRPC off, metrics 9100, 4096 connections, identity k8s-sa', () => {
    const c = parseConfig([], {});
    expect(c.listenHost).toBe('127.0.0.1');
    expect(c.listenPort).toBe(8080);
    expect(c.grpcPort).toBe(0);
    expect(c.metricsPort).toBe(9100);
    expect(c.maxConns).toBe(4096);
    expect(c.identity).toEqual(['k8s-sa']);
    expect(c.databaseUrl).toBeUndefined();
    expect(c.tlsCert).toBeUndefined();
    expect(c.tlsKey).toBeUndefined();
    expect(c.classesDir).toBeUndefined();
    expect(c.sweepIntervalMs).toBeUndefined();
    expect(c.headerTimeoutMs).toBe(10_000);
    expect(c.requestTimeoutMs).toBe(60_000);
  });

  it('--header-timeout and --request-timeout take durations', () => {
    const c = parseConfig(['--header-timeout', '1s', '--request-timeout', '2m'], {});
    expect(c.headerTimeoutMs).toBe(1000);
    expect(c.requestTimeoutMs).toBe(120_000);
    expect(parseConfig([], { KSLATE_HEADER_TIMEOUT: '500ms' }).headerTimeoutMs).toBe(500);
  });

  it('does not read the real process environment when an env object is given', () => {
    const saved = process.env.KSLATE_LISTEN;
    process.env.KSLATE_LISTEN = '10.0.0.1:1';
    try {
      expect(parseConfig([], {}).listenPort).toBe(8080);
    } finally {
      if (saved === undefined) delete process.env.KSLATE_LISTEN;
      else process.env.KSLATE_LISTEN = saved;
    }
  });
});

describe('every flag has an environment variable (decisions §6)', () => {
  const env = {
    KSLATE_DATABASE_URL: 'postgres://env@h/db',
    KSLATE_LISTEN: '0.0.0.0:9000',
    KSLATE_GRPC_PORT: '9001',
    KSLATE_METRICS_PORT: '9002',
    KSLATE_MAX_CONNS: '17',
    KSLATE_CLASSES: '/env/classes',
    KSLATE_SWEEP_INTERVAL: '5m',
    KSLATE_IDENTITY: 'apikey',
    KSLATE_APIKEYS: '/env/keys.yaml',
    KSLATE_TLS_CERT: '/env/cert.pem',
    KSLATE_TLS_KEY: '/env/key.pem',
  };

  it('environment overrides the defaults', () => {
    const c = parseConfig([], env);
    expect(c.databaseUrl).toBe('postgres://env@h/db');
    expect(c.listenHost).toBe('0.0.0.0');
    expect(c.listenPort).toBe(9000);
    expect(c.grpcPort).toBe(9001);
    expect(c.metricsPort).toBe(9002);
    expect(c.maxConns).toBe(17);
    expect(c.classesDir).toBe('/env/classes');
    expect(c.sweepIntervalMs).toBe(5 * 60_000);
    expect(c.identity).toEqual(['apikey']);
    expect(c.apikeysFile).toBe('/env/keys.yaml');
    expect(c.tlsCert).toBe('/env/cert.pem');
    expect(c.tlsKey).toBe('/env/key.pem');
  });

  it('flags override the environment', () => {
    const c = parseConfig(
      [
        '--database-url', 'postgres://flag@h/db',
        '--listen', '127.0.0.2:7000',
        '--grpc-port', '7001',
        '--metrics-port', '7002',
        '--max-conns', '3',
        '--classes', '/flag/classes',
        '--sweep-interval', '90s',
        '--identity', 'apikey,k8s-sa',
        '--apikeys', '/flag/keys.yaml',
        '--tls-cert', '/flag/cert.pem',
        '--tls-key', '/flag/key.pem',
      ],
      env,
    );
    expect(c.databaseUrl).toBe('postgres://flag@h/db');
    expect(c.listenHost).toBe('127.0.0.2');
    expect(c.listenPort).toBe(7000);
    expect(c.grpcPort).toBe(7001);
    expect(c.metricsPort).toBe(7002);
    expect(c.maxConns).toBe(3);
    expect(c.classesDir).toBe('/flag/classes');
    expect(c.sweepIntervalMs).toBe(90_000);
    expect(c.identity).toEqual(['apikey', 'k8s-sa']);
    expect(c.apikeysFile).toBe('/flag/keys.yaml');
    expect(c.tlsCert).toBe('/flag/cert.pem');
    expect(c.tlsKey).toBe('/flag/key.pem');
  });

  it('--flag=value form works too', () => {
    expect(parseConfig(['--metrics-port=9200'], {}).metricsPort).toBe(9200);
  });

  it('a flag given for one key leaves the others to the environment', () => {
    const c = parseConfig(['--grpc-port', '5'], { KSLATE_METRICS_PORT: '6' });
    expect(c.grpcPort).toBe(5);
    expect(c.metricsPort).toBe(6);
    expect(c.listenPort).toBe(8080);
  });
});

describe('bad values fail naming the flag and its variable', () => {
  const cases: [string, string, string, string][] = [
    // flag, env var, bad value, description
    ['grpc-port', 'KSLATE_GRPC_PORT', 'abc', 'not a number'],
    ['grpc-port', 'KSLATE_GRPC_PORT', '70000', 'port out of range'],
    ['metrics-port', 'KSLATE_METRICS_PORT', '-1', 'negative'],
    ['metrics-port', 'KSLATE_METRICS_PORT', '9100.5', 'fraction'],
    ['max-conns', 'KSLATE_MAX_CONNS', 'lots', 'not a number'],
    ['max-conns', 'KSLATE_MAX_CONNS', '0', 'zero connections'],
    ['listen', 'KSLATE_LISTEN', 'localhost', 'no port'],
    ['listen', 'KSLATE_LISTEN', '127.0.0.1:99999', 'port out of range'],
    ['sweep-interval', 'KSLATE_SWEEP_INTERVAL', 'soon', 'not a duration'],
    ['header-timeout', 'KSLATE_HEADER_TIMEOUT', '10', 'a number without unit'],
    ['header-timeout', 'KSLATE_HEADER_TIMEOUT', '0', 'zero'],
    ['request-timeout', 'KSLATE_REQUEST_TIMEOUT', 'long', 'not a duration'],
    ['request-timeout', 'KSLATE_REQUEST_TIMEOUT', '5s', 'shorter than the header timeout'],
    ['identity', 'KSLATE_IDENTITY', 'magic', 'unknown provider'],
  ];

  for (const [flag, envVar, value, what] of cases) {
    it(`--${flag} ${value} (${what}) as a flag`, () => {
      // `--flag=value`, so that a value starting with a dash is still the flag's value.
      const e = configError(() => parseConfig([`--${flag}=${value}`], {}));
      expect(e.message).toContain(`--${flag}`);
      expect(e.message).toContain(envVar);
    });
    it(`${envVar}=${value} (${what}) from the environment`, () => {
      const e = configError(() => parseConfig([], { [envVar]: value }));
      expect(e.message).toContain(`--${flag}`);
      expect(e.message).toContain(envVar);
    });
  }

  it('an unknown flag is a ConfigError', () => {
    configError(() => parseConfig(['--no-such-flag', 'x'], {}));
  });

  it('a positional argument is a ConfigError', () => {
    configError(() => parseConfig(['stray'], {}));
  });
});

describe('TLS needs both files', () => {
  it('--tls-cert without --tls-key throws, naming both', () => {
    const e = configError(() => parseConfig(['--tls-cert', '/c.pem'], {}));
    expect(e.message).toContain('--tls-key');
    expect(e.message).toContain('--tls-cert');
  });
  it('--tls-key without --tls-cert throws', () => {
    const e = configError(() => parseConfig(['--tls-key', '/k.pem'], {}));
    expect(e.message).toContain('--tls-cert');
  });
  it('KSLATE_TLS_CERT without a key throws too', () => {
    configError(() => parseConfig([], { KSLATE_TLS_CERT: '/c.pem' }));
  });
  it('both given is fine', () => {
    const c = parseConfig(['--tls-cert', '/c.pem', '--tls-key', '/k.pem'], {});
    expect(c.tlsCert).toBe('/c.pem');
    expect(c.tlsKey).toBe('/k.pem');
  });
});

describe('--sweep-interval (worker.interval, a duration)', () => {
  it.each([
    ['60s', 60_000],
    ['90s', 90_000],
    ['5m', 300_000],
    ['1h30m', 5_400_000],
    ['1h', 3_600_000],
  ])('accepts %s', (s, ms) => {
    expect(parseConfig(['--sweep-interval', s], {}).sweepIntervalMs).toBe(ms);
  });

  it.each(['garbage', '10 s', 's', '-5s', '1x', '5 minutes'])('rejects %j', (s) => {
    const e = configError(() => parseConfig([`--sweep-interval=${s}`], {}));
    expect(e.message).toContain('--sweep-interval');
    expect(e.message).toContain('KSLATE_SWEEP_INTERVAL');
  });

  it('is off when not given', () => {
    expect(parseConfig([], {}).sweepIntervalMs).toBeUndefined();
  });
});

describe('--log-level (validated at parse time)', () => {
  it.each(['debug', 'info', 'warn', 'error'])('accepts %s, from the flag or KSLATE_LOG_LEVEL', (level) => {
    expect(parseConfig(['--log-level', level], {}).logLevel).toBe(level);
    expect(parseConfig([], { KSLATE_LOG_LEVEL: level }).logLevel).toBe(level);
  });
  it('defaults to info', () => {
    expect(parseConfig([], {}).logLevel).toBe('info');
  });
  it.each(['verbose', 'INFO', 'trace', ''])('rejects %j naming the allowed levels', (level) => {
    const e = configError(() => parseConfig([], { KSLATE_LOG_LEVEL: level }));
    expect(e.message).toContain('--log-level (KSLATE_LOG_LEVEL)');
    expect(e.message).toContain('debug, info, warn, error');
  });
});

describe('--drain-timeout and --db-timeout (durations)', () => {
  it('default to 25s (below Kubernetes’ 30 s grace) and 10s', () => {
    const c = parseConfig([], {});
    expect(c.drainTimeoutMs).toBe(25_000);
    expect(c.dbTimeoutMs).toBe(10_000);
  });
  it('take a flag or a variable', () => {
    expect(parseConfig(['--drain-timeout', '5s'], {}).drainTimeoutMs).toBe(5_000);
    expect(parseConfig([], { KSLATE_DRAIN_TIMEOUT: '1m' }).drainTimeoutMs).toBe(60_000);
    expect(parseConfig(['--db-timeout', '500ms'], {}).dbTimeoutMs).toBe(500);
    expect(parseConfig([], { KSLATE_DB_TIMEOUT: '2s' }).dbTimeoutMs).toBe(2_000);
  });
  it.each([
    ['drain-timeout', 'KSLATE_DRAIN_TIMEOUT'],
    ['db-timeout', 'KSLATE_DB_TIMEOUT'],
  ])('--%s rejects a non-duration or zero naming the flag and %s', (flag, env) => {
    for (const bad of ['25', 'soon', '0', '-1s']) {
      const e = configError(() => parseConfig([`--${flag}=${bad}`], {}));
      expect(e.message).toContain(`--${flag} (${env})`);
    }
  });
});

describe('--db-pool-size (KSLATE_DB_POOL_SIZE)', () => {
  it('defaults to 10 and takes a flag or the variable', () => {
    expect(parseConfig([], {}).dbPoolSize).toBe(10);
    expect(parseConfig(['--db-pool-size', '4'], {}).dbPoolSize).toBe(4);
    expect(parseConfig([], { KSLATE_DB_POOL_SIZE: '32' }).dbPoolSize).toBe(32);
  });
  it('rejects anything but an integer from 1 to 1000, naming the flag and variable', () => {
    for (const bad of ['0', '-1', '1001', '2.5', 'many']) {
      const e = configError(() => parseConfig([`--db-pool-size=${bad}`], {}));
      expect(e.message).toContain('--db-pool-size (KSLATE_DB_POOL_SIZE)');
    }
  });
});

describe('--dev-pg-port (KSLATE_DEV_PG_PORT)', () => {
  it('defaults to 54329 and takes a flag or the variable', () => {
    expect(parseConfig([], {}).devPgPort).toBe(54329);
    expect(parseConfig(['--dev-pg-port', '6543'], {}).devPgPort).toBe(6543);
    expect(parseConfig([], { KSLATE_DEV_PG_PORT: '6544' }).devPgPort).toBe(6544);
  });
  it('rejects a bad port naming both', () => {
    const e = configError(() => parseConfig(['--dev-pg-port', '70000'], {}));
    expect(e.message).toContain('--dev-pg-port (KSLATE_DEV_PG_PORT)');
  });
});

describe('--k8s-audience (KSLATE_K8S_AUDIENCE)', () => {
  it('defaults to kslate; the flag beats the variable', () => {
    expect(parseConfig([], {}).k8sAudience).toBe('kslate');
    expect(parseConfig([], { KSLATE_K8S_AUDIENCE: 'env-aud' }).k8sAudience).toBe('env-aud');
    expect(parseConfig(['--k8s-audience', 'flag-aud'], { KSLATE_K8S_AUDIENCE: 'env-aud' }).k8sAudience).toBe('flag-aud');
  });

  it('refuses an empty audience, naming the flag and variable', () => {
    const e = configError(() => parseConfig(['--k8s-audience', ' '], {}));
    expect(e.message).toContain('--k8s-audience (KSLATE_K8S_AUDIENCE)');
  });
});

describe('--ui (KSLATE_UI): the web console at /ui', () => {
  it('is on by default; --ui=false or KSLATE_UI=false turns it off; the flag beats the variable', () => {
    expect(parseConfig([], {}).ui).toBe(true);
    expect(parseConfig(['--ui=false'], {}).ui).toBe(false);
    expect(parseConfig([], { KSLATE_UI: 'false' }).ui).toBe(false);
    expect(parseConfig(['--ui', 'true'], { KSLATE_UI: 'false' }).ui).toBe(true);
  });

  it('refuses anything but true or false, naming the flag and variable', () => {
    const e = configError(() => parseConfig(['--ui=no'], {}));
    expect(e.message).toContain('--ui (KSLATE_UI) must be true or false');
  });
});

describe('stream limits (issue 31): per-caller caps, sizes, ages', () => {
  it('per-identity caps default to 256 streams and 64 sessions, lowered to a smaller process-wide cap; one above it is refused naming both', () => {
    const d = parseConfig([], {});
    expect([d.watchMaxStreamsPerIdentity, d.mcpMaxSessionsPerIdentity]).toEqual([256, 64]);
    const small = parseConfig(['--watch-max-streams', '10', '--mcp-max-sessions', '5'], {});
    expect([small.watchMaxStreamsPerIdentity, small.mcpMaxSessionsPerIdentity]).toEqual([10, 5]);
    expect(parseConfig([], { KSLATE_WATCH_MAX_STREAMS_PER_IDENTITY: '7' }).watchMaxStreamsPerIdentity).toBe(7);
    const e = configError(() => parseConfig(['--watch-max-streams', '10', '--watch-max-streams-per-identity', '20'], {}));
    expect(e.message).toContain('--watch-max-streams-per-identity (KSLATE_WATCH_MAX_STREAMS_PER_IDENTITY) must be at most --watch-max-streams');
    expect(configError(() => parseConfig(['--mcp-max-sessions-per-identity', '0'], {})).message).toContain('KSLATE_MCP_MAX_SESSIONS_PER_IDENTITY');
  });

  it('--max-conns-per-address: 256 by default, none behind a trusted proxy unless given, 0 turns it off, never above --max-conns', () => {
    expect(parseConfig([], {}).maxConnsPerAddress).toBe(256);
    expect(parseConfig(['--max-conns', '100'], {}).maxConnsPerAddress).toBe(100);
    expect(parseConfig(['--trust-proxy', '1'], {}).maxConnsPerAddress).toBe(0);
    expect(parseConfig(['--trust-proxy', '1', '--max-conns-per-address', '500'], {}).maxConnsPerAddress).toBe(500);
    expect(parseConfig([], { KSLATE_MAX_CONNS_PER_ADDRESS: '0' }).maxConnsPerAddress).toBe(0);
    const e = configError(() => parseConfig(['--max-conns', '100', '--max-conns-per-address', '101'], {}));
    expect(e.message).toContain('--max-conns-per-address (KSLATE_MAX_CONNS_PER_ADDRESS) must be at most --max-conns');
  });

  it('buffer sizes take bytes or Ki, Mi, Gi; durations for the slow timeout and the maximum age', () => {
    const d = parseConfig([], {});
    expect([d.watchStreamBufferBytes, d.watchBufferBytes, d.watchSlowTimeoutMs, d.watchMaxAgeMs]).toEqual([2 ** 20, 64 * 2 ** 20, 30_000, 3_600_000]);
    const c = parseConfig(['--watch-stream-buffer', '256Ki', '--watch-buffer', '1Gi', '--watch-slow-timeout', '5s', '--watch-max-age', '10m'], {});
    expect([c.watchStreamBufferBytes, c.watchBufferBytes, c.watchSlowTimeoutMs, c.watchMaxAgeMs]).toEqual([2 ** 18, 2 ** 30, 5_000, 600_000]);
    expect(parseConfig(['--watch-buffer', '4096'], {}).watchBufferBytes).toBe(4096);
    for (const bad of ['lots', '1MB', '100', '-1Mi', '']) {
      expect(configError(() => parseConfig([`--watch-buffer=${bad}`], {})).message).toContain('--watch-buffer (KSLATE_WATCH_BUFFER) must be a size');
    }
    expect(configError(() => parseConfig(['--watch-max-age', 'forever'], {})).message).toContain('--watch-max-age (KSLATE_WATCH_MAX_AGE)');
  });
});

describe('--ui-session-ttl (KSLATE_UI_SESSION_TTL): how long a console sign-in lasts', () => {
  it('is 8h by default; the flag beats the variable', () => {
    expect(parseConfig([], {}).uiSessionTtlMs).toBe(8 * 3600_000);
    expect(parseConfig([], { KSLATE_UI_SESSION_TTL: '30m' }).uiSessionTtlMs).toBe(30 * 60_000);
    expect(parseConfig(['--ui-session-ttl', '12h'], { KSLATE_UI_SESSION_TTL: '30m' }).uiSessionTtlMs).toBe(12 * 3600_000);
  });

  it('refuses a lifetime under 1s or over 720h, or not a duration, naming the flag and variable', () => {
    for (const bad of ['500ms', '721h', 'forever', '0']) {
      const e = configError(() => parseConfig(['--ui-session-ttl', bad], {}));
      expect(e.message).toContain('--ui-session-ttl (KSLATE_UI_SESSION_TTL) must be');
    }
  });
});

describe('README configuration table', () => {
  it('lists every flag with its variable and default, as FLAGS (and `kslate help`) do', async () => {
    const { readFileSync } = await import('node:fs');
    const { FLAGS } = await import('../../runtime/config.js');
    const readme = readFileSync(new URL('../../README.md', import.meta.url), 'utf8');
    for (const [flag, spec] of Object.entries(FLAGS)) {
      const row = readme.split('\n').find((l) => l.startsWith('|') && l.includes(`\`--${flag}\``));
      expect(row, `README has no table row for --${flag}`).toBeTruthy();
      expect(row).toContain(`\`${spec.env}\``);
      if (spec.default !== undefined) expect(row).toContain(`\`${spec.default}\``);
    }
  });
});

describe('standbys for reads (docs/ha.md "Reads from standbys")', () => {
  it('takes --database-replica-url repeated, or KSLATE_DATABASE_REPLICA_URL as a comma-separated list; the flags beat the variable', () => {
    expect(parseConfig([], {}).databaseReplicaUrls).toEqual([]);
    expect(parseConfig([], {}).writeLsn).toBe('auto');
    expect(parseConfig(['--write-lsn', 'on'], {}).writeLsn).toBe('on');
    expect(() => parseConfig(['--write-lsn', 'yes'], {})).toThrow(/--write-lsn \(KSLATE_WRITE_LSN\) must be auto, on or off/);
    expect(parseConfig(['--database-replica-url', 'postgres://a/db', '--database-replica-url', 'postgresql://b/db'], {}).databaseReplicaUrls).toEqual([
      'postgres://a/db',
      'postgresql://b/db',
    ]);
    expect(parseConfig([], { KSLATE_DATABASE_REPLICA_URL: 'postgres://a/db, postgres://b/db,' }).databaseReplicaUrls).toEqual(['postgres://a/db', 'postgres://b/db']);
    expect(parseConfig(['--database-replica-url', 'postgres://f/db'], { KSLATE_DATABASE_REPLICA_URL: 'postgres://a/db' }).databaseReplicaUrls).toEqual([
      'postgres://f/db',
    ]);
    const e = configError(() => parseConfig(['--database-replica-url', 'mysql://x/db'], {}));
    expect(e.message).toContain('--database-replica-url (KSLATE_DATABASE_REPLICA_URL) must be a postgres:// connection string');
  });

  it('bounds untokened standby reads by --replica-max-lag (1s) and tokened waits by --replica-wait (50ms)', () => {
    const d = parseConfig([], {});
    expect([d.replicaMaxLagMs, d.replicaWaitMs]).toEqual([1000, 50]);
    const c = parseConfig(['--replica-max-lag', '250ms'], { KSLATE_REPLICA_WAIT: '200ms' });
    expect([c.replicaMaxLagMs, c.replicaWaitMs]).toEqual([250, 200]);
    expect(configError(() => parseConfig(['--replica-max-lag', 'soon'], {})).message).toContain('--replica-max-lag (KSLATE_REPLICA_MAX_LAG) must be a duration');
  });
});

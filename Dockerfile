# The kslate image (gateway, worker and CLI): docker build -t kslate:0.9.0 .
# Exec form everywhere: no shell runs at build or run time.
# Base: node:24-slim, the Node.js LTS line .ci/run runs the whole suite on (maintained until
# April 2028). The tag names the line, not a patch release, so a rebuild takes the line's
# security fixes; README, "Node.js versions", says which lines are supported.

# --- build: compile TypeScript to dist/ ---
FROM node:24-slim AS build
WORKDIR /src
COPY package.json package-lock.json ./
# --ignore-scripts: `prepare` would build before the sources are here, and no install
# script (embedded-postgres binaries, protobufjs) is needed to compile.
RUN ["npm", "ci", "--ignore-scripts", "--no-audit", "--no-fund"]
COPY tsconfig.json tsconfig.build.json ./
COPY handlers handlers
COPY runtime runtime
COPY db db
COPY worker worker
RUN ["npm", "run", "build"]

# --- deps: production dependencies only ---
FROM node:24-slim AS deps
WORKDIR /app
COPY package.json package-lock.json ./
# --omit=optional leaves out embedded-postgres' PostgreSQL binaries (@embedded-postgres/<platform>,
# ~60 MB; only `kslate dev` uses them, so `kslate dev` does not run in this image) and
# pg-cloudflare (Workers only). --ignore-scripts skips `prepare` and install scripts.
RUN ["npm", "ci", "--omit=dev", "--omit=optional", "--ignore-scripts", "--no-audit", "--no-fund"]

# --- runtime ---
FROM node:24-slim
ENV NODE_ENV=production
# Listen on every interface: the default 127.0.0.1 is unreachable from outside a container.
# Flags (--listen) override it; the metrics and worker health ports use the same host.
ENV KSLATE_LISTEN=0.0.0.0:8080
WORKDIR /app
# Files stay owned by root and read-only for the runtime user.
COPY --from=deps /app/node_modules node_modules
COPY package.json package-lock.json ./
COPY bin bin
# The gRPC transport loads proto/ at run time (runtime/grpc/proto.ts).
COPY proto proto
COPY --from=build /src/dist dist
RUN ["groupadd", "--gid", "10001", "kslate"]
RUN ["useradd", "--uid", "10001", "--gid", "10001", "--no-create-home", "--home-dir", "/nonexistent", "--shell", "/usr/sbin/nologin", "kslate"]
USER 10001
# 8080: HTTP/JSON and MCP; 9100: /metrics, /readyz, /healthz. gRPC (--grpc-port) and the
# worker's ports (8081, 9090) are opened by flags.
EXPOSE 8080 9100
ENTRYPOINT ["node", "/app/bin/kslate.js"]
CMD ["serve"]

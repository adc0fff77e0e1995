# syntax=docker/dockerfile:1
# The gateway image: Bun runtime, dependencies installed exactly as package-lock.json pins them,
# running as the unprivileged `bun` user.

# 1. Dependencies: `npm ci` against the lockfile, production dependencies only. (The runtime
#    image ships Bun but not npm, and Bun's own installer does not honour package-lock.json.)
FROM node:22-bookworm-slim AS deps
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --ignore-scripts --no-audit --no-fund

# 2. Runtime.
FROM oven/bun:1.4 AS runtime
# BUN_CONFIG_MAX_HTTP_REQUESTS: Bun's fetch runs at most 256 upstream requests at once by default and
# queues the rest; every stream holds one for its whole length (docs/operations.md).
ENV NODE_ENV=production \
    PORT=8080 \
    HOST=0.0.0.0 \
    DATA_DIR=/app/data \
    BUN_CONFIG_MAX_HTTP_REQUESTS=65535
WORKDIR /app
COPY --from=deps --chown=bun:bun /app/node_modules ./node_modules
COPY --chown=bun:bun package.json package-lock.json tsconfig.json ./
# src/ includes the SQL migrations (src/store/db/migrations), applied at start.
COPY --chown=bun:bun src ./src
RUN mkdir -p /app/data && chown bun:bun /app/data
USER bun
EXPOSE 8080
# DATA_DIR holds the embedded database when DATABASE_URL is unset, and the mail outbox.
VOLUME ["/app/data"]
# The image has no curl; Bun's fetch asks the liveness endpoint.
HEALTHCHECK --interval=10s --timeout=3s --start-period=30s --retries=3 \
  CMD ["bun", "-e", "fetch('http://127.0.0.1:' + (process.env.PORT || 8080) + '/healthz').then(r => process.exit(r.ok ? 0 : 1), () => process.exit(1))"]
# Exec form: Bun is PID 1 and receives SIGTERM itself, so shutdown drains (src/main.ts).
CMD ["bun", "src/main.ts"]

# The payment service's image (docs/operations.md, "Container image"). No line here goes untested:
# .ci/image-steps performs each one on the CI machine, in order, and fails on a line it does not know.
# `docker compose up --build` (compose.yaml) runs it with PostgreSQL, Redis and the migration job.

# Build: every dependency from the lockfile, then TypeScript compiles src/ and gen/ into dist/.
FROM node:20-bookworm-slim AS build
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json ./
COPY src ./src
COPY gen ./gen
RUN npm run build

# Runtime: production dependencies only (Redoc's page bundle is read from node_modules at start-up),
# the build, tini as PID 1 (it forwards SIGTERM to node and reaps), and a user that is not root.
FROM node:20-bookworm-slim AS runtime
RUN apt-get update && apt-get install -y --no-install-recommends tini && rm -rf /var/lib/apt/lists/*
RUN useradd --user-group --uid 10001 --home-dir /nonexistent --no-create-home --shell /usr/sbin/nologin payments
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --no-audit --no-fund
COPY --from=build /app/dist ./dist
ENV PORT=8080
EXPOSE 8080
# By number, so an orchestrator can tell it is not root (Kubernetes' runAsNonRoot).
USER 10001
HEALTHCHECK --interval=10s --timeout=3s --start-period=60s --retries=3 CMD ["node", "-e", "fetch('http://127.0.0.1:' + process.env.PORT + '/readyz', { signal: AbortSignal.timeout(2500) }).then((res) => process.exit(res.ok ? 0 : 1), () => process.exit(1))"]
ENTRYPOINT ["/usr/bin/tini", "--"]
CMD ["node", "dist/src/server.js"]

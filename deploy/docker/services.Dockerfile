# One image for the project's services; SERVICE picks which one runs (gateway,
# ingester or admin). Runs the built JavaScript (`node services/<service>/dist/server.js`)
# under tini, as the unprivileged `node` user, with production dependencies only.
#
# The build context is the production tree that `npm run images` stages on the host
# (.stack/docker/images/context/services, made by scripts/lib/production-tree.ts after
# `npm run build`): dist/ of each workspace the services load, the schemas, migrations
# and price table they read, and `npm ci --omit=dev`. Compiling and installing there
# keeps this build free of network access, so it is a single stage: the build stage is
# the host's. BASE: any image with Node.js 22 or later and a `node` user (the default,
# the official image); `npm run images` passes its own, made from Debian's packages,
# which already holds tini.
ARG BASE=node:24-bookworm-slim
FROM ${BASE}
RUN command -v tini >/dev/null || (apt-get update && apt-get install -y --no-install-recommends tini && rm -rf /var/lib/apt/lists/*)
WORKDIR /app
# Owned by root: the service can read its code, never change it.
COPY . .
ENV NODE_ENV=production SERVICE=gateway
USER node
# tini is PID 1: it forwards SIGTERM to node (whose handlers drain and stop) and reaps
# what exits, such as the gateway's cluster workers.
ENTRYPOINT ["tini", "--"]
# --disable-warning: kafkajs arms a timer with a negative delay (scripts/lib/service-process.ts).
CMD ["sh", "-c", "exec node --disable-warning=TimeoutNegativeWarning services/${SERVICE}/dist/server.js"]

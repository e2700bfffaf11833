# One image for the project's services; SERVICE picks which one runs (gateway,
# ingester or admin). Runs the TypeScript sources with tsx.
#
# The build context is staged by `npm run images` (.stack/docker/context/services):
# the sources and production node_modules installed on the host, so the build needs
# no network. BASE: any image with Node.js 22 or later and a `node` user (the default,
# the official image); `npm run images` passes its own, made from Debian's packages.
ARG BASE=node:24-bookworm-slim
FROM ${BASE}
WORKDIR /app
COPY --chown=node:node . .
ENV NODE_ENV=production SERVICE=gateway
USER node
CMD ["sh", "-c", "exec node --import tsx services/${SERVICE}/src/server.ts"]

# Redis for dedupe keys and API keys: append-only, never evicting. BASE: any image
# with `redis-server` on the PATH (default: the official image; `npm run images`
# passes one made from Debian's packages).
ARG BASE=redis:7
FROM ${BASE}
RUN mkdir -p /data
EXPOSE 6379
CMD ["redis-server", "--bind", "0.0.0.0", "--protected-mode", "no", "--dir", "/data", "--appendonly", "yes", "--appendfsync", "everysec", "--maxmemory", "1gb", "--maxmemory-policy", "noeviction"]

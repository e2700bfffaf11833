# ClickHouse with the project's configuration (works on 18.16, Debian's, and current
# releases). Context staged by `npm run images`: config.xml, users.xml. BASE: any image
# with `clickhouse-server` on the PATH (default: the official image; `npm run images`
# passes one made from Debian's packages).
ARG BASE=clickhouse/clickhouse-server:24.8
FROM ${BASE}
COPY config.xml users.xml /etc/otm-clickhouse/
RUN mkdir -p /var/lib/otm-clickhouse/log /var/lib/otm-clickhouse/data /var/lib/otm-clickhouse/tmp /var/lib/otm-clickhouse/user_files /var/lib/otm-clickhouse/format_schemas
EXPOSE 8123 9000
ENTRYPOINT []
CMD ["clickhouse-server", "--config-file=/etc/otm-clickhouse/config.xml"]

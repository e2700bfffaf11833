# Apicurio Registry 3 (Confluent-compatible API under /apis/ccompat/v7), from the
# application the local stack fetches from Maven Central. Context staged by
# `npm run images`: app/. BASE: any image with a Java 17+ `java` on the PATH.
ARG BASE=eclipse-temurin:17-jre
FROM ${BASE}
COPY app/ /opt/registry/
WORKDIR /opt/registry
EXPOSE 8080
CMD ["sh", "-c", "exec java -Xmx384m -XX:TieredStopAtLevel=1 -Dquarkus.http.host=0.0.0.0 -Dquarkus.http.port=8080 -Dapicurio.storage.kind=sql -Dapicurio.storage.sql.kind=h2 -Dapicurio.datasource.url=jdbc:h2:file:/var/lib/registry/db -Dapicurio.datasource.username=sa -Dapicurio.datasource.password=sa -Dapicurio.ccompat.legacy-id-mode.enabled=false -Dquarkus.log.level=WARN -jar $(ls quarkus-run.jar *-runner.jar 2>/dev/null | head -n 1)"]

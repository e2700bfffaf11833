# Apache Kafka, one node in KRaft mode (broker and controller), from the jars the
# local stack fetches from Maven Central (deploy/maven/pom.xml). Context staged by
# `npm run images`: libs/, log4j2.yaml, kafka-start.sh. BASE: any image with a Java 17+
# `java` on the PATH (default: the official Temurin JRE; `npm run images` passes one
# made from Debian's packages).
ARG BASE=eclipse-temurin:17-jre
FROM ${BASE}
COPY libs/ /opt/kafka/libs/
COPY log4j2.yaml kafka-start.sh /opt/kafka/
# The port is both the listener and the advertised one: publish it on the same host port.
ENV KAFKA_PORT=9092 KAFKA_ADVERTISED_HOST=127.0.0.1 KAFKA_HEAP_MB=512
ENTRYPOINT ["/bin/sh", "/opt/kafka/kafka-start.sh"]

#!/bin/sh
# One Kafka node in KRaft mode: writes its properties, formats the storage once, runs.
set -eu
data=/var/lib/kafka
mkdir -p "$data"
# KAFKA_INTERNAL_HOST: a second listener (port 9094) advertised under that name, for
# containers on the same network; the first is for clients on the host.
internal_listener=""
internal_advertised=""
if [ -n "${KAFKA_INTERNAL_HOST:-}" ]; then
  internal_listener=",INTERNAL://0.0.0.0:9094"
  internal_advertised=",INTERNAL://${KAFKA_INTERNAL_HOST}:9094"
fi
cat > /opt/kafka/server.properties <<PROPERTIES
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@127.0.0.1:9093
listeners=PLAINTEXT://0.0.0.0:${KAFKA_PORT},CONTROLLER://127.0.0.1:9093${internal_listener}
advertised.listeners=PLAINTEXT://${KAFKA_ADVERTISED_HOST}:${KAFKA_PORT}${internal_advertised}
controller.listener.names=CONTROLLER
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT,INTERNAL:PLAINTEXT
inter.broker.listener.name=PLAINTEXT
log.dirs=$data
num.partitions=1
offsets.topic.replication.factor=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
default.replication.factor=1
min.insync.replicas=1
group.initial.rebalance.delay.ms=0
auto.create.topics.enable=false
message.max.bytes=16777216
replica.fetch.max.bytes=16777216
PROPERTIES
classpath='/opt/kafka/libs/*'
if [ ! -f "$data/meta.properties" ]; then
  id=$(java -cp "$classpath" kafka.tools.StorageTool random-uuid | tail -n 1)
  java -cp "$classpath" kafka.tools.StorageTool format -t "$id" -c /opt/kafka/server.properties
fi
exec java "-Xmx${KAFKA_HEAP_MB}m" -Dlog4j2.configurationFile=/opt/kafka/log4j2.yaml -cp "$classpath" kafka.Kafka /opt/kafka/server.properties

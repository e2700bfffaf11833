// The ingester's stages on the real services: the ports (ports.ts) implemented with
// the registry, ClickHouse and Kafka (Redis's is dedupe-step.ts, the erasures' the
// shared RollupFence). server.ts wires them; the unit tests use stand-ins in memory.
import type { ClickHouseClient } from '@otm/shared/clickhouse';
import type { RecordSender } from '@otm/shared/kafka';
import { recountRollups, type RepairFence } from '@otm/shared/rollups/repair';
import { decodeKnown, decodeStep, type SchemaCache } from './decode-step.js';
import { sendDeadLetters } from './dead-letter.js';
import { DEFAULT_KEY_LOOKUP, type KeyLookup } from './key-lookup.js';
import { insertLines, loadIsolatingBadRows } from './load-step.js';
import type { DeadLetter } from './outcome.js';
import type { DeadLetterSink, EventStore, RecordDecoder, Unanswered } from './ports.js';
import type { EncodedRow } from './rows.js';

export class RegistryDecoder implements RecordDecoder {
  constructor(private readonly schemas: SchemaCache) {}
  decode(value: Buffer | null) {
    return decodeStep(value, this.schemas);
  }
  decodeKnown(value: Buffer | null) {
    return decodeKnown(value, this.schemas);
  }
}

export class ClickHouseEventStore implements EventStore {
  constructor(
    private readonly clickhouse: ClickHouseClient,
    private readonly fence: RepairFence,
    private readonly cluster = '',
    private readonly lookup: KeyLookup = DEFAULT_KEY_LOOKUP,
  ) {}
  load<T>(items: readonly T[], rowOf: (item: T) => EncodedRow, unanswered: Unanswered) {
    return loadIsolatingBadRows(this.clickhouse, items, rowOf, unanswered, this.lookup);
  }
  recount(eventKeys: readonly string[], unanswered: Unanswered) {
    return recountRollups(this.clickhouse, this.fence, eventKeys, { unansweredQueryIds: [...unanswered.queryIds], cluster: this.cluster });
  }
  insertProbes(lines: readonly string[]) {
    return insertLines(this.clickhouse, 'canary_probes', lines);
  }
}

export class KafkaDeadLetters implements DeadLetterSink {
  constructor(
    private readonly sender: RecordSender,
    private readonly topic: string,
  ) {}
  send(letters: readonly DeadLetter[]) {
    return sendDeadLetters(this.sender, this.topic, letters);
  }
}

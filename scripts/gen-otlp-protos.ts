// npm run gen:otlp-protos: the official OTLP protobuf definitions the gateway decodes
// OTLP/HTTP with (services/gateway/src/otlp.ts), copied into schemas/otlp/ from the
// jars published on Maven Central, where the OpenTelemetry and Google API projects ship
// their .proto files. Run it to move to another version; `-- --check` says whether the
// copies in schemas/otlp/ are those of the pinned versions.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Command } from 'commander';
import { projectRoot as root } from './lib/project-root.js';

const target = path.join(root, 'schemas/otlp');

/** Each jar and the definitions taken from it: the trace service and what it imports, and the error Status. */
const SOURCES = [
  {
    artifact: 'io.opentelemetry.proto:opentelemetry-proto:1.8.0-alpha',
    files: [
      'opentelemetry/proto/collector/trace/v1/trace_service.proto',
      'opentelemetry/proto/trace/v1/trace.proto',
      'opentelemetry/proto/common/v1/common.proto',
      'opentelemetry/proto/resource/v1/resource.proto',
    ],
  },
  { artifact: 'com.google.api.grpc:proto-google-common-protos:2.63.2', files: ['google/rpc/status.proto'] },
];

const options = new Command('gen:otlp-protos')
  .description('Copy the OTLP trace protobuf definitions from their Maven Central jars into schemas/otlp/')
  .option('--check', 'compare instead of writing; exit 1 on a difference')
  .parse(process.argv)
  .opts<{ check?: boolean }>();

const work = fs.mkdtempSync(path.join(os.tmpdir(), 'otlp-protos-'));
let differs = false;
try {
  for (const source of SOURCES) {
    execFileSync(
      'mvn',
      [
        '-q',
        '-B',
        'org.apache.maven.plugins:maven-dependency-plugin:2.8:copy',
        `-Dartifact=${source.artifact}`,
        `-DoutputDirectory=${work}`,
      ],
      { stdio: 'inherit' },
    );
    const [, artifactId, version] = source.artifact.split(':');
    const jar = path.join(work, `${artifactId}-${version}.jar`);
    for (const file of source.files) {
      const text = execFileSync('unzip', ['-p', jar, file], { encoding: 'utf8' });
      const copy = path.join(target, file);
      if (options.check) {
        if (!fs.existsSync(copy) || fs.readFileSync(copy, 'utf8') !== text) {
          console.error(`${path.relative(root, copy)} differs from ${source.artifact}`);
          differs = true;
        }
        continue;
      }
      fs.mkdirSync(path.dirname(copy), { recursive: true });
      fs.writeFileSync(copy, text);
      console.log(`${path.relative(root, copy)} <- ${source.artifact}`);
    }
  }
} finally {
  fs.rmSync(work, { recursive: true, force: true });
}
if (differs) process.exitCode = 1;

// The register-schemas command: registers the schemas this release writes, with their
// subjects' compatibility — the deploy step when the services run with
// SCHEMA_REGISTRY_REGISTER=false (rights to read the registry only; docs/production.md):
// the queued record under SCHEMA_SUBJECT and the erasure announcement under
// <ERASURE_TOPIC>-value. Run by `npm run register-schemas` in a checkout and, from the
// services image, by `node services/ingester/dist/register-schemas.js` (the chart's
// migration Job, after the migrations).
import { parseArgs } from 'node:util';
import { buildQueuedRecordSchema, erasureAnnouncementSchema } from '@otm/schemas';
import { infrastructureSpec, parseConfig } from './config.js';
import { registryFailure, runCommand } from './dependency-failure.js';
import { createRegistry, registerJsonSchema, registryAccessFrom } from './registry.js';

const USAGE = `Usage: register-schemas

Register the schemas this release writes (the queued record under SCHEMA_SUBJECT, the
erasure announcement under <ERASURE_TOPIC>-value) and set their subjects' compatibility;
needs rights to write the registry (SCHEMA_REGISTRY_* variables say where and as whom).`;

export async function runRegisterSchemasCommand(argv: readonly string[], env: NodeJS.ProcessEnv = process.env): Promise<void> {
  await runCommand('register-schemas', async () => {
    const { values } = parseArgs({ args: [...argv], options: { help: { type: 'boolean', short: 'h' } }, strict: true });
    if (values.help) {
      console.log(USAGE);
      return;
    }
    const config = parseConfig(env, infrastructureSpec);
    const registry = createRegistry(config.SCHEMA_REGISTRY_URL, registryAccessFrom(config));
    for (const [subject, schema] of [
      [config.SCHEMA_SUBJECT, buildQueuedRecordSchema()],
      [`${config.ERASURE_TOPIC}-value`, erasureAnnouncementSchema],
    ] as const) {
      const id = await registerJsonSchema(registry, subject, schema).catch((error: unknown) => {
        throw registryFailure(error, config.SCHEMA_REGISTRY_URL);
      });
      console.log(`${subject}: schema id ${id}`);
    }
  });
}

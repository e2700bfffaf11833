// Registers the schemas this release writes, with their subjects' compatibility, as the
// deploy step when the services run with SCHEMA_REGISTRY_REGISTER=false (rights to read
// the registry only; docs/production.md): the queued record under SCHEMA_SUBJECT and the
// erasure announcement under <ERASURE_TOPIC>-value.
//   npm run register-schemas
import { Command } from 'commander';
import { buildQueuedRecordSchema, erasureAnnouncementSchema } from '@otm/schemas';
import { infrastructureSpec, parseConfig } from '@otm/shared/config';
import { registryFailure, runCommand } from '@otm/shared/dependency-failure';
import { createRegistry, registerJsonSchema, registryAccessFrom } from '@otm/shared/registry';

new Command('register-schemas')
  .description(
    "register the schemas this release writes (the queued record under SCHEMA_SUBJECT, the erasure announcement under <ERASURE_TOPIC>-value) and set their subjects' compatibility; needs rights to write the registry",
  )
  .parse(process.argv);
const config = parseConfig(process.env, infrastructureSpec);
await runCommand('register-schemas', async () => {
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

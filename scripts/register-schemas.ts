// npm run register-schemas: registers the schemas this release writes, with their
// subjects' compatibility (the deploy step when the services run with
// SCHEMA_REGISTRY_REGISTER=false). The same command ships in the services image:
// node services/ingester/dist/register-schemas.js.
import { runRegisterSchemasCommand } from '@otm/shared/register-schemas-command';

await runRegisterSchemasCommand(process.argv.slice(2));

// The register-schemas command as the services image runs it (the chart's migration
// Job, after the migrations): node services/ingester/dist/register-schemas.js. Registers
// the schemas this release writes and their subjects' compatibility, then exits;
// `npm run register-schemas` runs the same command in a checkout.
import { runRegisterSchemasCommand } from '@otm/shared/register-schemas-command';

await runRegisterSchemasCommand(process.argv.slice(2));

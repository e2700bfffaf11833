// A refusal's message as the generated docs show it: a template (a message that names a
// limit or a value) with its parameters as `{name}`, and table pipes escaped.

export function messageTemplate(message: string | ((params: never) => string)): string {
  if (typeof message === 'string') return message.replace(/\|/g, '\\|');
  const names = new Proxy({}, { get: (_target, name) => `{${String(name)}}` });
  return (message as (params: unknown) => string)(names).replace(/\|/g, '\\|');
}

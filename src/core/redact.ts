// Secrets out of text the daemon keeps or shows: error messages (a runtime's failure may quote the command line it
// ran, with the child's env), log lines, records. Two guards: the values known to be secret (a task's token) wherever
// they appear, and any `NAME=value` whose name says secret (…_TOKEN, …_KEY, …SECRET…, …PASSWORD…).
export const REDACTED = "[redacted]";

/** `NAME=value` with a secret-looking name; the value ends at whitespace, a quote or a separator. */
const SECRET_ASSIGNMENT =
  /\b([A-Za-z_][A-Za-z0-9_]*(?:TOKEN|SECRET|PASSWORD|PASSWD|API_KEY|APIKEY|_KEY|CREDENTIALS?)[A-Za-z0-9_]*)=(?!\[redacted\])("[^"]*"|'[^']*'|[^\s"'`;,)\]}\\]+)/gi;

/** Known values shorter than this are not searched for (a short value would blank ordinary words). */
const MIN_KNOWN = 8;

export function redactSecrets(text: string, known: readonly (string | undefined)[] = []): string {
  let out = text;
  for (const v of known) if (v !== undefined && v.length >= MIN_KNOWN) out = out.split(v).join(REDACTED);
  return out.replace(SECRET_ASSIGNMENT, (_m, name: string) => `${name}=${REDACTED}`);
}

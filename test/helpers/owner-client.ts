// An owner connection as the owner extension makes it: the secret its first hello was issued is kept (per home and
// owner id) and presented on every later hello, the way the extension keeps it in the pi session.
import { connect, type ConnectOptions, type DaemonClient } from "../../src/client/index.js";

const secrets = new Map<string, string>();

export async function connectOwner(
  home: string,
  ownerId: string,
  opts: Omit<ConnectOptions, "kind" | "ownerId" | "secret"> = {},
): Promise<DaemonClient> {
  const key = `${home}\0${ownerId}`;
  const secret = secrets.get(key);
  const c = await connect(home, { ...opts, kind: "owner", ownerId, ...(secret ? { secret } : {}) });
  if (c.hello.secret) secrets.set(key, c.hello.secret);
  return c;
}

/** The secret kept for this owner (undefined before its first hello). */
export function ownerSecret(home: string, ownerId: string): string | undefined {
  return secrets.get(`${home}\0${ownerId}`);
}

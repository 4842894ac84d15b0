// What `dsh-herdr board` prints: the URL with its token, and for a board on a Unix socket the `ssh -L` line that
// forwards a laptop's port to it (the board takes any loopback port as its Host there).
export interface BoardAddress {
  url: string;
  socket?: string;
}

export interface BoardLink {
  url: string;
  /** On a socket: the command to run on the laptop before opening the URL there. */
  ssh?: string;
}

export function boardLink(address: BoardAddress, token: string, machine: string, user?: string): BoardLink {
  const url = `${address.url}?token=${token}`;
  if (!address.socket) return { url };
  const port = new URL(address.url).port || "80";
  const quote = (s: string) => (/^[\w@%+=:,./-]+$/.test(s) ? s : `'${s.replace(/'/g, `'\\''`)}'`);
  const target = user ? `${user}@${machine}` : machine;
  return { url, ssh: `ssh -N -L ${port}:${quote(address.socket)} ${quote(target)}` };
}

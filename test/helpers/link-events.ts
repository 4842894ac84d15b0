// A machine link's up and down events, collected so a test can wait for "the next up after now".
import type { LinkDown, LinkUp, MachineLink } from "../../src/link/link.js";

export function linkEvents(link: MachineLink): { ups: LinkUp[]; downs: LinkDown[] } {
  const ups: LinkUp[] = [];
  const downs: LinkDown[] = [];
  link.on("up", (u) => ups.push(u));
  link.on("down", (d) => downs.push(d));
  return { ups, downs };
}

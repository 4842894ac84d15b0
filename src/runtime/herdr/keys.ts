// Key names for Herdr's `pane.send_keys`: what its key-combo parser reads (src/app/api_helpers.rs parse_key_combo over
// src/config/keybinds.rs; the socket API page lists plain printable keys, enter, esc, tab, backspace, the arrows,
// modifier chords ctrl+/alt+/shift+, f1–f12, minus and plus). A name it cannot read is refused here, by name,
// before Herdr sees it (Herdr would answer invalid_key).
import { DshError } from "../../core/errors.js";

const TMUX_NAMES: Record<string, string> = {
  Enter: "enter",
  Escape: "esc",
  Tab: "tab",
  BTab: "shift+tab",
  BSpace: "backspace",
  Backspace: "backspace",
  Up: "up",
  Down: "down",
  Left: "left",
  Right: "right",
  Space: "space",
};

const HERDR_NAMED = new Set([
  "enter",
  "tab",
  "esc",
  "escape",
  "backspace",
  "up",
  "down",
  "left",
  "right",
  "space",
  "minus",
  "plus",
]);

/** tmux-style names (Escape, C-c, F5) and Herdr's own combos (esc, ctrl+c) to a combo Herdr reads. */
export function herdrKey(key: string): string {
  const mapped = TMUX_NAMES[key];
  if (mapped) return mapped;
  const fn = /^[Ff]([1-9]|1[0-2])$/.exec(key);
  if (fn) return `f${fn[1]}`;
  const chord = /^([CMS])-(.)$/.exec(key);
  if (chord && printable(chord[2] as string)) {
    const mod = chord[1] === "C" ? "ctrl" : chord[1] === "M" ? "alt" : "shift";
    return `${mod}+${(chord[2] as string).toLowerCase()}`;
  }
  if ([...key].length === 1 && printable(key)) return key;
  if (isHerdrCombo(key)) return key;
  throw new DshError(
    "BAD_PARAMS",
    `Herdr has no key ${JSON.stringify(key)} (its parser reads printable characters, enter, esc, tab, backspace, up, down, left, right, space, minus, plus, f1-f12 and ctrl+/alt+/shift+ chords). Fix: send one of those`,
    { key },
  );
}

function isHerdrCombo(key: string): boolean {
  const parts = key.toLowerCase().split("+");
  const base = parts.pop() as string;
  if (!parts.every((m) => ["ctrl", "control", "alt", "shift"].includes(m))) return false;
  return HERDR_NAMED.has(base) || /^f([1-9]|1[0-2])$/.test(base) || ([...base].length === 1 && printable(base));
}

function printable(ch: string): boolean {
  return !/\p{Cc}/u.test(ch);
}

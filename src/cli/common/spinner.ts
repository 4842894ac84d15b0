// A one-line spinner on stderr for terminals; returns a stop function that erases it.
import type { CliIo } from "./io.js";
import { formatDuration } from "./duration.js";

const FRAMES = ["⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"];

export function spinner(io: CliIo, label: string): () => void {
  const started = Date.now();
  let i = 0;
  const draw = () => io.err(`\r\x1b[2K${FRAMES[i++ % FRAMES.length]} ${label} ${formatDuration(Date.now() - started)}`);
  draw();
  const timer = setInterval(draw, 120);
  return () => {
    clearInterval(timer);
    io.err("\r\x1b[2K");
  };
}

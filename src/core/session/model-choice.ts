// Which model a spawn runs on, decided before anything starts: an alias from modelAliases, a `provider/id`
// pattern passed through to pi, or none at all (pi's own default: no --model flag). A bare word that is not a
// defined alias is refused: pi would fuzzy-match it to some model the user never chose (and may have no key for).
import { DshError } from "../errors.js";

/** agent.model (and the name's slug) of a child that runs pi's own default model. */
export const PI_DEFAULT_MODEL = "default";

export function resolveSpawnModel(
  requested: string | undefined,
  cfg: { defaultModel?: string; modelAliases: Record<string, string> },
): string | undefined {
  const name = (requested ?? cfg.defaultModel)?.trim();
  if (name === undefined || name === "") return undefined;
  const aliased = Object.hasOwn(cfg.modelAliases, name) ? cfg.modelAliases[name]! : undefined;
  if (aliased !== undefined) return aliased;
  if (/^[^/\s]+\/\S+$/.test(name)) return name;
  const from = requested === undefined ? " (the configured defaultModel)" : "";
  const known = Object.keys(cfg.modelAliases);
  throw new DshError(
    "MODEL_UNKNOWN",
    `model "${name}"${from} is not a defined alias and not provider/id; define it with \`dsh-herdr config set modelAliases.${name} provider/id\`, or pass provider/id` +
      (known.length ? ` (defined aliases: ${known.join(", ")})` : ""),
  );
}

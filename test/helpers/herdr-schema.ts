// Herdr's own JSON Schema (vendored: fixtures/herdr/herdr-api.schema.json, protocol 20; see its NOTICE.md) compiled with ajv 2020-12:
// five schemas under `schemas`, each with refs `#/schemas/<name>/$defs/...` rewritten to `#/$defs/...`, and the
// Rust number formats declared so they are checked.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { Ajv2020, type ValidateFunction } from "ajv/dist/2020.js";

export const herdrSchemaPath = join(
  import.meta.dirname,
  "..",
  "..",
  "..",
  "fixtures",
  "herdr",
  "herdr-api.schema.json",
);

export type HerdrSchemaName = "request" | "success_response" | "error_response" | "event" | "subscription_event";

const RANGES: Record<string, [number, number]> = {
  uint: [0, Number.MAX_SAFE_INTEGER],
  uint16: [0, 65_535],
  uint32: [0, 4_294_967_295],
  uint64: [0, Number.MAX_SAFE_INTEGER],
  int32: [-2_147_483_648, 2_147_483_647],
};

let cache: Record<HerdrSchemaName, ValidateFunction> | undefined;

export function herdrValidators(): Record<HerdrSchemaName, ValidateFunction> {
  if (cache) return cache;
  const bundle = JSON.parse(readFileSync(herdrSchemaPath, "utf8")) as { schemas: Record<string, unknown> };
  const ajv = new Ajv2020({ strict: false, allErrors: true });
  for (const [name, [min, max]] of Object.entries(RANGES)) {
    ajv.addFormat(name, { type: "number", validate: (n: number) => Number.isInteger(n) && n >= min && n <= max });
  }
  ajv.addFormat("float", { type: "number", validate: (n: number) => Number.isFinite(n) });
  const out = {} as Record<HerdrSchemaName, ValidateFunction>;
  for (const name of ["request", "success_response", "error_response", "event", "subscription_event"] as const) {
    const text = JSON.stringify(bundle.schemas[name]).split(`"#/schemas/${name}/`).join(`"#/`);
    out[name] = ajv.compile(JSON.parse(text) as object);
  }
  cache = out;
  return out;
}

/** Validate one message against a schema; returns the ajv errors as text, or "" when valid. */
export function herdrSchemaErrors(name: HerdrSchemaName, message: unknown): string {
  const v = herdrValidators()[name];
  return v(message) ? "" : JSON.stringify(v.errors).slice(0, 600);
}

/** Which schema a fake-Herdr log entry must match. */
export function schemaFor(kind: "request" | "response" | "event", message: Record<string, unknown>): HerdrSchemaName {
  if (kind === "request") return "request";
  if (kind === "response") return "error" in message ? "error_response" : "success_response";
  return String(message.event).includes(".") ? "subscription_event" : "event";
}

// Herdr's own JSON Schemas (vendored: fixtures/herdr/herdr-api.schema.json, protocol 20 (Herdr 0.8.2), and
// fixtures/herdr/herdr-api.protocol-22.schema.json, protocol 22 (Herdr 0.9); see NOTICE.md) compiled with ajv 2020-12:
// five schemas under `schemas`, each with refs `#/schemas/<name>/$defs/...` rewritten to `#/$defs/...`, and the
// Rust number formats declared so they are checked.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { Ajv2020, type ValidateFunction } from "ajv/dist/2020.js";

const herdrDir = join(import.meta.dirname, "..", "..", "..", "fixtures", "herdr");

/** The protocols whose schema is vendored; the fake Herdr speaks each (`startFakeHerdr({ protocol })`). */
export const HERDR_PROTOCOLS = [20, 22] as const;
export type HerdrProtocol = (typeof HERDR_PROTOCOLS)[number];

export const herdrSchemaPaths: Record<HerdrProtocol, string> = {
  20: join(herdrDir, "herdr-api.schema.json"),
  22: join(herdrDir, "herdr-api.protocol-22.schema.json"),
};
export const herdrSchemaPath = herdrSchemaPaths[20];

export type HerdrSchemaName = "request" | "success_response" | "error_response" | "event" | "subscription_event";

const RANGES: Record<string, [number, number]> = {
  uint: [0, Number.MAX_SAFE_INTEGER],
  uint16: [0, 65_535],
  uint32: [0, 4_294_967_295],
  uint64: [0, Number.MAX_SAFE_INTEGER],
  int32: [-2_147_483_648, 2_147_483_647],
};

const cache = new Map<HerdrProtocol, Record<HerdrSchemaName, ValidateFunction>>();

export function herdrValidators(protocol: HerdrProtocol = 20): Record<HerdrSchemaName, ValidateFunction> {
  const hit = cache.get(protocol);
  if (hit) return hit;
  const bundle = JSON.parse(readFileSync(herdrSchemaPaths[protocol], "utf8")) as {
    protocol: number;
    schemas: Record<string, unknown>;
  };
  if (bundle.protocol !== protocol) throw new Error(`${herdrSchemaPaths[protocol]} is protocol ${bundle.protocol}`);
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
  cache.set(protocol, out);
  return out;
}

/** Validate one message against a schema of that protocol; returns the ajv errors as text, or "" when valid. */
export function herdrSchemaErrors(name: HerdrSchemaName, message: unknown, protocol: HerdrProtocol = 20): string {
  const v = herdrValidators(protocol)[name];
  return v(message) ? "" : JSON.stringify(v.errors).slice(0, 600);
}

/** Which schema a fake-Herdr log entry must match. */
export function schemaFor(kind: "request" | "response" | "event", message: Record<string, unknown>): HerdrSchemaName {
  if (kind === "request") return "request";
  if (kind === "response") return "error" in message ? "error_response" : "success_response";
  return String(message.event).includes(".") ? "subscription_event" : "event";
}

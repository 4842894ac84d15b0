// Protocol schemas (schema/protocol/<method>.json) compiled once with ajv 2020; every request's params are
// validated before a handler sees them, every result before it leaves.
import { readFileSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { Ajv2020, type ErrorObject, type ValidateFunction } from "ajv/dist/2020.js";
import { DshError } from "../core/errors.js";
import { REQUEST_METHODS, type RequestMethod } from "./methods.js";

export const packageRoot = join(import.meta.dirname, "..", "..", "..");
export const protocolSchemaDir = join(packageRoot, "schema", "protocol");

/** Where a schema check failed and what is wrong there, in words and as data for the error reply. */
interface Problem {
  /** `params.timeoutMs`, `params.task.goal`, `params` */
  path: string;
  /** The first field under params it names (absent when the problem is the whole params). */
  field?: string;
  /** `must be >= 1000`, `has unknown field "x"` */
  problem: string;
}

function problemOf(errors: ErrorObject[] | null | undefined): Problem {
  if (!errors || errors.length === 0) return { path: "params", problem: "invalid" };
  // oneOf/anyOf produce one error per branch; the first specific one is the most useful to a person.
  const e = errors.find((x) => x.keyword !== "oneOf" && x.keyword !== "anyOf" && x.keyword !== "if") ?? errors[0]!;
  const segments = e.instancePath.split("/").slice(1);
  const path = ["params", ...segments].join(".");
  const at = segments[0] !== undefined ? { field: segments[0] } : {};
  if (e.keyword === "additionalProperties") {
    const extra = String((e.params as { additionalProperty: string }).additionalProperty);
    return { path, ...at, problem: `has unknown field "${extra}"` };
  }
  if (e.keyword === "enum") {
    return {
      path,
      ...at,
      problem: `must be one of ${JSON.stringify((e.params as { allowedValues: unknown[] }).allowedValues)}`,
    };
  }
  return { path, ...at, problem: e.message ?? "is invalid" };
}

const describe = (p: Problem) => `${p.path} ${p.problem}`;

export class ProtocolSchemas {
  private readonly ajv: Ajv2020;
  /** Method → its schema's $id; validators are compiled on a method's first use (start-up was 0.4 s of ajv). */
  private readonly ids = new Map<string, string>();
  private readonly params = new Map<string, ValidateFunction>();
  private readonly results = new Map<string, ValidateFunction>();

  constructor(dir = protocolSchemaDir) {
    // Our own schemas, checked against the 2020-12 meta-schema by test/unit/daemon-protocol.test.ts: the daemon
    // does not compile the meta-schema at every start to check them again.
    this.ajv = new Ajv2020({ allErrors: false, strict: false, validateSchema: false });
    for (const file of readdirSync(dir).filter((f) => f.endsWith(".json"))) {
      const schema = JSON.parse(readFileSync(join(dir, file), "utf8")) as { $id: string; title: string };
      this.ajv.addSchema(schema);
      if ((REQUEST_METHODS as readonly string[]).includes(schema.title)) this.ids.set(schema.title, schema.$id);
    }
    for (const m of REQUEST_METHODS) {
      if (!this.ids.has(m)) throw new DshError("INTERNAL", `schema/protocol/${m}.json is missing; reinstall dsh-herdr`);
    }
  }

  private validator(kind: "params" | "result", method: RequestMethod): ValidateFunction {
    const cache = kind === "params" ? this.params : this.results;
    let v = cache.get(method);
    if (!v) {
      v = this.ajv.getSchema(`${this.ids.get(method)!}#/$defs/${kind}`);
      if (!v)
        throw new DshError("INTERNAL", `schema/protocol/${method}.json has no $defs/${kind}; reinstall dsh-herdr`);
      cache.set(method, v);
    }
    return v;
  }

  isMethod(method: string): method is RequestMethod {
    return this.ids.has(method);
  }

  checkParams(method: RequestMethod, params: unknown): void {
    const v = this.validator("params", method);
    if (!v(params)) {
      const p = problemOf(v.errors);
      // data: which field and what is wrong with it, so a client names its own flag without reading the words.
      throw new DshError(
        "BAD_PARAMS",
        `${method}: ${describe(p)}; fix the request (see docs/socket-protocol.md#${method.replace(/\./g, "")})`,
        { method, ...p },
      );
    }
  }

  checkResult(method: RequestMethod, result: unknown): void {
    const v = this.validator("result", method);
    if (!v(result)) {
      throw new DshError(
        "INTERNAL",
        `${method}: the daemon built an invalid result (${describe(problemOf(v.errors))}); please report this bug`,
      );
    }
  }
}

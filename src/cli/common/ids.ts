// Ids by full id, suffix, prefix or agent name: the matching is pure and lives in core (the owner extension uses it
// too); the CLI imports it from here.
export * from "../../core/id-match.js";

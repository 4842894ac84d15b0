// What a doctor check reports, and what it is given.
export type CheckLevel = "ok" | "warn" | "fail";
export interface CheckResult {
  name: string;
  level: CheckLevel;
  detail: string;
  fix?: string;
}

export interface DoctorContext {
  env: NodeJS.ProcessEnv;
  home: string;
  packageRoot: string;
  /** Validates config.json; throws with a message naming the problem. */
  validateConfig?: (home: string) => Promise<void>;
  /** The effective config (for the default model); absent or throwing: the model check uses pi's default. */
  loadConfig?: (home: string) => Promise<{ defaultModel?: string; modelAliases: Record<string, string> }>;
}

// Which environment variables hold a provider's API key, as pi reads them (pi-ai's env-api-keys.js, pi 0.73.1;
// copied as data: the product does not import pi at run time). `doctor` compares the shell's and the daemon's
// variable NAMES with it; values are never read here.

const KEY_VARS: Readonly<Record<string, readonly string[]>> = Object.freeze({
  anthropic: ["ANTHROPIC_OAUTH_TOKEN", "ANTHROPIC_API_KEY"],
  "github-copilot": ["COPILOT_GITHUB_TOKEN", "GH_TOKEN", "GITHUB_TOKEN"],
  openai: ["OPENAI_API_KEY"],
  "azure-openai-responses": ["AZURE_OPENAI_API_KEY"],
  deepseek: ["DEEPSEEK_API_KEY"],
  google: ["GEMINI_API_KEY"],
  "google-vertex": ["GOOGLE_CLOUD_API_KEY"],
  groq: ["GROQ_API_KEY"],
  cerebras: ["CEREBRAS_API_KEY"],
  xai: ["XAI_API_KEY"],
  openrouter: ["OPENROUTER_API_KEY"],
  "vercel-ai-gateway": ["AI_GATEWAY_API_KEY"],
  zai: ["ZAI_API_KEY"],
  mistral: ["MISTRAL_API_KEY"],
  minimax: ["MINIMAX_API_KEY"],
  "minimax-cn": ["MINIMAX_CN_API_KEY"],
  moonshotai: ["MOONSHOT_API_KEY"],
  "moonshotai-cn": ["MOONSHOT_API_KEY"],
  huggingface: ["HF_TOKEN"],
  fireworks: ["FIREWORKS_API_KEY"],
  opencode: ["OPENCODE_API_KEY"],
  "opencode-go": ["OPENCODE_API_KEY"],
  "kimi-coding": ["KIMI_API_KEY"],
  "cloudflare-workers-ai": ["CLOUDFLARE_API_KEY"],
  "cloudflare-ai-gateway": ["CLOUDFLARE_API_KEY"],
  xiaomi: ["XIAOMI_API_KEY"],
  "xiaomi-token-plan-cn": ["XIAOMI_TOKEN_PLAN_CN_API_KEY"],
  "xiaomi-token-plan-ams": ["XIAOMI_TOKEN_PLAN_AMS_API_KEY"],
  "xiaomi-token-plan-sgp": ["XIAOMI_TOKEN_PLAN_SGP_API_KEY"],
  "amazon-bedrock": ["AWS_PROFILE", "AWS_ACCESS_KEY_ID", "AWS_BEARER_TOKEN_BEDROCK"],
});

/** The variables pi reads a built-in provider's key from, first preferred; undefined for a provider pi has no
 *  variable for (a custom one in models.json names its own). */
export function providerKeyVars(provider: string): readonly string[] | undefined {
  return Object.hasOwn(KEY_VARS, provider) ? KEY_VARS[provider] : undefined;
}

/** Every provider with its key variables. */
export function providerKeyTable(): ReadonlyArray<readonly [string, readonly string[]]> {
  return Object.entries(KEY_VARS);
}

/** The provider of `provider/id`, or undefined for a bare pattern. */
export function providerOf(model: string): string | undefined {
  const i = model.indexOf("/");
  return i > 0 ? model.slice(0, i) : undefined;
}

/** pi's models.json `apiKey` names an environment variable when it reads like one (else it is the key itself). */
export function apiKeyVarName(apiKey: unknown): string | undefined {
  return typeof apiKey === "string" && /^[A-Z_][A-Z0-9_]*$/.test(apiKey) ? apiKey : undefined;
}

/** The effective LC_CTYPE: LC_ALL, else LC_CTYPE, else LANG (empty counts as unset). */
export function effectiveLocale(env: Readonly<Record<string, string | undefined>>): string | undefined {
  for (const k of ["LC_ALL", "LC_CTYPE", "LANG"]) {
    const v = env[k];
    if (v !== undefined && v !== "") return v;
  }
  return undefined;
}

export function isUtf8Locale(locale: string | undefined): boolean {
  return locale !== undefined && /\.utf-?8(@|$)/i.test(locale);
}

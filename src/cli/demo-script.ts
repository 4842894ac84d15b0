// What the scripted model plays in the demo: two workers each write a different file and call crew_report;
// the reviewer reads the README and reports. Markers in the task prompts pick the conversation.
export const DEMO_MARKERS = {
  workerA: "[demo-worker-a]",
  workerB: "[demo-worker-b]",
  reviewer: "[demo-reviewer]",
} as const;

export interface DemoTask {
  marker: string;
  role: "worker" | "reviewer";
  isolated: boolean;
  brief: string;
  prompt: string;
}

export const DEMO_TASKS: readonly DemoTask[] = [
  {
    marker: DEMO_MARKERS.workerA,
    role: "worker",
    isolated: true,
    brief: "add a greeting module",
    prompt: `${DEMO_MARKERS.workerA} Add src/greeting.js exporting greet(name), which returns "Hello, <name>!".`,
  },
  {
    marker: DEMO_MARKERS.workerB,
    role: "worker",
    isolated: true,
    brief: "document the CLI usage",
    prompt: `${DEMO_MARKERS.workerB} Write docs/usage.md explaining how to run the app.`,
  },
  {
    marker: DEMO_MARKERS.reviewer,
    role: "reviewer",
    isolated: false,
    brief: "review the README",
    prompt: `${DEMO_MARKERS.reviewer} Review README.md for accuracy. Read-only: do not modify files.`,
  },
];

const GREETING = `export function greet(name) {\n  return \`Hello, \${name}!\`;\n}\n`;
const USAGE = "# Usage\n\n```sh\nnode src/app.js\n```\n\nPrints a greeting. No flags.\n";

/** The script for fixtures/scripted-model (format: fixtures/scripted-model/README.md). */
export function demoScript(): unknown {
  return {
    conversations: [
      {
        name: "worker-a",
        match: DEMO_MARKERS.workerA,
        steps: [
          {
            thinking: "Create the module.",
            toolCalls: [{ name: "write", arguments: { path: "src/greeting.js", content: GREETING } }],
            delayMs: 300,
          },
          {
            toolCalls: [
              {
                name: "crew_report",
                arguments: {
                  outcome: "completed",
                  report:
                    'Added src/greeting.js with greet(name).\n\nTests: none yet; greet("Ada") returns "Hello, Ada!".',
                },
              },
            ],
            delayMs: 300,
          },
        ],
      },
      {
        name: "worker-b",
        match: DEMO_MARKERS.workerB,
        steps: [
          {
            thinking: "Write the doc.",
            toolCalls: [{ name: "write", arguments: { path: "docs/usage.md", content: USAGE } }],
            delayMs: 600,
          },
          {
            toolCalls: [
              {
                name: "crew_report",
                arguments: { outcome: "completed", report: "Wrote docs/usage.md: how to run the app." },
              },
            ],
            delayMs: 300,
          },
        ],
      },
      {
        name: "reviewer",
        match: DEMO_MARKERS.reviewer,
        steps: [
          {
            thinking: "Read the README first.",
            toolCalls: [{ name: "read", arguments: { path: "README.md" } }],
            delayMs: 300,
          },
          {
            toolCalls: [
              {
                name: "crew_report",
                arguments: {
                  outcome: "completed",
                  report:
                    "[MINOR] README.md:3 — says `npm start` but package.json has no start script — run `node src/app.js` instead.\nNo blockers.",
                },
              },
            ],
            delayMs: 300,
          },
        ],
      },
    ],
  };
}

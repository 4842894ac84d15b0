import { defineLifecycleScenarios } from "./lifecycle-scenarios.js";

defineLifecycleScenarios({ runtime: "headless" });

import { defineConfig } from "vitest/config"

// `npm run test:fleet`: nginx in front of two real nodes (test/fleet/). Not part of `npm test`,
// whose include (test/**/*.test.ts) does not match these files: it needs nginx and root to install it.
export default defineConfig({
  test: {
    include: ["test/fleet/**/*.fleet.ts"],
    pool: "forks",
    maxWorkers: 1,
    testTimeout: 180_000,
    hookTimeout: 180_000
  }
})

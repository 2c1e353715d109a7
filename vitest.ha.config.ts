import { defineConfig } from "vitest/config"

// `npm run test:ha`: failover of nodes and of the database (test/ha/). Not part of `npm test`: it
// needs PostgreSQL 15 (scripts/ensure-postgres.sh installs it as root) and runs for minutes.
export default defineConfig({
  test: {
    include: ["test/ha/**/*.ha.ts"],
    pool: "forks",
    maxWorkers: 1,
    testTimeout: 180_000,
    hookTimeout: 180_000
  }
})

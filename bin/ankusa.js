#!/usr/bin/env node
// The `ankusa` command: the TypeScript sources run through tsx's loader, in this process
// (no wrapper process between the service manager's signals and the node).
import { register } from "tsx/esm/api"

register()
await import("../src/programs/main.ts")

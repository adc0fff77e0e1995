// Preloaded by bunfig.toml. Hooks that boot gateways (PGlite takes seconds on a loaded 2-core
// machine) get the same generous default as tests instead of Bun's 5 s hook default.
import { setDefaultTimeout } from "bun:test";

setDefaultTimeout(60_000);

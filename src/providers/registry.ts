// Provider id → adapter: the one list of what a lane's `provider` can be. Registration is one
// import and one call per adapter, below.
import type { ProviderAdapter } from "./types.ts";
import { openaiAdapter } from "./openai/adapter.ts";
import { compatibleAdapter } from "./openai-compatible/adapter.ts";
import { COMPATIBLE_VENDORS } from "./openai-compatible/vendors.ts";
import { anthropicAdapter } from "./anthropic/adapter.ts";
import { googleAdapter } from "./google/adapter.ts";
import { subAdapter } from "./sub/adapter.ts";
import { bridgeAdapter } from "./bridge/adapter.ts";

const adapters = new Map<string, ProviderAdapter>();

export function registerAdapter(adapter: ProviderAdapter): void {
  adapters.set(adapter.id, adapter);
}

export function getAdapter(provider: string): ProviderAdapter | undefined {
  return adapters.get(provider);
}

export function allAdapters(): ProviderAdapter[] {
  return [...adapters.values()];
}

registerAdapter(openaiAdapter);
for (const v of COMPATIBLE_VENDORS) registerAdapter(compatibleAdapter(v));
registerAdapter(anthropicAdapter);
registerAdapter(googleAdapter);
registerAdapter(subAdapter);
registerAdapter(bridgeAdapter);

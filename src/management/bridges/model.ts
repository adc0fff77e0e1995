// Request schemas for bridges (SPEC "POST bridges body").
import { z } from "zod";

export const BRIDGE_LABEL_MAX = 80;
export const BRIDGE_TOKEN_MIN = 8;
export const DEFAULT_BRIDGE_LABEL = "Coding agent bridge";

const bookkeeping = z.string().trim().min(1).max(200).nullable().optional();

export const createBridgeBody = z.strictObject({
  base_url: z.string().trim().min(1).max(2048),
  token: z.string().min(BRIDGE_TOKEN_MIN).max(4096).refine((s) => !/\s/.test(s), "`token` must not contain spaces or line breaks (it is sent as a bearer token)."),
  label: z.string().trim().min(1).max(BRIDGE_LABEL_MAX).optional(),
  cloud_provider: bookkeeping,
  cloud_instance_id: bookkeeping,
  region: bookkeeping,
  plan_tier: bookkeeping,
  status: z.enum(["unknown", "provisioning"]).optional(),
});
export type CreateBridgeBody = z.output<typeof createBridgeBody>;

export const noQuery = z.strictObject({});
export const idQuery = z.strictObject({ id: z.string().min(1).max(200) });

// The part of autocannon's API the runner uses (the package ships no types).
declare module "autocannon" {
  import type { EventEmitter } from "node:events";
  interface Options {
    url: string;
    method?: string;
    headers?: Record<string, string>;
    body?: string;
    connections?: number;
    duration?: number;
    pipelining?: number;
    timeout?: number;
  }
  interface Result {
    errors: number;
    timeouts: number;
    non2xx: number;
    resets: number;
    mismatches: number;
    "2xx": number;
    requests: { total: number; average: number };
    duration: number;
  }
  interface Instance extends EventEmitter {
    stop(): void;
  }
  function autocannon(opts: Options, cb: (err: Error | null, result: Result) => void): Instance;
  export default autocannon;
}

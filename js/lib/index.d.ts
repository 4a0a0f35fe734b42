// The types of the JavaScript half (lib/index.cjs); the engine's own (Receipt, the call
// description) are the ones napi generates from the Rust source into binding.d.ts.
import type { Receipt } from "../binding";

export type { Receipt };

/** How `new Attest(options)` opens the engine; each option beats its `ATTEST_*` variable, which beats the file. */
export interface AttestOptions {
  /** The configuration file [default: `$ATTEST_CONFIG`, else `.attest/config.yaml`]. */
  config?: string;
  /** A SQLite file or a `postgres://` URL [default: `.attest/ledger.sqlite`]. */
  ledger?: string;
  /** The tenant whose chain to use. */
  tenant?: string;
  /** The policy YAML file. */
  policy?: string;
  /** Recorded as the agent of calls that name none. */
  agent?: string;
  /** Recorded as the actor of calls that name none. */
  actor?: string;
  /** The signing key `checkpoint()` signs with. */
  key?: string;
  /** `full` (default), `normal` or `off`. */
  durability?: "full" | "normal" | "off";
  /** Seconds an ask waits for a person before the call comes back `Held` [default 0]. */
  wait?: number;
  /** Decide every call but run it as if policy said act, recording the verdict. */
  shadow?: boolean;
  /**
   * With `agents:` configured, this agent's credential (an `attest agents add` token or a
   * JWT) [default: `$ATTEST_AGENT_TOKEN`]: calls are recorded under the agent it proves;
   * a credential that proves none (or another agent than `agent`) makes calls throw `Refused`.
   */
  agentToken?: string;
}

/** How a call is described: detected from its name unless `system` and `verb` are given. */
export interface ToolSpec {
  name?: string;
  system?: string;
  verb?: string;
  target?: string;
  framework?: string;
  /** The resume token of this call when it was held before (possibly in another process). */
  token?: string;
  /** Whether the action landed (sync or async): `true` is `verified-custom`, `false` `unverified`; any other answer, or throwing, degrades the row. */
  verify?: (result: any, params: any) => boolean | Promise<boolean>;
  /** Fetches the record the call wrote (`null` when none); Attest compares it with the params (`read-back:<name>`). */
  readBack?: (result: any, params: any) => unknown | Promise<unknown>;
}

export interface CheckOptions {
  verify?: ToolSpec["verify"];
  readBack?: ToolSpec["readBack"];
}

export interface CallSpec extends ToolSpec {
  runId?: string;
  /** A write made again with this key and the same params does not run: it throws `Replayed` with the first call's receipt. */
  idempotencyKey?: string;
}

/** A governed function: resolves with the tool's own value, or throws a typed error without running it. */
export interface GovernedTool<P, A extends unknown[], R> {
  (params: P, ...rest: A): Promise<R>;
  /** The same call, resolving with the tool's value and the outcome row's receipt. */
  withReceipt(params: P, ...rest: A): Promise<{ value: R; receipt: Receipt }>;
  /** Runs the held call `token` stands for, with the approved params, once a person approved it. */
  resume(token: string): Promise<R>;
}

export interface RecordOptions {
  system?: string;
  verb?: string;
  target?: string;
  framework?: string;
  runId?: string;
  /** Hashed, never stored. */
  result?: unknown;
}

export declare class Attest {
  constructor(options?: AttestOptions);
  readonly agent: string | null;
  tool<P, A extends unknown[], R>(spec: ToolSpec, fn: (params: P, ...rest: A) => R | Promise<R>): GovernedTool<P, A, R>;
  tool<P, A extends unknown[], R>(fn: (params: P, ...rest: A) => R | Promise<R>): GovernedTool<P, A, R>;
  call<P, R>(spec: CallSpec, params: P, run: (params: P) => R | Promise<R>): Promise<{ value: R; receipt: Receipt }>;
  resume<R>(token: string, fn: (params: Record<string, unknown>) => R | Promise<R>, options?: CheckOptions): Promise<R>;
  record(name: string, params?: Record<string, unknown>, options?: RecordOptions): Promise<Receipt>;
  inboxLink(requestId: string): string;
  request(requestId: string): Promise<Record<string, unknown>>;
  checkpoint(): Promise<string>;
  close(): Promise<void>;
}

/** Attest could not decide or record a call (the tool did not run, or ran unrecorded). */
export declare class AttestError extends Error {
  readonly receipt: Receipt | null;
}
/** The configuration does not load: the message names the file, line and key. */
export declare class ConfigError extends AttestError {}
/** The policy does not load: the message names its file and line. */
export declare class PolicyError extends ConfigError {}
/** Policy refused the call; the tool did not run. */
export declare class Refused extends AttestError {}
/** A person rejected the call; the tool did not run. */
export declare class Rejected extends AttestError {
  readonly approver: string | null;
}
/** Nobody approved the call in time; the tool did not run. */
export declare class Expired extends Rejected {
  readonly requestId: string;
}
/** The call waits for a person; `token` resumes it once approved. */
export declare class Held extends AttestError {
  readonly requestId: string;
  readonly token: string;
  readonly link: string;
}

/** A call with the same `idempotencyKey` and the same params already ran; the tool did not run again. `receipt` is the first call's. */
export declare class Replayed extends AttestError {
  readonly receipt: Receipt;
}

/** JSON text for params and results, as the engine hashes them. */
export declare function toJson(value: unknown): string;

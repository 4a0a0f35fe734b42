// Attest for JavaScript and TypeScript: every tool call an agent makes is decided by
// policy, put to a person when policy asks, run, verified and recorded in a hash-chained
// ledger. The engine is Rust (the same one as the `attest` binary and the Python package,
// on the same ledger and policy); this file adds `attest.tool`, the typed errors and the
// held-call memory, as python/attest/__init__.py does for Python.
"use strict";

const { Engine } = require("./native.cjs");

/** Attest could not decide or record a call (the tool did not run, or ran unrecorded). */
class AttestError extends Error {
  constructor(message, receipt = null) {
    super(message);
    this.name = new.target.name;
    /** The call's ledger row, when one was written. */
    this.receipt = receipt;
  }
}

/** The configuration does not load: the message names the file, line and key, as the binary's does. */
class ConfigError extends AttestError {}

/** The policy does not load: the message names its file and line. */
class PolicyError extends ConfigError {}

/** Policy refused the call; the tool did not run. `receipt` is the refusal's row. */
class Refused extends AttestError {}

/** A person rejected the call; the tool did not run. `approver`, `receipt`. */
class Rejected extends AttestError {
  constructor(message, receipt, approver) {
    super(message, receipt);
    this.approver = approver ?? null;
  }
}

/** Nobody approved the call in time; the tool did not run. `requestId`, `receipt`. */
class Expired extends Rejected {
  constructor(message, receipt, requestId) {
    super(message, receipt, null);
    this.requestId = requestId;
  }
}

/** The call waits for a person: `token` resumes it once approved; `requestId`, `link`, `receipt`. */
class Held extends AttestError {
  constructor(message, receipt, requestId, token, link) {
    super(message, receipt);
    this.requestId = requestId;
    this.token = token;
    this.link = link;
  }
}

/**
 * A call with the same `idempotencyKey` and the same params already ran: the tool did not
 * run again. `receipt` is the first call's outcome row; its output is not kept in process.
 */
class Replayed extends AttestError {}

// How many held calls an Attest remembers the resume tokens of (oldest forgotten first).
const MAX_HELD = 1024;

/** JSON text for params and results: what the engine hashes, previews and checks. */
function toJson(value) {
  const text = JSON.stringify(value === undefined ? null : value, (_key, item) =>
    typeof item === "bigint" ? item.toString() : item,
  );
  return text === undefined ? "null" : text;
}

class Attest {
  /**
   * One configuration, as the `attest` binary reads it: the ledger, policy, detection
   * registry, read-back recipes, notifiers, approval store and tenant. Each option beats
   * its `ATTEST_*` variable, which beats the configuration file (`config`, else
   * `$ATTEST_CONFIG`, else `.attest/config.yaml`), which beats the default.
   * Throws `ConfigError` / `PolicyError` naming file, line and key.
   *
   * `agentToken`: with `agents:` configured, this agent's credential (an `attest agents
   * add` token or a JWT from the configured identity provider) [default
   * `$ATTEST_AGENT_TOKEN`]; every call is then recorded under the agent it proves (the
   * row's `agent_auth` says how), checked as each call is made: an unknown, revoked,
   * expired or wrong-audience credential, none (unless `unauthenticated: record`), or an
   * `agent` that names another agent throws `Refused` and the tool does not run.
   */
  constructor(options = {}) {
    const engine = new Engine({
      config: options.config,
      ledger: options.ledger,
      tenant: options.tenant,
      policy: options.policy,
      agent: options.agent,
      actor: options.actor,
      key: options.key,
      durability: options.durability,
      wait: options.wait,
      shadow: options.shadow,
      agentToken: options.agentToken,
    });
    const failed = engine.openError;
    if (failed) {
      const Kind = { ConfigError, PolicyError }[failed.kind] ?? AttestError;
      throw new Kind(failed.message);
    }
    this.agent = options.agent ?? null;
    this._engine = engine;
    this._held = new Map();
  }

  /**
   * Governs `fn`: returns an async function taking the same arguments, whose first is the
   * call's params (an object). Without `system`/`verb` they are detected from the name
   * (`name`, else `fn.name`; `sendEmail` reads as `send_email`) and the configured
   * registry, as core detects any framework's function call. It resolves with
   * `fn`'s own value, or throws `Refused`, `Rejected`, `Held` or `AttestError` without
   * running `fn`; an error `fn` throws is recorded as a failed execution and rethrown
   * unchanged. `.withReceipt(...)` resolves with `{ value, receipt }`; `.resume(token)`
   * runs a held call once approved.
   */
  tool(spec, fn) {
    if (typeof spec === "function") [spec, fn] = [{}, spec];
    if (typeof fn !== "function") throw new TypeError("attest.tool(spec, fn): fn must be a function");
    const call = {
      name: spec.name || fn.name || "tool",
      system: spec.system,
      verb: spec.verb,
      target: spec.target,
      framework: spec.framework,
    };
    const attest = this;
    const checks = checksOf(spec);
    const withReceipt = async (params, ...rest) =>
      attest._call(call, params, (use) => fn(use, ...rest), spec.token, checks);
    const governed = async (params, ...rest) => (await withReceipt(params, ...rest)).value;
    Object.defineProperty(governed, "name", { value: call.name });
    governed.withReceipt = withReceipt;
    governed.resume = async (token) => (await attest._resume(token, fn, checks)).value;
    return governed;
  }

  /**
   * Governs one call of `run(params)` described by `spec` (`name`, `system`, `verb`,
   * `target`, `framework`, `runId`, `token`, `verify`, `readBack`, `idempotencyKey`; for
   * an MCP tool, `mcpServer`, `mcpServerNamed` and its hints); resolves with
   * `{ value, receipt }`. What adapters call. `idempotencyKey`: a write made again with
   * the same key and params, within the key's lifetime (`idempotency.lifetime`, 24 h),
   * does not run: it throws `Replayed` with the first call's `receipt` (the output is
   * not kept); the same key with other params throws `AttestError`.
   */
  async call(spec, params, run) {
    // The description the engine reads (`mcpServer` and the MCP hints included); the
    // token, the checks and the key are this side's.
    const { token, verify, readBack, idempotencyKey, ...described } = spec;
    const call = { ...described, name: spec.name || "tool" };
    return this._call(call, params, run, token, checksOf({ verify, readBack }), idempotencyKey);
  }

  /**
   * Runs the approved call `token` stands for with the approved params; resolves with
   * `fn`'s value. `options.verify` / `options.readBack`: as for `tool`.
   */
  async resume(token, fn, options = {}) {
    return (await this._resume(token, fn, checksOf(options))).value;
  }

  /**
   * Records an action that already happened, outside Attest (decision `recorded`);
   * `result`, when given, is hashed, never stored. Resolves with its receipt.
   */
  async record(name, params = {}, options = {}) {
    const call = {
      name,
      system: options.system,
      verb: options.verb,
      target: options.target,
      framework: options.framework,
      runId: options.runId,
    };
    const result = options.result === undefined ? undefined : toJson(options.result);
    const recorded = await rethrow(() => this._engine.record(call, paramsText(params), result));
    if (recorded.status !== "recorded") this._refuse(recorded);
    return recorded.receipt;
  }

  /** Where a person decides request `requestId`: its page in the inbox (they sign in there). */
  inboxLink(requestId) {
    return this._engine.requestLink(requestId);
  }

  /** What a person sees of approval request `requestId` (`status`, `approver`, the call's summary). */
  async request(requestId) {
    return JSON.parse(await rethrow(() => this._engine.request(requestId)));
  }

  /** Signs a checkpoint of the ledger's head with the signing key; resolves with the note. */
  async checkpoint() {
    return rethrow(() => this._engine.checkpoint());
  }

  /** Closes the engine; a call made after it throws `AttestError`. */
  async close() {
    this._engine.close();
  }

  async _call(call, params, run, token, checks, idempotencyKey) {
    const { started, use } = await this._start(call, params, token, checks, idempotencyKey);
    return finish(started, use, () => run(use), checks);
  }

  // Runs the tool of a call `_start` cleared (the OpenAI Agents adapter decides a call
  // before the SDK invokes its tool).
  async _finish(started, use, run, checks = checksOf()) {
    return finish(started, use, () => run(use), checks);
  }

  // Decides a call; resolves with it cleared to run (and the params to run it with), or
  // throws the typed error of a call that may not run.
  async _start(call, params, token, checks = checksOf(), idempotencyKey = undefined) {
    const paramsJson = paramsText(params);
    // A call that came back Held and is made again (the agent retrying) presents its
    // resume token: once a person has approved, the retry runs.
    const key = JSON.stringify([call.name, call.system, call.verb, call.target, paramsJson]);
    token = token ?? this._held.get(key);
    const started = await rethrow(() =>
      this._engine.start(call, paramsJson, token, checks.engine, idempotencyKey),
    );
    if (started.status === "held") {
      this._held.delete(key);
      this._held.set(key, started.token);
      while (this._held.size > MAX_HELD) this._held.delete(this._held.keys().next().value);
    } else if (token !== undefined) {
      this._held.delete(key);
    }
    this._refuse(started);
    return { started, use: started.edited ? approved(started) : params };
  }

  async _resume(token, fn, checks) {
    const started = await rethrow(() => this._engine.resume(token, checks.engine));
    this._refuse(started);
    const use = approved(started);
    return finish(started, use, () => fn(use), checks);
  }

  // Throws the typed error of a call that may not run.
  _refuse(started) {
    const receipt = started.receipt ?? null;
    switch (started.status) {
      case "run":
        return;
      case "refused":
        throw new Refused(started.message, receipt);
      case "replayed":
        throw new Replayed(started.message, receipt);
      case "rejected":
        throw new Rejected(started.message, receipt, started.approver);
      case "expired":
        throw new Expired(started.message, receipt, started.requestId);
      case "held":
        throw new Held(
          started.message,
          receipt,
          started.requestId,
          started.token,
          this.inboxLink(started.requestId),
        );
      default:
        throw new AttestError(started.message ?? "Attest could not decide the call", receipt);
    }
  }
}

// The params a person approved (edits on approval, or a resume by token).
function approved(started) {
  const params = JSON.parse(started.params);
  return params !== null && typeof params === "object" && !Array.isArray(params)
    ? params
    : { input: params };
}

// The params as the engine hashes them; params JSON cannot say (a cycle) cannot be
// described, so the call does not run.
function paramsText(params) {
  try {
    return toJson(params ?? {});
  } catch (error) {
    throw new AttestError(`cannot describe the call: its params have no JSON form (${error.message})`);
  }
}

// The result as the engine hashes it; one JSON cannot say (a cycle) is described by its
// text, so the call still gets its outcome row.
function resultJson(value) {
  try {
    return toJson(value);
  } catch {
    return JSON.stringify(String(value));
  }
}

// The caller's own checks of a call (`verify`, `readBack`), and what the engine is told of them.
function checksOf({ verify, readBack } = {}) {
  for (const [what, check] of [["verify", verify], ["readBack", readBack]]) {
    if (check !== undefined && typeof check !== "function") throw new TypeError(`${what} must be a function`);
  }
  const engine = readBack ? { readBack: readBack.name || "readBack" } : verify ? { verify: true } : undefined;
  return { verify, readBack, engine };
}

// What the caller's own check says of `value` (a read-back beats a verify, as in core).
async function judge(checks, value, params) {
  try {
    if (checks.readBack) return { record: toJson((await checks.readBack(value, params)) ?? null) };
    if (checks.verify) {
      const answer = await checks.verify(value, params);
      // Only `true` confirms and only `false` contradicts, as Python's `verify=`: anything
      // else ({ ok: false }, "false", []) is no answer, so the row degrades, never to
      // verified-custom or unverified.
      return typeof answer === "boolean" ? { verified: answer } : { checkFailed: true };
    }
  } catch {
    return { checkFailed: true };
  }
  return undefined;
}

// Runs the tool of a cleared call and hands its answer to the engine.
async function finish(started, params, run, checks) {
  let value;
  try {
    value = await run();
  } catch (error) {
    // Only a name for the failure is recorded (as a hash); the caller gets its own error
    // unchanged, even when the failure's row could not be written (the tool has run).
    await started.fail(String(error?.name ?? typeof error)).catch(() => undefined);
    throw error;
  }
  const judged = await judge(checks, value, params);
  const receipt = await rethrow(() => started.finish(resultJson(value), judged));
  return { value, receipt };
}

// The engine's own failures (a closed engine, a ledger that did not record) as AttestError.
async function rethrow(work) {
  try {
    return await work();
  } catch (error) {
    throw error instanceof AttestError ? error : new AttestError(error?.message ?? String(error));
  }
}

module.exports = {
  Attest,
  AttestError,
  ConfigError,
  PolicyError,
  Refused,
  Rejected,
  Expired,
  Held,
  Replayed,
  toJson,
};

// Compiled by types.test.cjs (tsc --noEmit): the package's types as a TypeScript user meets them.
import { Attest, Held, Refused, Replayed, type Receipt } from "attest-agents";
import { wrapTools as aiTools } from "attest-agents/ai";
import { wrapTools as mastraTools } from "attest-agents/mastra";
import { wrapClient, payload } from "attest-agents/mcp";
import { resolveInterruptions } from "attest-agents/openai-agents";

const attest = new Attest({ ledger: ".attest/ledger.sqlite", agent: "typed", durability: "normal" });
const getNote = attest.tool({ system: "notes", verb: "read" }, async ({ id }: { id: string }) => ({ id, title: "plan" }));
const note: { id: string; title: string } = await getNote({ id: "n1" });
const { value, receipt }: { value: { id: string }; receipt: Receipt } = await getNote.withReceipt({ id: "n1" });
const seq: number = receipt.seq;
const level: string | null | undefined = receipt.level;
try {
  await getNote({ id: "n2" });
} catch (error) {
  if (error instanceof Held) {
    const link: string = error.link;
    await attest.resume(error.token, async (params) => params);
  } else if (error instanceof Refused) {
    const row: Receipt | null = error.receipt;
  }
}
const tools = aiTools({ get_note: { description: "d", execute: async () => 1 } }, attest);
const mastra: { get_note: { id: string; description: string } } = mastraTools({ get_note: { id: "get_note", description: "d" } }, attest, { get_note: { system: "notes" } });
const said: unknown = payload({ content: [] });
const client = wrapClient({ callTool: async () => ({}) }, attest, { server: "notes" });
await resolveInterruptions({ getInterruptions: () => [], approve() {}, reject() {} }, attest);
const proven = new Attest({ agent: "typed", agentToken: "atg_from-attest-agents-add" });
try {
  await proven.call({ name: "update_note", idempotencyKey: "k-1" }, { id: "n1" }, async (params) => params);
} catch (error) {
  if (error instanceof Replayed) {
    const first: number = error.receipt.seq;
  }
}
// @ts-expect-error: an unknown option is a type error
new Attest({ ledgr: "typo.sqlite" });
await attest.close();
export { note, value, seq, level, tools, mastra, said, client };

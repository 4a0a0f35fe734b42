//! The command line, as clap structs. Nothing here decides anything.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

/// Attest: the layer between an AI agent and the tools it calls. Every call is
/// decided by policy, run, verified, and recorded in a hash-chained ledger that
/// anyone can check.
#[derive(Debug, Parser)]
#[command(name = "attest", version = crate::VERSION, propagate_version = true)]
pub(crate) struct Cli {
    #[command(flatten)]
    pub(crate) global: Global,
    #[command(subcommand)]
    pub(crate) command: Command,
}

/// Options every command takes. Each setting is taken from its flag, else its
/// environment variable, else the configuration file, else the default. Listed under a
/// heading of their own, after each command's own options.
#[derive(Debug, Args)]
#[command(next_help_heading = "Global options")]
pub(crate) struct Global {
    /// The configuration file [env: ATTEST_CONFIG; default: .attest/config.yaml if present].
    #[arg(long, global = true, value_name = "FILE")]
    pub(crate) config: Option<PathBuf>,
    /// The ledger: a file (SQLite) or a `postgres://user@host:port/db` URL [env:
    /// ATTEST_LEDGER; config: ledger; default: .attest/ledger.sqlite].
    #[arg(long, global = true, value_name = "PATH|URL")]
    pub(crate) ledger: Option<String>,
    /// The tenant whose chain to use: its own seqs from 1, tree, checkpoints and signing
    /// key (in SQLite, a file of its own beside the ledger file) [env: ATTEST_TENANT].
    #[arg(long, global = true, value_name = "NAME")]
    pub(crate) tenant: Option<String>,
    /// How hard appends work to survive a crash: full (survives power loss), normal, off
    /// [env: ATTEST_DURABILITY; config: durability; default: full].
    #[arg(long, global = true)]
    pub(crate) durability: Option<String>,
    /// The policy file [env: ATTEST_POLICY; config: policy; default: ./attest.yaml if
    /// present, else the built-in default].
    #[arg(long, global = true, value_name = "FILE")]
    pub(crate) policy: Option<PathBuf>,
}

#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Run a scripted agent session on the embedded defaults and show the ledger it leaves.
    ///
    /// Four actions: a read that acts, an update that acts, an external email that asks
    /// and is approved by a stand-in approver, and a payment that asks and is rejected.
    /// The tools are simulated; the ledger rows are real. The demo appends to the ledger
    /// it is pointed at and never deletes one.
    Demo,
    /// List the newest ledger rows, and any action recorded as about to run whose
    /// outcome never followed. Reads only: works on a read-only ledger.
    Ledger(LedgerArgs),
    /// Check the ledger: seq order, the hash chain, every body and column, the Merkle
    /// tree, and every checkpoint's root (and signature, given a trusted key). With a
    /// key, the ledger must be covered by a checkpoint that key signed; the output names
    /// the key that verified. Without one, roots are still compared and the output says
    /// signatures were not checked. Reads only: never writes to the file it checks.
    ///
    /// Exit 0: intact. Exit 1: broken, or not a ledger (what and where is named). Exit 2:
    /// could not run.
    Verify(VerifyArgs),
    /// Write every entry out.
    Export(ExportArgs),
    /// Copy a ledger into a new one, in either store, without changing a byte: the same
    /// bodies, tree, checkpoints and prune boundary. Verifies the source first and both
    /// after (under --vkey when given), and checks they hold the same signed roots.
    Copy(CopyArgs),
    /// Create an Ed25519 signing key for checkpoints (signed-note format, mode 0600).
    ///
    /// Prints the verifier key on stdout: keep a copy somewhere the ledger's writers
    /// cannot change, and pass it to `attest verify --vkey`.
    Keygen(KeygenArgs),
    /// Show keys.
    #[command(subcommand)]
    Key(KeyCommand),
    /// Sign the current tree as a C2SP checkpoint and print the signed note on stdout.
    ///
    /// Verifies the rows since the previous checkpoint first, and refuses to sign a
    /// broken ledger. `attest checkpoint > cp.note` gives a file any signed-note
    /// verifier opens. To rotate keys, sign with the new key (same name) and pass the
    /// old one's verifier with --vkey: the previous checkpoint must verify under it.
    Checkpoint(CheckpointArgs),
    /// Keep the newest checkpoint note somewhere the ledger's writers cannot rewrite (an
    /// anchor): append it to a file, commit it to a Git repository, or POST it to a URL;
    /// `attest verify --checkpoint FILE|REPO|URL` reads them back.
    Anchor(AnchorArgs),
    /// Publish the ledger as a C2SP tlog-tiles log in a directory (checkpoint, hash
    /// tiles, entry bundles, and the bodies beside them), incrementally; serve it as
    /// static files so anyone can mirror and check it (`attest verify --tiles`).
    Publish(crate::cli_tiles::PublishArgs),
    /// Follow a published log: each new checkpoint must be signed by the log's key and
    /// consistent with the last one this monitor accepted (kept in --state).
    ///
    /// Exit 1 with an alert on a split view, a rewritten history or a bad signature.
    Monitor(crate::cli_tiles::MonitorArgs),
    /// Run a witness (C2SP tlog-witness): cosigns a log's checkpoint only if it extends
    /// the last one this witness cosigned for that log.
    Witness(crate::cli_tiles::WitnessArgs),
    /// Print an inclusion proof for an entry, or a consistency proof between two sizes.
    Prove(ProveArgs),
    /// Check a proof file from `attest prove --json` offline: no ledger needed. An
    /// inclusion proof needs its signed checkpoint, a consistency proof both of its own;
    /// a file holds one kind of proof and nothing else.
    VerifyProof(VerifyProofArgs),
    /// Check an auditor's bundle from `attest export --bundle` offline: no ledger needed.
    /// Every row must hash to its proof's entry, every proof lead to the root of the
    /// checkpoint a trusted key signed, every older checkpoint be signed and consistent.
    ///
    /// Exit 0: it checks. Exit 1: what failed, naming the file inside the bundle, the line
    /// and the seq. Exit 2: could not run (no key, unreadable, not a bundle).
    VerifyBundle(VerifyBundleArgs),
    /// Record actions that already happened, from JSON lines, in one transaction.
    ///
    /// Each line is an action (`{"system","verb","target","params","actor","agent",…}`)
    /// with an optional `"result"`; params and results are hashed, never stored. What a
    /// line says of the outcome (`decision`, `confirm`, `execution`, `verification`,
    /// `reasons`, `ts`; an `attest export` line has them all) is kept, and the row is
    /// marked `imported`. A bad line, an action id already in the ledger or twice in the
    /// file, or a line over 1 MiB imports nothing and is named by its line number.
    Import(ImportArgs),
    /// Name the system, verb and target of a tool call, as the pipeline sees it.
    Detect(DetectArgs),
    /// Check, explain and test policies.
    #[command(subcommand)]
    Policy(PolicyCommand),
    /// Remove entries older than N days that a signed checkpoint covers.
    ///
    /// Verifies first, signs a checkpoint, then removes; the remaining ledger still
    /// verifies end to end and its inclusion proofs still check. The newest entry stays.
    /// Says how many entries it will remove and asks on a terminal; without one, needs
    /// --yes.
    Prune(PruneArgs),
    /// Erase a person's sealed fields: destroy their key and record the erasure.
    ///
    /// Deletes the key the subject's personal fields were sealed under (`personal:` in
    /// the configuration) and appends an erasure row naming the subject's blind index,
    /// who asked and how many rows were sealed, in one transaction. The chain still
    /// verifies; those fields read `erased` in every view. Exit 0: erased; 3: nothing to
    /// erase (erased before, or no sealed rows); 2: an error.
    Erase(EraseArgs),
    /// The configuration file: check it and show the effective settings.
    #[command(subcommand)]
    Config(ConfigCommand),
    /// Read-back recipes: list the ones Attest knows, or lint recipe files.
    #[command(subcommand)]
    Recipes(RecipesCommand),
    // --- approvals (issue 7) ---
    /// List approval requests nobody has decided yet (expiring overdue ones first).
    Pending(PendingArgs),
    /// Approve or reject a pending request, by id or resume token, as the approver whose
    /// personal token is in $ATTEST_APPROVER_TOKEN or --token-file.
    ///
    /// Exit 0: recorded. Exit 1: no valid approver token, not pending (unknown, decided,
    /// expired) or not allowed (not a listed approver, held for edits).
    Confirm(ConfirmArgs),
    /// Register, list and revoke approvers: the people who may decide, each with a
    /// personal token (`attest approvers add NAME` shows it once).
    #[command(subcommand)]
    Approvers(ApproversCommand),
    /// Register, list and revoke agents: with `agents:` configured, the gateway,
    /// `mcp-proxy` and `mcp-server` name a call's agent by its token (`attest agents add
    /// NAME` shows it once) or a JWT from the identity provider, never by a label.
    #[command(subcommand)]
    Agents(AgentsCommand),
    /// List and revoke bounded grants (`attest confirm ID approve --grant …`): the
    /// calls a person approved in advance, and how many are used.
    ///
    /// Exit 0: listed or revoked. Exit 1: no active grant has that id.
    #[command(subcommand)]
    Grants(GrantsCommand),
    /// List open intents (writes recorded as about to run with no outcome row: a crash,
    /// a kill, a full disk), or resolve one: `attest intents resolve SEQ --ran|--not-run`.
    ///
    /// An open intent blocks a retry of the same call: the retry asks a person (or, with
    /// a read-back recipe that can look the record up, the outcome is read back first).
    /// Resolving records the outcome a person found, as the approver whose token is in
    /// $ATTEST_APPROVER_TOKEN or --token-file; a retry is then decided afresh.
    ///
    /// Exit 0: listed or recorded. Exit 1: no valid approver token, or SEQ is not an open
    /// intent.
    Intents(IntentsArgs),
    /// Serve the approval inbox: a web page and JSON API for pending requests.
    ///
    /// Binds 127.0.0.1 unless told otherwise (an unspecified address such as 0.0.0.0
    /// needs --public-url: requests must name the inbox's own host). Every API call needs
    /// an approver's token (`Authorization: Bearer …`); the page asks for it once per
    /// browser tab.
    Serve(ServeArgs),
    // --- end approvals ---
    // The servers (MCP proxy, MCP server, HTTP gateway).
    /// Put an MCP server behind the pipeline: `attest mcp-proxy -- npx -y @scope/server`,
    /// or a remote one: `attest mcp-proxy --server NAME --url https://…/mcp`.
    ///
    /// Speaks MCP on stdin/stdout to the agent's client (or streamable HTTP with
    /// --listen) and starts the server given after `--` as a child (or reaches --url over
    /// streamable HTTP). Everything passes through except `tools/call`, which is decided,
    /// run, verified and recorded; a refused call returns an error result and never
    /// reaches the server.
    // Boxed: its flags make it several times the size of the other commands.
    McpProxy(Box<McpProxyArgs>),
    /// Sign in to a remote MCP server that requires OAuth, and store the token for
    /// `attest mcp-proxy --url URL --oauth`.
    ///
    /// Finds the server's authorization server (protected resource metadata, then its
    /// metadata), uses the configured client, a client ID metadata document or registers
    /// one, prints the authorization URL and waits for the browser's redirect on a
    /// loopback port (PKCE throughout). The token is stored in a file of mode 0600 under
    /// --oauth-tokens, never in the ledger, and never printed.
    McpLogin(McpLoginArgs),
    /// Serve Attest itself as MCP tools on stdin/stdout (attest_decide, attest_ask,
    /// attest_confirm_status, attest_record, attest_verify, attest_ledger). None of them
    /// approves: an agent may ask and wait, only a registered approver decides.
    McpServer(McpServerArgs),
    /// Answer a coding agent's hook: `attest hook claude-code` in Claude Code's settings.
    #[command(subcommand)]
    Hook(HookCommand),
    /// A forwarding HTTP proxy for REST calls: writes are decided, recorded and read back.
    Gateway(GatewayArgs),
    /// Send the ledger's rows to the SIEM configured under `stream:` (OpenTelemetry log
    /// records over OTLP/HTTP, OCSF events as signed JSON), from a cursor kept in the
    /// ledger: a sink that is down delays rows and loses none.
    ///
    /// The gateway, `mcp-proxy` and `serve` stream by themselves when the configuration
    /// has `stream:`; run `attest stream run` beside doors whose processes are short
    /// (Python, TypeScript, hooks).
    #[command(subcommand)]
    Stream(StreamCommand),
    /// What agents did in a window, per agent and system, with anomaly flags against
    /// each agent's own history (new system or verb, volume spike, failure spike,
    /// off-hours actions, external burst); each flag gives its numbers and baseline.
    Digest(crate::review::DigestArgs),
    // --- release files (issue 55) ---
    /// Print a shell completion script on stdout: `attest completions bash >
    /// /etc/bash_completion.d/attest` (the packages install them already).
    Completions(CompletionsArgs),
    /// Print the man page (roff) on stdout: `attest man | man -l -`.
    Man,
    /// Check downloaded release files against a signed SHA256SUMS: the signature of
    /// SHA256SUMS.note under a trusted verifier key, that the note's text is SHA256SUMS
    /// byte for byte, and the SHA-256 of every listed file found in the directory.
    ///
    /// Exit 0: signed and every file present matches (at least one). Exit 1: a bad or
    /// missing signature, a file that differs, or no listed file present.
    VerifySums(VerifySumsArgs),
    /// Run a command where the protected files are read-only: each coding agent's hooks and
    /// settings, the repository's hooks and CI, MCP server lists, and the configuration,
    /// policy, ledger and key Attest uses; Attest's hold state is hidden. The rest of the
    /// project stays writable. A write to a protected file fails in the kernel
    /// ("Read-only file system") however the command spells it: through `cd`, a symlink, a
    /// script or `python3 -c`.
    ///
    /// Linux only (user, mount and PID namespaces). A protected path that does not exist
    /// when the command starts is not covered (`--plan` lists it). Exit: the command's
    /// own; 2 when the sandbox cannot be set up (the command does not run).
    Sandbox(SandboxArgs),
}

#[derive(Debug, Args)]
pub(crate) struct CompletionsArgs {
    /// The shell to complete for.
    #[arg(value_enum)]
    pub(crate) shell: CompletionShell,
}

/// The shells whose completion scripts the packages install.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub(crate) enum CompletionShell {
    Bash,
    Zsh,
    Fish,
}

#[derive(Debug, Args)]
pub(crate) struct VerifySumsArgs {
    /// The directory holding SHA256SUMS, SHA256SUMS.note and the downloaded files.
    #[arg(default_value = ".", value_name = "DIR")]
    pub(crate) dir: PathBuf,
    #[command(flatten)]
    pub(crate) trust: TrustArgs,
}

#[derive(Debug, Args)]
pub(crate) struct LedgerArgs {
    /// How many rows, newest first.
    #[arg(long, default_value_t = 20)]
    pub(crate) limit: usize,
    /// Print JSON (one array of rows) instead of a table.
    #[arg(long)]
    pub(crate) json: bool,
    /// Only the rows of this run id.
    #[arg(long, value_name = "ID")]
    pub(crate) run: Option<String>,
    /// Only the rows of this agent.
    #[arg(long, value_name = "NAME")]
    pub(crate) agent: Option<String>,
    /// Only the rows of this system.
    #[arg(long, value_name = "NAME")]
    pub(crate) system: Option<String>,
    /// Only the rows with this decision (act, ask, refuse, recorded).
    #[arg(long, value_name = "DECISION")]
    pub(crate) decision: Option<String>,
    /// Only the rows with this verification level.
    #[arg(long, value_name = "LEVEL")]
    pub(crate) level: Option<String>,
    /// Only the rows at or after this time (RFC 3339, e.g. 2026-12-01T09:00:00Z).
    #[arg(long, value_name = "TIME")]
    pub(crate) since: Option<String>,
    /// Only the rows of this action id (its intent, ask and outcome).
    #[arg(long = "action", value_name = "ID")]
    pub(crate) action: Option<String>,
    /// Print the counters kept with the entries (totals by decision, level, system,
    /// agent, and decisions per hour) instead of rows.
    #[arg(long)]
    pub(crate) counts: bool,
}

#[derive(Debug, Args)]
pub(crate) struct CopyArgs {
    /// The ledger to copy: a file or a postgres:// URL.
    #[arg(long, value_name = "LEDGER")]
    pub(crate) from: PathBuf,
    /// The new ledger: a file or a postgres:// URL (its tenant must be empty).
    #[arg(long, value_name = "LEDGER")]
    pub(crate) to: PathBuf,
    /// The source's tenant [default: --tenant].
    #[arg(long, value_name = "NAME")]
    pub(crate) from_tenant: Option<String>,
    /// The target's tenant [default: --tenant].
    #[arg(long, value_name = "NAME")]
    pub(crate) to_tenant: Option<String>,
    /// Show progress on standard error even when it is not a terminal (a line about
    /// every second); on a terminal a bar shows anyway.
    #[arg(long)]
    pub(crate) progress: bool,
    #[command(flatten)]
    pub(crate) trust: TrustArgs,
}

/// Where trusted verifier keys come from.
#[derive(Debug, Args)]
pub(crate) struct TrustArgs {
    /// A trusted verifier key (`name+hash+base64`); repeatable.
    #[arg(long = "vkey", value_name = "KEY")]
    pub(crate) vkeys: Vec<String>,
    /// A file holding a trusted verifier key; repeatable.
    #[arg(long = "vkey-file", value_name = "FILE")]
    pub(crate) vkey_files: Vec<PathBuf>,
    /// Trusted verifier keys from the environment, comma-separated; used only when no
    /// --vkey or --vkey-file is given.
    #[arg(
        long = "vkey-env",
        env = "ATTEST_VKEY",
        hide_env_values = true,
        hide = true,
        value_name = "KEYS"
    )]
    pub(crate) vkey_env: Option<String>,
}

#[derive(Debug, Args)]
pub(crate) struct VerifyArgs {
    /// Show progress on standard error even when it is not a terminal (a line about
    /// every second); on a terminal a bar shows anyway.
    #[arg(long)]
    pub(crate) progress: bool,
    /// Check only the newest checkpoint's signature, the rows after it, and that they
    /// extend its tree (needs a trusted key).
    #[arg(long)]
    pub(crate) since_checkpoint: bool,
    #[command(flatten)]
    pub(crate) trust: TrustArgs,
    /// Checkpoint notes kept elsewhere (see `attest anchor`): a file of notes, a Git
    /// repository (every version of its `checkpoint`), or a URL; the ledger must contain
    /// and extend each of them.
    #[arg(long = "checkpoint", value_name = "FILE|REPO|URL")]
    pub(crate) anchors: Vec<String>,
    /// Check a published log (C2SP tlog-tiles, a directory or URL prefix) from its files
    /// alone instead of the ledger: the checkpoint's signature, every tile, every bundle,
    /// every body and the chain.
    #[arg(long, value_name = "DIR|URL", conflicts_with_all = ["since_checkpoint", "anchors"])]
    pub(crate) tiles: Option<String>,
    /// A witness's cosignature key (type 0x04); repeatable. With --tiles.
    #[arg(long = "witness-key", value_name = "KEY", requires = "tiles")]
    pub(crate) witness_keys: Vec<String>,
    /// How many of the --witness-key witnesses must have cosigned the checkpoint.
    #[arg(
        long = "witnesses",
        value_name = "N",
        default_value_t = 0,
        requires = "tiles"
    )]
    pub(crate) min_witnesses: usize,
    /// Print `{"ok","checked","broken_at","problems":[…],"checkpoint":{"size","root"}}`.
    #[arg(long)]
    pub(crate) json: bool,
    /// Also check an archive written by `attest prune --archive` against this ledger:
    /// its chain, each row's leaf in the ledger's tree, and its signed checkpoint.
    #[arg(long, value_name = "FILE")]
    pub(crate) archive: Vec<PathBuf>,
}

#[derive(Debug, Args)]
pub(crate) struct ExportArgs {
    /// `jsonl`: the stored canonical bodies, one per line, exactly the hashed bytes;
    /// `json`: the same bodies as one array; `csv`: one row per entry, main fields;
    /// `ietf`: records in the shape of draft-sharif-agent-audit-trail-00;
    /// `ocsf`: OCSF API Activity events (class 6003) for a SIEM; `eu-ai-act`: records
    /// with the EU AI Act's Article 12 record-keeping fields (docs/audit-bundle.md).
    #[arg(long, value_enum, default_value_t = ExportFormat::Jsonl, conflicts_with = "bundle")]
    pub(crate) format: ExportFormat,
    /// Write an auditor's bundle to FILE (a new file; tar): the rows --since or --run
    /// selects, an inclusion proof for each in the newest signed checkpoint, older
    /// checkpoints with consistency proofs, the verifier keys and a README.
    /// `attest verify-bundle FILE` checks it offline.
    #[arg(long, value_name = "FILE")]
    pub(crate) bundle: Option<PathBuf>,
    /// Bundle the rows at or after this time (RFC 3339, e.g. 2026-12-01T09:00:00Z).
    #[arg(long, value_name = "TIME", requires = "bundle", conflicts_with = "run")]
    pub(crate) since: Option<String>,
    /// Bundle the rows of this run id.
    #[arg(long, value_name = "ID", requires = "bundle")]
    pub(crate) run: Option<String>,
    /// Checkpoint notes kept elsewhere (see `attest anchor`), put in the bundle with a
    /// consistency proof each.
    #[arg(long = "checkpoint", value_name = "FILE|REPO|URL", requires = "bundle")]
    pub(crate) anchors: Vec<String>,
    /// The keys the bundle's checkpoints must verify under, listed in it [default: the
    /// signing key's verifier].
    #[command(flatten)]
    pub(crate) trust: TrustArgs,
    #[command(flatten)]
    pub(crate) key: KeyPathArgs,
}

#[derive(Debug, Args)]
pub(crate) struct VerifyBundleArgs {
    /// The bundle (from `attest export --bundle`).
    pub(crate) file: PathBuf,
    #[command(flatten)]
    pub(crate) trust: TrustArgs,
    /// Print `{"ok","origin","rows","tree_size","older_checkpoints","signers","problems":[{"file","line","seq","detail"}]}`.
    #[arg(long)]
    pub(crate) json: bool,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub(crate) enum ExportFormat {
    /// One canonical entry per line.
    Jsonl,
    /// One JSON array of canonical entries.
    Json,
    /// Comma-separated values, a header and one row per entry.
    Csv,
    /// Agent Audit Trail records (IETF draft-sharif-agent-audit-trail-00), one per line.
    Ietf,
    /// OCSF API Activity events (class 6003), one per line, each with the entry's seq
    /// and hash.
    Ocsf,
    /// EU AI Act Article 12 record-keeping records, one per line, each field's source
    /// documented in docs/audit-bundle.md.
    EuAiAct,
}

/// Where the signing key is.
#[derive(Debug, Args)]
pub(crate) struct KeyPathArgs {
    /// The private key file [default: signing.key beside the ledger].
    #[arg(
        long = "key",
        env = "ATTEST_SIGNING_KEY",
        hide_env_values = true,
        value_name = "PATH"
    )]
    pub(crate) key: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub(crate) struct KeygenArgs {
    /// The key's name: the checkpoint origin (no spaces or '+') [config: origin;
    /// default: attest-ledger].
    #[arg(long)]
    pub(crate) name: Option<String>,
    /// Generate the key on a PKCS#11 token instead of in a file: the key URI
    /// (`pkcs11:token=LABEL;object=NAME?module-path=MODULE`, NAME being the key's name);
    /// the private key never leaves the token. The PIN comes from ATTEST_PKCS11_PIN_FILE
    /// or ATTEST_PKCS11_PIN. Put the URI in the configuration's `key:` (or --key,
    /// ATTEST_SIGNING_KEY) to sign checkpoints there.
    #[arg(long, value_name = "URI", conflicts_with_all = ["out", "name"])]
    pub(crate) pkcs11: Option<String>,
    /// Where to write the private key [default: signing.key beside the ledger].
    #[arg(
        long = "out",
        env = "ATTEST_SIGNING_KEY",
        hide_env_values = true,
        value_name = "PATH"
    )]
    pub(crate) out: Option<PathBuf>,
}

#[derive(Debug, Subcommand)]
pub(crate) enum KeyCommand {
    /// Print the verifier key of the signing key.
    Show(KeyPathArgs),
}

#[derive(Debug, Args)]
pub(crate) struct CheckpointArgs {
    #[command(flatten)]
    pub(crate) key: KeyPathArgs,
    /// Print the newest stored checkpoint note instead of signing a new one.
    #[arg(long)]
    pub(crate) latest: bool,
    #[command(flatten)]
    pub(crate) witness: crate::cli_tiles::WitnessClientArgs,
    /// Keys that signed earlier checkpoints (a key rotation: the retired key's verifier),
    /// trusted beside the signing key's own.
    #[command(flatten)]
    pub(crate) trust: TrustArgs,
}

#[derive(Debug, Args)]
#[command(group(clap::ArgGroup::new("anchor").required(true).args(["file", "git", "url"])))]
pub(crate) struct AnchorArgs {
    /// The file to append the newest checkpoint note to.
    #[arg(long, value_name = "PATH")]
    pub(crate) file: Option<PathBuf>,
    /// A Git repository (created if missing) to commit the note to, as `checkpoint`.
    #[arg(long, value_name = "REPO")]
    pub(crate) git: Option<PathBuf>,
    /// Sign the Git commit (`git commit -S`, with the user's configured key).
    #[arg(long, requires = "git")]
    pub(crate) sign: bool,
    /// An HTTP endpoint to POST the note to (`text/plain`).
    #[arg(long, value_name = "URL")]
    pub(crate) url: Option<String>,
}

#[derive(Debug, Args)]
pub(crate) struct ProveArgs {
    /// The entry to prove (omit with --consistency).
    #[arg(required_unless_present = "consistency")]
    pub(crate) seq: Option<u64>,
    /// Prove that the tree of this size is a prefix of the newer one.
    #[arg(long, value_name = "OLD", conflicts_with = "seq")]
    pub(crate) consistency: Option<u64>,
    /// The tree size to prove against [default: the newest checkpoint's].
    #[arg(long)]
    pub(crate) size: Option<u64>,
    /// Print the proof as JSON (what `attest verify-proof` reads).
    #[arg(long)]
    pub(crate) json: bool,
    /// An archive from `attest prune --archive`: prove an entry a prune removed.
    #[arg(long, value_name = "FILE")]
    pub(crate) archive: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub(crate) struct VerifyProofArgs {
    /// The proof file (JSON from `attest prove --json`).
    pub(crate) file: PathBuf,
    #[command(flatten)]
    pub(crate) trust: TrustArgs,
}

#[derive(Debug, Args)]
pub(crate) struct EraseArgs {
    /// The subject, as the configured rule reads it (an e-mail address, a customer id);
    /// compared trimmed and in lower case.
    #[arg(long, value_name = "SUBJECT")]
    pub(crate) subject: String,
    /// Who asked for the erasure (a person, a ticket): recorded in the erasure row.
    #[arg(long, value_name = "WHO")]
    pub(crate) requested_by: String,
    /// Print the outcome as JSON.
    #[arg(long)]
    pub(crate) json: bool,
}

#[derive(Debug, Args)]
pub(crate) struct PruneArgs {
    /// Remove entries older than this many days.
    #[arg(long, value_name = "N")]
    pub(crate) older_than_days: u64,
    /// Remove without asking. Without it prune asks on a terminal, and refuses (exit 2)
    /// when there is no terminal to ask on.
    #[arg(long)]
    pub(crate) yes: bool,
    #[command(flatten)]
    pub(crate) key: KeyPathArgs,
    /// Write the removed rows and the checkpoint that covers them to FILE first (a new
    /// file, mode 0600); `attest verify --archive FILE` checks it and `attest prove
    /// --archive FILE` proves from it.
    #[arg(long, value_name = "FILE")]
    pub(crate) archive: Option<PathBuf>,
}

/// One tool call, described the way an agent makes it.
#[derive(Debug, Args)]
#[group(required = true, multiple = true)]
pub(crate) struct CallArgs {
    /// An MCP tool name or agent tool name (`mcp__github__create_issue`, `send_email`).
    #[arg(long, group = "call")]
    pub(crate) tool: Option<String>,
    /// The MCP server the tool belongs to, as you named it: the system, even when
    /// Attest's registry does not know it (`--server hr` makes `hr.*` rules apply).
    #[arg(long, requires = "tool")]
    pub(crate) server: Option<String>,
    /// An HTTP method, with --url.
    #[arg(long, requires = "url")]
    pub(crate) method: Option<String>,
    /// An HTTP URL, with --method.
    #[arg(long, requires = "method", group = "call")]
    pub(crate) url: Option<String>,
    /// The HTTP request body (JSON; GraphQL operations are read from it).
    #[arg(long, requires = "url")]
    pub(crate) body: Option<String>,
    /// An SDK call path (`stripe.Refund.create`).
    #[arg(long, group = "call")]
    pub(crate) sdk: Option<String>,
    /// A plain function name (`charge_card`).
    #[arg(long, group = "call")]
    pub(crate) function: Option<String>,
    /// The MCP tool's annotations, as its server lists them (`{"destructiveHint": true}`)
    /// or as hint names (`destructive`, `read-only`, `idempotent`, comma-separated): the
    /// call is then judged as `mcp-proxy` judges it.
    #[arg(long, requires = "tool", value_name = "JSON|HINTS")]
    pub(crate) annotations: Option<String>,
}

#[derive(Debug, Args)]
pub(crate) struct DetectArgs {
    #[command(flatten)]
    pub(crate) call: CallArgs,
    /// Print `{"system","verb","target","source","recognised"}` (and `risk`, `risk_hint`
    /// when the tool's annotations set the risk).
    #[arg(long)]
    pub(crate) json: bool,
}

#[derive(Debug, Subcommand)]
pub(crate) enum PolicyCommand {
    /// Show how a call is detected and decided, and why (each rule fired, in order).
    Explain(Box<PolicyExplainArgs>),
    /// Lint a policy file: print every problem with its line; exit 1 if there is any.
    Check(PolicyCheckArgs),
    /// Run expected-decision cases against a policy, as you would in your own CI.
    ///
    /// Each case's `call:` is described as the doors describe it, with the configured
    /// detection registry (the configuration file or --config). Exit 0 when every case
    /// passes, 1 when any fails.
    Test(PolicyTestArgs),
    /// Decide recorded actions again under a candidate policy (`--policy candidate.yaml`)
    /// and show what changes: transitions (act → ask, …) by the candidate's rules, with
    /// example rows, and the rules that need params the ledger never keeps (undecidable,
    /// counted, never guessed).
    ///
    /// One pass over the rows in bounded memory; imported rows against their recorded
    /// decision, shadow-mode rows against the verdict they were not held to, an intent
    /// and its outcome as one action. Reads only; exit 0.
    Replay(PolicyReplayArgs),
}

#[derive(Debug, Args)]
pub(crate) struct PolicyReplayArgs {
    /// Only rows appended in the last span (`7d`, `24h`).
    #[arg(long, value_parser = humantime::parse_duration)]
    pub(crate) since: Option<std::time::Duration>,
    /// Only rows of this run.
    #[arg(long, value_name = "ID")]
    pub(crate) run: Option<String>,
    /// Only rows of this agent.
    #[arg(long)]
    pub(crate) agent: Option<String>,
    /// Print `{"actions","unchanged","transitions":[{"from","to","count","rules","examples"}],"undecidable":[{"rule","count"}]}`.
    #[arg(long)]
    pub(crate) json: bool,
}

#[derive(Debug, Args)]
pub(crate) struct PolicyCheckArgs {
    /// The policy file.
    pub(crate) file: PathBuf,
    /// Print the problems as JSON.
    #[arg(long)]
    pub(crate) json: bool,
}

#[derive(Debug, Args)]
pub(crate) struct PolicyTestArgs {
    /// The policy file.
    pub(crate) file: PathBuf,
    /// The cases file (`cases:` with an action and `expect:` each).
    pub(crate) cases: PathBuf,
}

#[derive(Debug, Args)]
pub(crate) struct PolicyExplainArgs {
    #[command(flatten)]
    pub(crate) call: CallArgs,
    /// The call's params (JSON object; default: the --body when it is a JSON object).
    #[arg(long)]
    pub(crate) params: Option<String>,
    /// The target, instead of the one detection names (`re_123`, `chair@board.acme.com`).
    #[arg(long)]
    pub(crate) target: Option<String>,
    /// The person the agent acts for.
    #[arg(long)]
    pub(crate) actor: Option<String>,
    /// The agent making the call.
    #[arg(long)]
    pub(crate) agent: Option<String>,
    /// Print `{"system","verb","target","tier","decision","reasons","rules_fired","target_class","approvers","hold","windows"}`
    /// (`windows`: each `limit:` rule met, with its current `figure` in the ledger).
    #[arg(long)]
    pub(crate) json: bool,
}

#[derive(Debug, Subcommand)]
pub(crate) enum ConfigCommand {
    /// Validate the configuration file (and the policy, registry files, recipe
    /// directories and specs it names) and print every effective setting with its source
    /// (flag, env, file or default). Secrets are never printed: only the names of the
    /// variables that hold them and whether they are set.
    ///
    /// Exit 0: valid. Exit 1: a problem (named with file, line and field).
    Check(ConfigCheckArgs),
}

#[derive(Debug, Args)]
pub(crate) struct ConfigCheckArgs {
    /// Print `{"ok","file","settings":[{"key","value","source"}],"problems":[…]}`.
    #[arg(long)]
    pub(crate) json: bool,
}

#[derive(Debug, Subcommand)]
pub(crate) enum RecipesCommand {
    /// List the built-in recipes (and those in --dir): name, system, verbs, the
    /// credential variable and the base URL.
    List(RecipesListArgs),
    /// Lint recipe files (a directory of *.yaml, or one file); problems name file:line.
    ///
    /// Exit 0: every file loads. Exit 1: problems found. Exit 2: could not read.
    Check(RecipesCheckArgs),
}

#[derive(Debug, Args)]
pub(crate) struct RecipesListArgs {
    /// A directory of user recipes, listed before the built-in ones [default: the
    /// configuration's `recipes` directories].
    #[arg(long, value_name = "DIR")]
    pub(crate) dir: Option<PathBuf>,
    /// Print JSON (one array) instead of a table.
    #[arg(long)]
    pub(crate) json: bool,
}

#[derive(Debug, Args)]
pub(crate) struct RecipesCheckArgs {
    /// The directory (or file) to lint.
    pub(crate) path: PathBuf,
}

// --- approvals (issue 7) ---

#[derive(Debug, Args)]
pub(crate) struct PendingArgs {
    /// Print a JSON array of requests (params shown only as their preview).
    #[arg(long)]
    pub(crate) json: bool,
}

#[derive(Debug, Args)]
pub(crate) struct IntentsArgs {
    #[command(subcommand)]
    pub(crate) command: Option<IntentsCommand>,
    /// Print a JSON array of open intents (`seq`, `action_id`, `system`, `verb`).
    #[arg(long)]
    pub(crate) json: bool,
}

#[derive(Debug, Subcommand)]
pub(crate) enum IntentsCommand {
    /// Record how an open intent ended, as you found it at its system.
    Resolve(IntentResolveArgs),
}

#[derive(Debug, Args)]
#[command(group(clap::ArgGroup::new("outcome").required(true).args(["ran", "not_run"])))]
pub(crate) struct IntentResolveArgs {
    /// The open intent's seq (`attest intents` lists them).
    pub(crate) seq: u64,
    /// It ran: the record is at its system.
    #[arg(long)]
    pub(crate) ran: bool,
    /// It did not run: the record is not at its system.
    #[arg(long)]
    pub(crate) not_run: bool,
    /// A file holding your approver token (mode 0600) [default: the token in
    /// $ATTEST_APPROVER_TOKEN]. Tokens are never taken as arguments, where `ps` shows them.
    #[arg(long, value_name = "FILE")]
    pub(crate) token_file: Option<PathBuf>,
    /// Print the receipt as JSON (`{"seq", "action_id", "intent_seq", "ran", "approver"}`).
    #[arg(long)]
    pub(crate) json: bool,
}

/// Approve or reject.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum Verdict {
    /// Run the action (with --edits: run the edited action, if policy still allows it).
    Approve,
    /// Do not run it.
    Reject,
}

#[derive(Debug, Args)]
pub(crate) struct ConfirmArgs {
    /// The request's id, or its resume token.
    pub(crate) id: String,
    /// approve or reject.
    #[arg(value_enum)]
    pub(crate) verdict: Verdict,
    /// Changes to the params: a JSON object merged into them (RFC 7396 merge patch).
    #[arg(long, value_name = "JSON")]
    pub(crate) edits: Option<String>,
    /// A file holding your approver token (mode 0600) [default: the token in
    /// $ATTEST_APPROVER_TOKEN]. Tokens are never taken as arguments, where `ps` shows them.
    #[arg(long, value_name = "FILE")]
    pub(crate) token_file: Option<PathBuf>,
    /// A note recorded with the decision.
    #[arg(long, value_name = "TEXT")]
    pub(crate) note: Option<String>,
    /// With approve: approve the next calls like this one too, as a bounded grant:
    /// `calls=N,for=LENGTH[,when=EXPR]` — at most N calls within LENGTH (30m, 1h, 2d), by
    /// this request's authenticated agent, of its system and verb, that the same rules ask
    /// about, each call's params meeting EXPR (CEL over `params`, e.g. `params.amount <=
    /// 50`; `when=` comes last). Recorded in the ledger; `attest grants` lists and revokes.
    #[arg(long, value_name = "SPEC")]
    pub(crate) grant: Option<attest_core::approvals::GrantSpec>,
}

#[derive(Debug, Args)]
pub(crate) struct ServeArgs {
    /// The address to listen on [config: inbox.listen; default: 127.0.0.1].
    #[arg(long)]
    pub(crate) host: Option<String>,
    /// The port (0: any free port; the address is printed) [config: inbox.listen;
    /// default: 8321].
    #[arg(long)]
    pub(crate) port: Option<u16>,
    /// A file holding Slack's signing secret: enables POST /slack/interactions
    /// (approve/reject buttons; the presser's Slack user id must belong to an approver)
    /// [default: the secret in $ATTEST_SLACK_SIGNING_SECRET, or the variable the
    /// configuration's notify.slack.signing_secret_env names].
    #[arg(long, value_name = "FILE")]
    pub(crate) slack_signing_secret_file: Option<PathBuf>,
    /// A file holding the key for one-click approve/reject links: enables /links/…
    /// [default: the key in $ATTEST_LINK_KEY, or the variable the configuration's
    /// notify.link_key_env names].
    #[arg(long, value_name = "FILE")]
    pub(crate) link_key_file: Option<PathBuf>,
    /// The inbox's public base URL, for links and for the Host and Origin checks
    /// [config: inbox.public_url; default: http://HOST:PORT].
    #[arg(long, value_name = "URL")]
    pub(crate) public_url: Option<String>,
    /// A request header naming the approver, set by an authenticating reverse proxy in
    /// front of the inbox (for example `X-Forwarded-User`). Only for a proxy that always
    /// sets or strips it: whoever can reach the inbox directly can send any value
    /// [config: inbox.trusted_identity_header].
    #[arg(long, value_name = "HEADER")]
    pub(crate) trusted_identity_header: Option<String>,
    /// A file (mode 0600) holding the token a metrics scrape must send as
    /// `Authorization: Bearer …` (/metrics); without it, only loopback peers may scrape.
    #[arg(long, value_name = "FILE")]
    pub(crate) metrics_token_file: Option<PathBuf>,
    #[command(flatten)]
    pub(crate) review: crate::review::ServeReviewArgs,
}

#[derive(Debug, Subcommand)]
pub(crate) enum ApproversCommand {
    /// Register an approver and print their personal token (shown only now; only its
    /// SHA-256 is kept).
    Add(ApproverAddArgs),
    /// List the approvers (never their tokens).
    List(ApproverListArgs),
    /// Revoke an approver: their token, Slack id and links decide nothing from now on.
    Revoke(ApproverRevokeArgs),
}

#[derive(Debug, Args)]
pub(crate) struct ApproverAddArgs {
    /// The name decisions are recorded under, as a rule's `approvers` list names it
    /// (for example an e-mail address).
    pub(crate) name: String,
    /// The Slack user id (U…) whose button presses count as this approver's.
    #[arg(long, value_name = "ID")]
    pub(crate) slack_user: Option<String>,
    /// Write the token to FILE (created 0600) instead of printing it.
    #[arg(long, value_name = "FILE")]
    pub(crate) token_file: Option<PathBuf>,
    /// Print `{"name","slack_user","token"}` (token null with --token-file).
    #[arg(long)]
    pub(crate) json: bool,
}

#[derive(Debug, Args)]
pub(crate) struct ApproverListArgs {
    /// Print a JSON array of `{"name","slack_user","created_at","revoked_at"}`.
    #[arg(long)]
    pub(crate) json: bool,
}

#[derive(Debug, Args)]
pub(crate) struct ApproverRevokeArgs {
    /// The approver to revoke.
    pub(crate) name: String,
}

#[derive(Debug, Subcommand)]
pub(crate) enum AgentsCommand {
    /// Register an agent and print its token (shown only now; only its SHA-256 is kept).
    Add(AgentAddArgs),
    /// List the agents (never their tokens).
    List(AgentListArgs),
    /// Revoke an agent: its token names nobody from now on.
    Revoke(AgentRevokeArgs),
}

#[derive(Debug, Args)]
pub(crate) struct AgentAddArgs {
    /// The name the agent's calls are recorded under (what policy's `match.agent` sees).
    pub(crate) name: String,
    /// Write the token to FILE (created 0600) instead of printing it.
    #[arg(long, value_name = "FILE")]
    pub(crate) token_file: Option<PathBuf>,
    /// Print `{"name","token"}` (token null with --token-file).
    #[arg(long)]
    pub(crate) json: bool,
}

#[derive(Debug, Args)]
pub(crate) struct AgentListArgs {
    /// Print a JSON array of `{"name","created_at","revoked_at"}`.
    #[arg(long)]
    pub(crate) json: bool,
}

#[derive(Debug, Args)]
pub(crate) struct AgentRevokeArgs {
    /// The agent to revoke.
    pub(crate) name: String,
}

#[derive(Debug, Subcommand)]
pub(crate) enum StreamCommand {
    /// Send every row after each sink's cursor, then follow the ledger until stopped
    /// (SIGINT, SIGTERM); a sink that is down is retried with backoff.
    ///
    /// Exit 0: stopped, or with --once caught up. Exit 2: no `stream:` configured, a
    /// sink that failed with --once (its cursor did not move: the next run resends), or
    /// rows pruned before they were streamed.
    Run(StreamRunArgs),
    /// Each sink's cursor (the newest row it acknowledged), the ledger's head, the lag
    /// between them, and the streamer holding the sink's lease.
    Status(StreamStatusArgs),
}

#[derive(Debug, Args)]
pub(crate) struct StreamRunArgs {
    /// Stop once every sink has acknowledged the rows there are (for a cron job or the
    /// end of a run).
    #[arg(long)]
    pub(crate) once: bool,
}

#[derive(Debug, Args)]
pub(crate) struct StreamStatusArgs {
    /// Print a JSON array: sink, cursor, head, lag, holder.
    #[arg(long)]
    pub(crate) json: bool,
}

#[derive(Debug, Subcommand)]
pub(crate) enum GrantsCommand {
    /// List every grant: its agent, system and verb, calls used of its calls, until
    /// when, its condition, and whether it is active, expired or revoked.
    List(GrantListArgs),
    /// Revoke a grant: from the next call on, in every process, it covers nothing
    /// (recorded in the ledger).
    Revoke(GrantRevokeArgs),
}

#[derive(Debug, Args)]
pub(crate) struct GrantListArgs {
    /// Print a JSON array of grants (with `used` and `state`).
    #[arg(long)]
    pub(crate) json: bool,
}

#[derive(Debug, Args)]
pub(crate) struct GrantRevokeArgs {
    /// The grant's id (`grant-…`, as `attest grants list` shows).
    pub(crate) id: String,
    /// Print the revoked grant and its ledger row as JSON.
    #[arg(long)]
    pub(crate) json: bool,
}
// --- end approvals ---

#[derive(Debug, Args)]
pub(crate) struct ImportArgs {
    /// The JSON-lines file (`-` for standard input).
    pub(crate) file: PathBuf,
    /// Show progress on standard error even when it is not a terminal (a line about
    /// every second); on a terminal a bar shows anyway.
    #[arg(long)]
    pub(crate) progress: bool,
}

/// Who the servers record as acting, and how they answer `ask`.
#[derive(Debug, Clone, Args)]
pub(crate) struct ModeArgs {
    /// How `ask` is answered: block (ask a person through the approval store and wait up
    /// to --timeout, then hold), pending (hold at once and return a resume token), auto
    /// (approve everything; demos only).
    #[arg(long, value_enum, default_value_t = attest_doors::Mode::Block)]
    pub(crate) mode: attest_doors::Mode,
    /// Seconds `block` waits for a person's answer before returning the call as held
    /// [config: approvals.wait; default: 300].
    #[arg(long, value_name = "SECS")]
    pub(crate) timeout: Option<u64>,
    /// Seconds an approval may be used once a person gives it; a resume after that is
    /// refused and recorded as `expired` (ask again) [config: approvals.use_by;
    /// default: 3600].
    #[arg(long, value_name = "SECS")]
    pub(crate) use_by: Option<u64>,
    /// The agent recorded for each call [env: ATTEST_AGENT; config: agent].
    #[arg(long)]
    pub(crate) agent: Option<String>,
    /// The person the agent acts for, recorded for each call [env: ATTEST_ACTOR; config:
    /// actor].
    #[arg(long)]
    pub(crate) actor: Option<String>,
    /// The run (session, job) recorded for each call that names none; without it, one
    /// is generated for this session. An MCP request's `_meta` (`attest/run`, `runId`) or
    /// the gateway's `X-Attest-Run` header names a call's own [env: ATTEST_RUN].
    #[arg(long = "run", value_name = "ID")]
    pub(crate) run: Option<String>,
    /// Shadow mode: decide every call as usual, record the verdict in the row's `shadow`
    /// field, and run it as if policy said act (see what a policy would break before
    /// enforcing it) [config: mode: shadow]. Not `--mode`, which says how asks wait.
    #[arg(long)]
    pub(crate) shadow: bool,
}

#[derive(Debug, Args)]
pub(crate) struct McpProxyArgs {
    /// The server's name: the system of every call, even one Attest's registry does not
    /// know (`--server hr` makes `hr.*` rules apply). Without it, a name guessed from the
    /// command (filesystem for @modelcontextprotocol/server-filesystem) is only a hint.
    #[arg(long)]
    pub(crate) server: Option<String>,
    #[command(flatten)]
    pub(crate) serve: ModeArgs,
    /// A remote upstream MCP server's streamable-HTTP endpoint (`https://…/mcp`), instead
    /// of a command.
    #[arg(long, value_name = "URL", conflicts_with = "command")]
    pub(crate) url: Option<String>,
    /// Sign in to the --url upstream with OAuth (a token from `attest mcp-login URL`,
    /// refreshed when it expires) instead of a fixed bearer token.
    #[arg(long, requires = "url", conflicts_with = "bearer_env")]
    pub(crate) oauth: bool,
    #[command(flatten)]
    pub(crate) oauth_client: OAuthClientArgs,
    /// With --oauth, how a missing token or one short of scope is replaced: `never`
    /// (the upstream is not reached; run `attest mcp-login`), `browser` (the URL is
    /// printed on stderr, the redirect awaited) or `headless`.
    #[arg(long, value_enum, default_value = "never", requires = "oauth")]
    pub(crate) login: attest_doors::mcp::oauth_client::LoginMode,
    /// The variable holding the bearer token sent to the --url upstream for a client on
    /// stdio (a client on --listen sends its own, which is passed through). The token is
    /// never recorded or logged.
    #[arg(long, value_name = "VAR", requires = "url")]
    pub(crate) bearer_env: Option<String>,
    /// Serve clients over streamable HTTP on this loopback address (`127.0.0.1:PORT`; 0
    /// picks a port, printed on stdout) instead of stdin/stdout.
    #[arg(long, value_name = "ADDR")]
    pub(crate) listen: Option<String>,
    /// A browser origin (`https://app.example.com`) whose pages may reach --listen, besides
    /// pages on its own loopback port; any other `Origin` is refused with 403. Repeatable.
    #[arg(long, value_name = "ORIGIN", requires = "listen")]
    pub(crate) allow_origin: Vec<String>,
    /// Make --listen an OAuth protected resource of this authorization server (its issuer
    /// URL): clients need an access token it issued for this resource; the token's subject
    /// is the call's agent. The token is never passed upstream, recorded or logged.
    #[arg(long, value_name = "URL", requires = "listen")]
    pub(crate) oauth_issuer: Option<String>,
    /// The authorization server's keys (JWKS URL), when its metadata does not name them.
    #[arg(long, value_name = "URL", requires = "oauth_issuer")]
    pub(crate) oauth_jwks: Option<String>,
    /// This resource's URL as clients reach it (the tokens' audience), when not
    /// `http://127.0.0.1:PORT/mcp` (behind a reverse proxy, its public URL).
    #[arg(long, value_name = "URL", requires = "oauth_issuer")]
    pub(crate) resource: Option<String>,
    /// A file (mode 0600) holding the token a metrics scrape must send as
    /// `Authorization: Bearer …` (/metrics on --listen); without it, only loopback peers may scrape.
    #[arg(long, value_name = "FILE", requires = "listen")]
    pub(crate) metrics_token_file: Option<PathBuf>,
    /// The upstream MCP server's command and arguments.
    #[arg(last = true, required_unless_present = "url", value_name = "COMMAND")]
    pub(crate) command: Vec<String>,
}

/// Who Attest is to a remote MCP server's authorization server, and where its tokens are.
#[derive(Debug, Args)]
pub(crate) struct OAuthClientArgs {
    /// The directory of OAuth token files, one per server URL (mode 0600); default:
    /// $XDG_STATE_HOME/attest/oauth, else ~/.local/state/attest/oauth.
    #[arg(long, value_name = "DIR", env = "ATTEST_OAUTH_TOKENS")]
    pub(crate) oauth_tokens: Option<PathBuf>,
    /// A client ID registered with the authorization server out of band (else a client
    /// ID metadata document, else dynamic registration).
    #[arg(long, value_name = "ID")]
    pub(crate) oauth_client_id: Option<String>,
    /// The variable holding that client's secret (never printed).
    #[arg(long, value_name = "VAR", requires = "oauth_client_id")]
    pub(crate) oauth_client_secret_env: Option<String>,
    /// A PEM file (mode 0600) with the private key that signs Attest's client assertion
    /// (`private_key_jwt`, RFC 7523), for --oauth-grant client-credentials instead of a
    /// secret.
    #[arg(
        long,
        value_name = "FILE",
        requires = "oauth_client_id",
        conflicts_with = "oauth_client_secret_env"
    )]
    pub(crate) oauth_client_key: Option<PathBuf>,
    /// The client assertion's algorithm (the key's kind): RS256, RS384, RS512, ES256 or
    /// ES384; default ES256.
    #[arg(long, value_enum, value_name = "ALG", requires = "oauth_client_key")]
    pub(crate) oauth_client_key_alg: Option<attest_doors::mcp::oauth_client::KeyAlgorithm>,
    /// The HTTPS URL of a client ID metadata document naming Attest, used as the client
    /// ID by authorization servers that accept one.
    #[arg(long, value_name = "URL")]
    pub(crate) oauth_client_metadata_url: Option<String>,
    /// A scope to ask for (repeatable); without one, the server's challenge or metadata
    /// says.
    #[arg(long = "oauth-scope", value_name = "SCOPE")]
    pub(crate) oauth_scopes: Vec<String>,
    /// `authorization-code`: a person signs in once, the token is refreshed after;
    /// `client-credentials`: Attest's own client ID and secret (or key) get the token,
    /// with no person (needs --oauth-client-id and --oauth-client-secret-env or
    /// --oauth-client-key).
    #[arg(long, value_enum, default_value = "authorization-code")]
    pub(crate) oauth_grant: attest_doors::mcp::oauth_client::Grant,
}

#[derive(Debug, Args)]
pub(crate) struct McpLoginArgs {
    /// The MCP server's streamable-HTTP endpoint (`https://…/mcp`).
    #[arg(value_name = "URL")]
    pub(crate) url: String,
    #[command(flatten)]
    pub(crate) oauth_client: OAuthClientArgs,
    /// `browser`: print the authorization URL and wait for the redirect; `headless`:
    /// request it and take the code from the redirect (authorization servers that
    /// approve without a person).
    #[arg(long, value_enum, default_value = "browser")]
    pub(crate) login: attest_doors::mcp::oauth_client::LoginMode,
    /// The loopback port the browser is sent back to (`http://127.0.0.1:PORT/callback`);
    /// 0 picks a free one.
    #[arg(long, value_name = "PORT", default_value_t = 0)]
    pub(crate) redirect_port: u16,
    /// Print the result as JSON (`{"url", "token_file", "signed_in"}`; no token in it).
    #[arg(long)]
    pub(crate) json: bool,
}

#[derive(Debug, Args)]
pub(crate) struct McpServerArgs {
    /// The agent recorded by attest_record when the call names none [env: ATTEST_AGENT;
    /// config: agent].
    #[arg(long)]
    pub(crate) agent: Option<String>,
    /// The actor recorded by attest_record when the call names none [env: ATTEST_ACTOR;
    /// config: actor].
    #[arg(long)]
    pub(crate) actor: Option<String>,
    /// Shadow mode: decide every call as usual, record the verdict in the row's `shadow`
    /// field, and run it as if policy said act (see what a policy would break before
    /// enforcing it) [config: mode: shadow]. Not `--mode`, which says how asks wait.
    #[arg(long)]
    pub(crate) shadow: bool,
}

#[derive(Debug, Subcommand)]
pub(crate) enum HookCommand {
    /// Answer one Claude Code hook event (PreToolUse, PermissionRequest, PostToolUse,
    /// PostToolUseFailure; JSON on stdin) in Claude Code's JSON contract.
    ///
    /// Before the call, policy decides it (a Bash command by what it does, a file write
    /// by its path, an MCP tool `mcp__server__tool` by its name) and the answer is
    /// `allow`, `deny` (recorded as refused) or `ask`; after it, the outcome is recorded
    /// (the tool output is hashed, never stored). Anything that cannot be decided is denied.
    ClaudeCode(HookArgs),
    /// Answer one Codex CLI hook event (PreToolUse, PostToolUse) in Codex's contract.
    ///
    /// Codex honours only `deny` before a call: an `ask` is a deny with the reason.
    Codex(HookArgs),
    /// Answer one Gemini CLI hook event (BeforeTool, AfterTool) in Gemini's contract.
    ///
    /// Gemini has no `ask`: an `ask` is a deny with the reason.
    Gemini(HookArgs),
    /// Answer one Cursor hook event (beforeShellExecution, beforeMCPExecution,
    /// beforeReadFile, preToolUse, their after-events) in Cursor's contract.
    Cursor(HookArgs),
    /// Answer one GitHub Copilot CLI hook event (preToolUse, postToolUse) in its contract.
    ///
    /// An `ask` is a deny with the reason: only a deny is sure to be enforced.
    Copilot(HookArgs),
    /// Add Attest's hook to a coding agent's settings (or remove it with --remove).
    ///
    /// Adds one entry per hook event and keeps every other setting and hook as it was;
    /// run again, it updates its own entry instead of adding a second. The file is
    /// written atomically, the previous one kept beside it as `<file>.attest-backup`; a
    /// file that is not valid JSON is refused untouched.
    Install(InstallArgs),
    /// Say whether the agent will run Attest's hook: installed, trusted, loaded.
    ///
    /// Read from the agent's own files: its hook settings (installed), its trust store
    /// (trusted: Copilot CLI's trusted folders, Codex's project and hook trust, Gemini
    /// CLI's trusted folders), and what makes it skip or break a hook (loaded: hooks
    /// switched off in its settings, a hook program it cannot find, an Attest
    /// configuration that does not load). Names every file it read; exits 1 when any of
    /// the three is missing.
    Doctor(DoctorArgs),
}

/// Which coding agent a hook answers, or whose settings `hook install` edits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum AgentKind {
    /// Claude Code.
    ClaudeCode,
    /// OpenAI Codex CLI.
    Codex,
    /// Google Gemini CLI.
    Gemini,
    /// Cursor.
    Cursor,
    /// GitHub Copilot CLI.
    Copilot,
}

/// Who answers an `ask` from a hook.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum HookApprovalsArg {
    /// The agent's own permission prompt (nobody is authenticated; the row says so).
    Prompt,
    /// A durable Attest approval request, answered by a registered approver.
    Attest,
}

#[derive(Debug, Args)]
pub(crate) struct HookArgs {
    /// The agent recorded for the calls [env: ATTEST_AGENT; config: agent; default: the
    /// agent's own name, `claude-code`, `codex`, `gemini`, `cursor`, `copilot`].
    #[arg(long)]
    pub(crate) agent: Option<String>,
    /// The actor recorded for the calls [env: ATTEST_ACTOR; config: actor].
    #[arg(long)]
    pub(crate) actor: Option<String>,
    /// Shadow mode: decide every call as usual, record the verdict in the row's `shadow`
    /// field, and answer allow as if policy said act (see what a policy would break before
    /// enforcing it) [config: mode: shadow]. Not `--mode`, which says how asks wait.
    #[arg(long)]
    pub(crate) shadow: bool,
    /// Who answers an `ask`: the agent's own prompt, or a durable Attest approval
    /// request [config: hook.approvals; default: prompt].
    #[arg(long, value_enum)]
    pub(crate) approvals: Option<HookApprovalsArg>,
    /// With `--approvals attest`, how long the hook waits for an approver before it
    /// answers deny ("held for approval"); kept below the agent's own hook timeout
    /// [config: hook.wait; default: 10 s under the agent's default timeout].
    #[arg(long, value_name = "SECS")]
    pub(crate) wait: Option<u64>,
}

#[derive(Debug, Args)]
pub(crate) struct InstallArgs {
    /// The agent whose settings to edit.
    #[arg(value_enum)]
    pub(crate) agent: AgentKind,
    /// The project's settings (`.claude/settings.json`, `.codex/hooks.json`,
    /// `.gemini/settings.json`, `.cursor/hooks.json`, `.github/hooks/attest.json`) under
    /// --dir (the default).
    #[arg(long, conflicts_with = "user")]
    pub(crate) project: bool,
    /// The user's settings (`~/.claude/settings.json`, `~/.codex/hooks.json`,
    /// `~/.gemini/settings.json`, `~/.cursor/hooks.json`).
    #[arg(long)]
    pub(crate) user: bool,
    /// The project directory [default: the current directory].
    #[arg(long, value_name = "DIR")]
    pub(crate) dir: Option<PathBuf>,
    /// Remove Attest's entries instead (other hooks and settings stay).
    #[arg(long)]
    pub(crate) remove: bool,
    /// Show the change as a diff and write nothing.
    #[arg(long)]
    pub(crate) dry_run: bool,
    /// The program the hook runs [default: `attest` when an `attest` is on PATH, else this
    /// binary's absolute path: a desktop agent's PATH may lack the folder it is in].
    #[arg(long, value_name = "PROGRAM")]
    pub(crate) program: Option<String>,
}

#[derive(Debug, Args)]
pub(crate) struct DoctorArgs {
    /// The agent to check.
    #[arg(value_enum)]
    pub(crate) agent: AgentKind,
    /// The project directory [default: the current directory].
    #[arg(long, value_name = "DIR")]
    pub(crate) dir: Option<PathBuf>,
    /// The report as one JSON object.
    #[arg(long)]
    pub(crate) json: bool,
}

#[derive(Debug, Args)]
pub(crate) struct GatewayArgs {
    /// The address to listen on (loopback unless told otherwise).
    #[arg(long, default_value = "127.0.0.1")]
    pub(crate) host: String,
    /// The port (0 picks a free one; the address is printed on stdout).
    #[arg(long, default_value_t = 8322)]
    pub(crate) port: u16,
    /// The upstream base URL for requests that name none in the path or X-Attest-Upstream
    /// [config: gateway.upstream].
    #[arg(long, value_name = "URL")]
    pub(crate) upstream: Option<String>,
    /// An OpenAPI spec (JSON or YAML) whose operation ids name the verbs of its paths
    /// [config: openapi, every spec listed].
    #[arg(long, value_name = "SPEC")]
    pub(crate) openapi: Option<PathBuf>,
    /// Record reads too (they are forwarded without a record otherwise).
    #[arg(long)]
    pub(crate) record_reads: bool,
    /// Largest request or response body, in bytes.
    #[arg(long, value_name = "BYTES", default_value_t = 10 * 1024 * 1024)]
    pub(crate) max_body: usize,
    /// Seconds one upstream request may take.
    #[arg(long, value_name = "SECS", default_value_t = 60)]
    pub(crate) upstream_timeout: u64,
    /// A host (`HOST` or `HOST:PORT`) that a URL in the path or X-Attest-Upstream may name
    /// besides --upstream's own origin; repeatable. With --upstream or any
    /// --allow-upstream set, every other host is refused (403) [config:
    /// gateway.allow_upstream, used when no flag is given].
    #[arg(long = "allow-upstream", value_name = "HOST")]
    pub(crate) allow_upstream: Vec<String>,
    /// A file holding the token every request must carry in X-Attest-Token (else 401);
    /// or set ATTEST_GATEWAY_TOKEN. Required with a --host beyond loopback.
    #[arg(long, value_name = "FILE")]
    pub(crate) token_file: Option<PathBuf>,
    /// A tenant a request may name in X-Attest-Tenant, to be recorded in that tenant's
    /// own chain (with its approvals and signing key); repeatable. Any other tenant is a
    /// 400; not with --tenant, which pins the gateway to one tenant (another is a 403).
    #[arg(long = "allow-tenant", value_name = "NAME")]
    pub(crate) allow_tenant: Vec<String>,
    /// A file (mode 0600) holding the token a metrics scrape must send as
    /// `Authorization: Bearer …` (/_attest/metrics); without it, only loopback peers may scrape.
    #[arg(long, value_name = "FILE")]
    pub(crate) metrics_token_file: Option<PathBuf>,
    #[command(flatten)]
    pub(crate) serve: ModeArgs,
}

/// `attest sandbox`.
#[derive(Debug, Args)]
pub(crate) struct SandboxArgs {
    /// The project whose protected files to keep read-only [default: the nearest folder at
    /// or above this one that holds `.attest/` or `.git`, else this one].
    #[arg(long, value_name = "DIR")]
    pub(crate) project: Option<PathBuf>,
    /// Print what would be read-only, hidden and not covered, and run nothing.
    #[arg(long)]
    pub(crate) plan: bool,
    /// With --plan: print the plan as JSON.
    #[arg(long, requires = "plan")]
    pub(crate) json: bool,
    /// The sandbox's own second step (it starts itself with it).
    #[arg(long, hide = true, value_name = "UID:GID")]
    pub(crate) stage_two: Option<String>,
    /// The command and its arguments, after `--`.
    #[arg(last = true, value_name = "COMMAND")]
    pub(crate) command: Vec<std::ffi::OsString>,
}

/// `attest --help`'s commands, grouped by what a person does with them, in this order.
/// Every subcommand is in exactly one group (`every_command_is_in_one_group`).
pub(crate) const GROUPS: &[(&str, &[&str])] = &[
    (
        "Start",
        &[
            "demo",
            "config",
            "policy",
            "detect",
            "recipes",
            "completions",
            "man",
        ],
    ),
    (
        "Doors (put Attest between an agent and its tools)",
        &[
            "mcp-proxy",
            "mcp-login",
            "mcp-server",
            "gateway",
            "hook",
            "sandbox",
        ],
    ),
    (
        "Review (decide, and see what agents did)",
        &[
            "serve", "pending", "confirm", "grants", "digest", "ledger", "intents",
        ],
    ),
    (
        "Evidence (prove what happened)",
        &[
            "verify",
            "checkpoint",
            "prove",
            "verify-proof",
            "export",
            "verify-bundle",
            "anchor",
            "publish",
            "monitor",
            "witness",
            "verify-sums",
            "stream",
        ],
    ),
    (
        "Admin",
        &[
            "keygen",
            "key",
            "approvers",
            "agents",
            "copy",
            "prune",
            "erase",
            "import",
        ],
    ),
];

/// The `attest` command with its top-level help grouped as [`GROUPS`] says; each command's
/// line is its own `about`, so the list cannot drift from the commands.
pub(crate) fn command() -> clap::Command {
    use clap::CommandFactory;
    let cmd = Cli::command();
    let width = GROUPS
        .iter()
        .flat_map(|(_, names)| names.iter().map(|name| name.len()))
        .max()
        .unwrap_or(0);
    let mut groups = String::new();
    for (heading, names) in GROUPS {
        groups.push_str(&format!("{heading}:\n"));
        for name in *names {
            let about = cmd
                .find_subcommand(name)
                .and_then(|sub| sub.get_about())
                .map(|about| about.to_string())
                .unwrap_or_default();
            groups.push_str(&format!("  {name:<width$}  {about}\n"));
        }
        groups.push('\n');
    }
    let template = format!(
        "{{before-help}}{{about-with-newline}}\n{{usage-heading}} {{usage}}\n\n{groups}\
         Options:\n{{options}}{{after-help}}"
    );
    cmd.help_template(template)
}

/// The command line, read with [`command`]'s help (clap prints help, a version or a usage
/// error and exits, as `Cli::parse` does).
pub(crate) fn parse() -> Cli {
    use clap::FromArgMatches;
    Cli::from_arg_matches(&command().get_matches()).unwrap_or_else(|err| err.exit())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_command_is_in_one_group() {
        use clap::CommandFactory;
        let listed: Vec<&str> = GROUPS
            .iter()
            .flat_map(|(_, names)| names.iter().copied())
            .collect();
        let cmd = Cli::command();
        let commands: Vec<&str> = cmd.get_subcommands().map(|sub| sub.get_name()).collect();
        for name in &commands {
            let times = listed.iter().filter(|listed| *listed == name).count();
            assert_eq!(times, 1, "{name} is in {times} groups of cli::GROUPS");
        }
        for name in &listed {
            assert!(
                commands.contains(name),
                "cli::GROUPS lists {name}, which is no command"
            );
        }
    }
}

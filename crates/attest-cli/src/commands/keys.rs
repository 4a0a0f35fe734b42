use std::io::Write;
use std::process::ExitCode;

use anyhow::Context;
use attest_ledger::SigningKey;

use crate::cli::{KeyCommand, KeygenArgs};
use crate::config::Config;

pub(crate) fn keygen(config: &Config, args: &KeygenArgs) -> anyhow::Result<ExitCode> {
    if let Some(uri) = &args.pkcs11 {
        let uri = attest_ledger::TokenKeyUri::parse(uri)?;
        let verifier = attest_ledger::generate_token_key(&uri, &crate::config::token_pin()?)?;
        eprintln!(
            "attest: generated an Ed25519 key labelled {:?} on token {:?}; it never leaves the \
             token. Sign with it by setting the key to its URI (config `key:`, --key or \
             ATTEST_SIGNING_KEY)",
            uri.object, uri.token
        );
        writeln!(std::io::stdout().lock(), "{verifier}")?;
        return Ok(ExitCode::SUCCESS);
    }
    let path = config.key_path(args.out.as_deref());
    if path.exists() {
        anyhow::bail!("{} already exists; not overwriting a key", path.display());
    }
    // A tenant signs under an origin of its own (`attest-ledger/acme`) unless one is named.
    let name = match (
        args.name.as_deref().or(config.file.origin.as_deref()),
        config.tenant(),
    ) {
        (Some(name), _) => name.to_owned(),
        (None, Some(tenant)) => format!("attest-ledger/{tenant}"),
        (None, None) => "attest-ledger".to_owned(),
    };
    let (key, private) = SigningKey::generate(&name)?;
    SigningKey::write_new(&path, &private)?;
    let public = path.with_extension("pub");
    std::fs::write(&public, format!("{}\n", key.verifier()))
        .with_context(|| format!("cannot write {}", public.display()))?;
    eprintln!(
        "attest: wrote the signing key to {} (mode 0600) and its verifier key to {}",
        path.display(),
        public.display()
    );
    eprintln!(
        "attest: keep the verifier key where the ledger's writers cannot change it; \
         verify with --vkey or ATTEST_VKEY"
    );
    writeln!(std::io::stdout().lock(), "{}", key.verifier())?;
    Ok(ExitCode::SUCCESS)
}

pub(crate) fn key(config: &Config, command: &KeyCommand) -> anyhow::Result<ExitCode> {
    match command {
        KeyCommand::Show(args) => {
            let key = config.signing_key(args)?;
            writeln!(std::io::stdout().lock(), "{}", key.verifier())?;
            Ok(ExitCode::SUCCESS)
        }
    }
}

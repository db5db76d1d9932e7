//! `backstop token new NAME`: a random API token and its config entry.

use crate::cli::TokenCommand;
use anyhow::{Result, bail};
use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;

pub fn run(c: TokenCommand) -> Result<()> {
    match c {
        TokenCommand::New { name } => {
            if name.trim().is_empty() || name.contains(['"', '\\', '\n']) {
                bail!(
                    "the token name must be non-empty and must not contain quotes, backslashes or newlines"
                );
            }
            let mut bytes = [0u8; 32];
            rand::fill(&mut bytes);
            let secret = format!("bst_{}", URL_SAFE_NO_PAD.encode(bytes));
            let hash: String = backstop_server::sha256(secret.as_bytes())
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect();
            println!("token (shown once; give it to the caller): {secret}");
            println!();
            println!("# add to backstop.toml:");
            println!("[[api.tokens]]");
            println!("name = \"{name}\"");
            println!("sha256 = \"{hash}\"");
            Ok(())
        }
    }
}

//! `gpuimg inspect IMAGE [--tag T] [--json]`: tag, digest, config, layers and sizes.

use std::path::PathBuf;

use crate::cli::{CliError, Global};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// An OCI layout: DIR or oci:DIR[:TAG].
    pub image: String,
    /// Which tag to show (default: the first image in the index).
    #[arg(long)]
    pub tag: Option<String>,
    /// Print JSON on stdout.
    #[arg(long)]
    pub json: bool,
}

pub fn exec(args: Args, _global: Global) -> Result<u8, CliError> {
    let (dir, tag) = match args.image.strip_prefix("oci:") {
        Some(rest) => match rest.split_once(':') {
            Some((d, t)) => (PathBuf::from(d), Some(t.to_string())),
            None => (PathBuf::from(rest), None),
        },
        None => (PathBuf::from(&args.image), None),
    };
    let tag = args.tag.or(tag);
    let info = crate::inspect::inspect(&dir, tag.as_deref())?;
    if args.json {
        let v = serde_json::to_string_pretty(&info).map_err(|e| CliError::msg(3, e.to_string()))?;
        crate::cli::print_stdout(&format!("{v}\n"));
        return Ok(0);
    }
    let mut s = String::new();
    let mb = |b: u64| format!("{:.1} MB", b as f64 / 1e6);
    s.push_str(&format!(
        "tag:       {}\n",
        info.tag.as_deref().unwrap_or("-")
    ));
    s.push_str(&format!("digest:    {}\n", info.manifest_digest));
    s.push_str(&format!("platform:  {}\n", info.platform));
    s.push_str(&format!(
        "created:   {}\n",
        info.created.as_deref().unwrap_or("-")
    ));
    let c = &info.config;
    for (label, key) in [
        ("entrypoint", "Entrypoint"),
        ("cmd", "Cmd"),
        ("workdir", "WorkingDir"),
        ("user", "User"),
    ] {
        if let Some(v) = c.get(key) {
            s.push_str(&format!("{label:<10} {v}\n"));
        }
    }
    if let Some(env) = c.get("Env").and_then(|e| e.as_array()) {
        s.push_str("env:\n");
        for e in env {
            s.push_str(&format!("  {}\n", e.as_str().unwrap_or_default()));
        }
    }
    if !info.annotations.is_empty() {
        s.push_str("annotations:\n");
        for (k, v) in &info.annotations {
            s.push_str(&format!("  {k}={v}\n"));
        }
    }
    s.push_str(&format!(
        "layers:    {} ({} compressed{})\n",
        info.layers.len(),
        mb(info.compressed_size),
        info.uncompressed_size
            .map(|u| format!(", {} uncompressed", mb(u)))
            .unwrap_or_default()
    ));
    for l in &info.layers {
        s.push_str(&format!(
            "  {}  {:>10}  {:>10}  {:<6} {}\n",
            l.digest,
            mb(l.size),
            l.uncompressed_size.map(mb).unwrap_or_else(|| "?".into()),
            l.media_type.rsplit('+').next().unwrap_or(""),
            l.component.as_deref().unwrap_or("")
        ));
    }
    crate::cli::print_stdout(&s);
    Ok(0)
}

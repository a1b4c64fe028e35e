//! `gpuimg catalog check-host [--root DIR] [--json]`: what this host runs (its kernel, loaded
//! NVIDIA module and GPUs, read-only by `ops::host_read`) held to the catalog's node rules
//! (`resolve::host_check`), fact by fact. Exit 0: every rule admits it; 1: a rule refuses what
//! the host runs (the catalog is wrong there), naming the rule; 2: no NVIDIA driver is loaded
//! (nothing to check) or the host's files do not read.

use std::path::PathBuf;

use serde_json::json;

use super::resolve::outln;
use super::CatalogArgs;
use crate::cli::{CliError, Settings};
use gpuimg_build::resolve::host_check::{self, RunningHost};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Read the host's files under DIR (`DIR/proc/…`, `DIR/sys/…`) instead of `/`.
    #[arg(long, value_name = "DIR", default_value = "/")]
    pub root: PathBuf,
    /// Print one JSON object: the host, each rule's verdict, and the rules that refuse it.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub catalog: CatalogArgs,
}

pub fn exec(args: Args, settings: &Settings) -> Result<u8, CliError> {
    let catalog = args.catalog.load(settings)?;
    let Some(host) = gpuimg_build::ops::host_read::read(&args.root)? else {
        return Err(CliError::msg(
            2,
            format!(
                "no NVIDIA driver is loaded here (no `{}`): nothing to check",
                args.root.join("proc/driver/nvidia/version").display()
            ),
        ));
    };
    let check = host_check::check(&catalog, &host);
    let refused = check.refused_by();
    if args.json {
        // The same shapes as `resolve --json`: a fact is `fact`, `source`, `unverified`.
        let gpus: Vec<serde_json::Value> = (host.gpus.iter().zip(&check.gpus))
            .map(|(g, (_, name))| json!({"bus": g.bus, "model": g.model, "catalog": name}))
            .collect();
        let verdicts: Vec<serde_json::Value> = (check.verdicts.iter())
            .map(|v| {
                let facts: Vec<serde_json::Value> = (v.facts.iter())
                    .map(|f| json!({"fact": f.text, "source": f.sources, "unverified": f.unverified}))
                    .collect();
                json!({"rule": v.rule.as_str(), "holds": v.holds, "facts": facts, "conclusion": v.conclusion})
            })
            .collect();
        let v = json!({
            "ok": refused.is_empty(),
            "host": {
                "kernel_release": host.kernel_release,
                "kernel_version": host.kernel_version,
                "kernel_upstream": host.kernel_upstream.as_ref().map(|k| k.to_string()),
                "kernel_upstream_from": host.kernel_upstream_from,
                "driver": host.driver.to_string(),
                "flavour": host.flavour.as_str(),
                "gpus": gpus,
            },
            "verdicts": verdicts,
            "refused_by": refused.iter().map(|r| r.as_str()).collect::<Vec<_>>(),
        });
        outln!("{}", gpuimg_build::lock::canonical_json(&v));
    } else if !settings.quiet || !refused.is_empty() {
        print_host(&host, &check.gpus);
        outln!("the catalog's rules:");
        for v in &check.verdicts {
            let mark = if v.holds { "ok" } else { "NO" };
            outln!(
                "  {mark:<3}{:<20} {}",
                v.rule.as_str(),
                v.conflict().render()
            );
        }
        if refused.is_empty() {
            outln!("ok: the catalog admits what this host runs");
        } else {
            let names: Vec<&str> = refused.iter().map(|r| r.as_str()).collect();
            outln!(
                "no: this host runs what the catalog would refuse ({}): the catalog is wrong there",
                names.join(", ")
            );
        }
    }
    Ok(u8::from(!refused.is_empty()))
}

fn print_host(host: &RunningHost, gpus: &[(String, Option<String>)]) {
    let upstream = match (&host.kernel_upstream, &host.kernel_upstream_from) {
        (Some(v), Some(from)) => format!("Linux {v} ({from})"),
        _ => "its upstream Linux version not stated".to_string(),
    };
    outln!("this host:");
    outln!("  kernel   {}, {upstream}", host.kernel_release);
    outln!(
        "  driver   {}, {} module",
        host.driver,
        host.flavour.as_str()
    );
    for (g, (_, name)) in host.gpus.iter().zip(gpus) {
        let name = name.as_deref().unwrap_or("not in the catalog");
        outln!("  GPU      {} {}: {name}", g.bus, g.model);
    }
}

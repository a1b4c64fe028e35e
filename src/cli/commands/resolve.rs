//! `gpuimg resolve PROFILE [--json] [--catalog FILE]... [--cache DIR] [--offline]`: exit 0
//! compatible, 1 no compatible combination (with the explanation), 2 bad input. It resolves as
//! `lock` and `build` do (`ops::known`): with `python:` it reads the base's packages and asks
//! the package index (with `--offline`, the cache), resolving the wheels too. Also renders
//! answers for `catalog why`.

use std::path::PathBuf;

/// `println!` that ignores a closed stdout (a broken pipe is not an error).
macro_rules! outln {
    ($($t:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stdout().lock(), $($t)*);
    }};
}
pub(crate) use outln;

use serde_json::json;

use super::CatalogArgs;
use crate::cli::{CliError, Progress, Settings};
use gpuimg_build::profile::KernelModule;
use gpuimg_build::resolve::{Explanation, Resolution, ResolveError};
use gpuimg_fetch::observe::Observer as _;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The profile.
    pub profile: PathBuf,
    /// Print one JSON object.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub catalog: CatalogArgs,
    /// Cache directory (default $GPUIMG_CACHE, else $XDG_CACHE_HOME/gpuimg, else
    /// ~/.cache/gpuimg): the base's apt indexes and the package index's pages.
    #[arg(long, value_name = "DIR")]
    pub cache: Option<PathBuf>,
    /// Read the base's apt indexes and the package index's pages from the cache alone.
    #[arg(long)]
    pub offline: bool,
    /// Only this one of the profile's platforms (`platforms:`); without it, each platform's answer.
    #[arg(long, value_name = "OS/ARCH", value_parser = super::parse_platform)]
    pub platform: Option<gpuimg_oci::image::Platform>,
}

pub fn exec(args: Args, settings: &Settings) -> Result<u8, CliError> {
    let profile = settings.load_profile(&args.profile)?;
    let catalog = args.catalog.load(settings)?;
    let cache_root = settings.cache_root(args.cache.as_deref());
    let (trust, python) = (settings.trust(), settings.python());
    let reach = gpuimg_build::ops::known::Reach {
        cache_root: &cache_root,
        offline: args.offline,
        trust: &trust,
        python: &python,
    };
    let mut progress = Progress::new(settings.quiet, args.json);
    let profile =
        settings.host_from(profile, &catalog, &cache_root, args.offline, &mut progress)?;
    if profile.kind == gpuimg_build::profile::ProfileKind::Host {
        let node = gpuimg_build::ops::node::resolve(
            &profile,
            &catalog,
            &cache_root,
            args.offline,
            &trust,
            &mut progress,
        )
        .map_err(CliError::from_ops)?;
        return node_answer(node, args.json, settings);
    }
    let chosen = gpuimg_build::ops::platforms::chosen(&profile, args.platform.as_ref())
        .map_err(CliError::from_ops)?;
    if let [one] = chosen.as_slice() {
        let resolved = resolve_one(&profile.for_platform(one), &catalog, reach, &mut progress)?;
        return answer(resolved, args.json, settings);
    }
    // Several platforms: each one's answer, under its name; "no" when any is.
    let mut code = 0;
    let mut parts = Vec::new();
    for p in &chosen {
        let resolved = resolve_one(&profile.for_platform(p), &catalog, reach, &mut progress)?;
        code = code.max(u8::from(resolved.is_err()));
        if args.json {
            let v = match resolved {
                Ok(r) => resolution_json(&r),
                Err(ResolveError::Incompatible(e)) => incompatible_json(&e),
                Err(e) => return Err(CliError::bad_input(&e)),
            };
            parts.push(json!({"platform": p.to_string(), "answer": v}));
        } else {
            if !settings.quiet || resolved.is_err() {
                outln!("{p}:");
            }
            answer(resolved, false, settings)?;
        }
    }
    if args.json {
        let v = json!({"ok": code == 0, "platforms": parts});
        outln!("{}", gpuimg_build::lock::canonical_json(&v));
    }
    Ok(code)
}

/// A host profile's answer: the node (kernel, driver, flavour), or "no" with the explanation
/// (the same JSON shape as a stack's "no").
fn node_answer(
    node: Result<gpuimg_build::resolve::node::NodeResolution, Explanation>,
    json_out: bool,
    settings: &Settings,
) -> Result<u8, CliError> {
    match node {
        Ok(n) => {
            if json_out {
                let v = json!({
                    "ok": true,
                    "node": {
                        "kernel_abi": n.kernel_abi,
                        "kernel_version": n.kernel_version,
                        "driver": n.driver.to_string(),
                        "flavour": n.flavour.as_str(),
                        "source": n.source,
                        "source_version": n.source_version,
                        "passed_over": n.passed_over.iter().map(|f| json!({"fact": f.text, "source": f.sources, "unverified": f.unverified})).collect::<Vec<_>>(),
                        "fabric_manager": n.fabric_manager.as_ref().map(|(p, v)| json!({"package": p, "version": v})),
                    },
                });
                outln!("{}", gpuimg_build::lock::canonical_json(&v));
            } else if !settings.quiet {
                outln!("ok");
                outln!(
                    "  kernel      {} (linux-image {})",
                    n.kernel_abi,
                    n.kernel_version
                );
                outln!(
                    "  driver      {} ({} module: {} {})",
                    n.driver,
                    n.flavour.as_str(),
                    n.source,
                    n.source_version
                );
                if let Some((p, v)) = &n.fabric_manager {
                    outln!("  fabric      {p} {v} (the system's NVSwitch)");
                }
                if !n.passed_over.is_empty() {
                    outln!("  passed over, because:");
                }
                for f in &n.passed_over {
                    outln!("    {}", f.render());
                }
            }
            Ok(0)
        }
        Err(e) => Ok(print_no(&e, json_out)),
    }
}

/// One platform's resolution, as `lock` and `build` make it.
fn resolve_one(
    profile: &gpuimg_build::profile::Profile,
    catalog: &gpuimg_build::catalog::Catalog,
    reach: gpuimg_build::ops::known::Reach<'_>,
    progress: &mut Progress,
) -> Result<Result<Resolution, ResolveError>, CliError> {
    let known = gpuimg_build::ops::known::gather(profile, catalog, reach, progress)
        .map_err(CliError::from_ops)?;
    let resolved = match known.request(profile, catalog) {
        Ok(req) => gpuimg_build::resolve::resolve_request(&req, catalog),
        Err(e) => Err(e),
    };
    Ok(match resolved {
        Ok(r) => {
            // What `lock` and `build` do with it too: a pinned `stack.python` must be one the
            // base installs, and with `python:` the wheels are resolved for it and checked.
            gpuimg_build::ops::known::check_stack_python(Some(&r), known.base_packages.as_deref())
                .map_err(CliError::from_ops)?;
            for line in known.said(profile, &r) {
                progress.message(&line);
            }
            let (r, _) =
                gpuimg_build::ops::known::wheels(profile, catalog, &known, r, reach, progress)
                    .map_err(CliError::from_ops)?;
            Ok(r)
        }
        Err(e) => Err(e),
    })
}

/// The JSON for a successful resolution (`ok`, `components`, `host` with `driver`, `kernel` and
/// `gpus`, `warnings`): a contract scripts read, so its field names do not change.
pub fn resolution_json(r: &Resolution) -> serde_json::Value {
    let components: serde_json::Map<String, serde_json::Value> = r
        .components
        .iter()
        .map(|(c, v)| (c.to_string(), json!(v.to_string())))
        .collect();
    let gpus: Vec<&str> = r.host.gpus.iter().map(|g| g.name.as_str()).collect();
    json!({
        "ok": true,
        "components": components,
        "host": {
            "driver": r.host.driver.to_string(),
            "kernel": r.host.kernel.to_string(),
            "gpus": gpus,
        },
        "warnings": r.warnings,
    })
}

/// The JSON for an answer of "no": `ok: false`, the `summary`, `reasons` (each candidate ruled
/// out as `value`, with the `facts` that rule it out, each `fact` with its `source` ids and
/// whether it is `unverified`, and their `conclusion`), `more` (candidates ruled out but not
/// listed), `hints` (single changes to the profile that resolve) and the text answer as
/// `explanation`. A contract scripts read, as [`resolution_json`] is.
pub fn incompatible_json(e: &Explanation) -> serde_json::Value {
    let reasons: Vec<serde_json::Value> = e
        .reasons
        .iter()
        .map(|r| {
            let facts: Vec<serde_json::Value> = r
                .facts
                .iter()
                .map(|f| json!({"fact": f.text, "source": f.sources, "unverified": f.unverified}))
                .collect();
            json!({
                "value": r.candidate,
                "facts": facts,
                "conclusion": r.conclusion,
                "unverified": r.unverified,
            })
        })
        .collect();
    json!({
        "ok": false,
        "summary": e.summary,
        "reasons": reasons,
        "more": e.more,
        "hints": e.suggestions,
        "explanation": e.to_string(),
    })
}

/// Prints an answer (yes with versions, no with the explanation) and picks the exit code.
pub fn answer(
    result: Result<Resolution, ResolveError>,
    json_out: bool,
    settings: &Settings,
) -> Result<u8, CliError> {
    match result {
        Ok(r) => {
            if json_out {
                outln!(
                    "{}",
                    gpuimg_build::lock::canonical_json(&resolution_json(&r))
                );
            } else if !settings.quiet {
                print_text(&r);
            }
            Ok(0)
        }
        Err(ResolveError::Incompatible(e)) => Ok(print_no(&e, json_out)),
        Err(e) => Err(CliError::bad_input(&e)),
    }
}

/// Prints an answer of "no" (the explanation, or its JSON); its exit code.
fn print_no(e: &Explanation, json_out: bool) -> u8 {
    if json_out {
        outln!(
            "{}",
            gpuimg_build::lock::canonical_json(&incompatible_json(e))
        );
    } else {
        outln!("no: {e}");
    }
    1
}

fn print_text(r: &Resolution) {
    if r.is_empty() {
        outln!("ok: no CUDA stack and no GPUs: a plain image");
    } else {
        outln!("ok");
    }
    for (c, v) in &r.components {
        match r.variants.get(c) {
            Some(var) => outln!("  {c:<11} {v} ({var})"),
            None => outln!("  {c:<11} {v}"),
        }
    }
    if !r.is_empty() {
        outln!("  host driver {}", r.host.driver);
        outln!("  host kernel {}", r.host.kernel);
        match r.host.kernel_module {
            KernelModule::Open => outln!("  host module open"),
            KernelModule::Proprietary => outln!("  host module proprietary"),
            KernelModule::Any => {}
        }
        let names: Vec<&str> = r.host.gpus.iter().map(|g| g.name.as_str()).collect();
        if !names.is_empty() {
            outln!("  host gpus   {}", names.join(", "));
        }
    }
    for w in &r.warnings {
        outln!("warning: {w}");
    }
}

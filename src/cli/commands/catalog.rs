//! `gpuimg catalog list KIND`, `catalog show NAME [VERSION]`, `catalog why --gpu ... --pytorch ...`,
//! `catalog matrix`, `catalog check-host` (`catalog_check_host.rs`): query the compatibility
//! catalog and ask questions without a profile.
//! Each takes `--json`; `list --json` prints the records as `show` does, in one array.

use serde_json::json;

use super::resolve::outln;
use super::CatalogArgs;
use crate::cli::{CliError, Settings};
use gpuimg_build::catalog::Catalog;
use gpuimg_build::profile::{CompatMode, KernelModule};
use gpuimg_build::resolve::{lookup_gpu, Component, Request, ResolveError};
use gpuimg_expect::version::Constraint;

#[derive(Debug, clap::Subcommand)]
pub enum Command {
    /// List the records of one kind.
    List {
        /// Which records.
        #[arg(value_enum)]
        kind: Kind,
        /// Print the records as one JSON array, each as `catalog show` prints it.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        catalog: CatalogArgs,
    },
    /// Show one record: a GPU name, `R580`, a source id, a known module build failure's id, or a kind and a version (`pytorch 2.5.1`).
    Show {
        /// A GPU name or alias, a driver branch (`R580`), a source id, a known module build
        /// failure's id, or a kind with VERSION.
        name: String,
        /// The version, when NAME is a kind: cuda, pytorch, tensorflow, jax, cudnn, nccl, python.
        version: Option<String>,
        /// Print the record as JSON (what `show` prints either way; accepted for scripts).
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        catalog: CatalogArgs,
    },
    /// Answer a question without a profile, e.g. `--gpu V100 --pytorch 2.11`.
    Why(Box<WhyArgs>),
    /// Check the catalog's node rules against this host's running kernel, NVIDIA module and
    /// GPUs (read-only): exit 1 where the catalog would refuse what the host runs.
    CheckHost(super::catalog_check_host::Args),
    /// Resolve every GPU × PyTorch release × Python version and print one answer per line.
    Matrix {
        /// Also search the nearest working change for every "no" (as `resolve` does).
        #[arg(long)]
        hints: bool,
        /// Print one JSON array of answers (`gpu`, `pytorch`, `python`, `ok`, and `cuda` and
        /// `driver` for a yes) instead of lines and the count.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        catalog: CatalogArgs,
    },
}

#[derive(Debug, clap::Args)]
pub struct WhyArgs {
    /// A GPU the image must run on, by name or alias (repeatable).
    #[arg(long = "gpu", value_name = "NAME")]
    pub gpus: Vec<String>,
    /// The host driver versions to allow, e.g. `>=550`.
    #[arg(long, value_name = "VERSIONS")]
    pub driver: Option<String>,
    /// The host kernel versions to allow, e.g. `>=5.15`.
    #[arg(long, value_name = "VERSIONS")]
    pub kernel: Option<String>,
    /// Which NVIDIA kernel module the host runs.
    #[arg(long = "kernel-module", value_enum, default_value = "any")]
    pub kernel_module: ModuleArg,
    /// How far CUDA may run ahead of the driver.
    #[arg(long, value_enum, default_value = "minor")]
    pub compat: CompatArg,
    /// CUDA versions, e.g. `12.4`.
    #[arg(long, value_name = "VERSIONS")]
    pub cuda: Option<String>,
    /// cuDNN versions.
    #[arg(long, value_name = "VERSIONS")]
    pub cudnn: Option<String>,
    /// NCCL versions.
    #[arg(long, value_name = "VERSIONS")]
    pub nccl: Option<String>,
    /// Python versions, e.g. `3.11`.
    #[arg(long, value_name = "VERSIONS")]
    pub python: Option<String>,
    /// PyTorch versions, e.g. `2.5`.
    #[arg(long, value_name = "VERSIONS")]
    pub pytorch: Option<String>,
    /// TensorFlow versions.
    #[arg(long, value_name = "VERSIONS")]
    pub tensorflow: Option<String>,
    /// JAX versions.
    #[arg(long, value_name = "VERSIONS")]
    pub jax: Option<String>,
    /// Print one JSON object.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub catalog: CatalogArgs,
}

/// The record kinds `catalog list` prints.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum Kind {
    #[value(alias = "gpu")]
    Gpus,
    Cuda,
    #[value(alias = "driver")]
    Drivers,
    Python,
    Pytorch,
    Tensorflow,
    Jax,
    Cudnn,
    Nccl,
    Sources,
}

#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum ModuleArg {
    /// The open kernel module.
    Open,
    /// The proprietary kernel module.
    Proprietary,
    /// Either module.
    Any,
}

#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum CompatArg {
    /// The driver must be at least the CUDA release's own minimum.
    Strict,
    /// CUDA may be newer than the driver within its major version (minor-version compatibility).
    Minor,
    /// As minor, and older long-term branches of data-center GPUs through cuda-compat in the image.
    Forward,
}

pub fn exec(cmd: Command, settings: &Settings) -> Result<u8, CliError> {
    match cmd {
        Command::List {
            kind,
            json,
            catalog,
        } => list(&catalog.load(settings)?, kind, json, settings),
        Command::Show {
            name,
            version,
            json,
            catalog,
        } => {
            let (found, code) = show(&catalog.load(settings)?, &name, version.as_deref())?;
            if json || !settings.quiet {
                outln!("{}", gpuimg_build::lock::canonical_json(&found));
            }
            Ok(code)
        }
        Command::Why(a) => why(*a, settings),
        Command::CheckHost(a) => super::catalog_check_host::exec(a, settings),
        Command::Matrix {
            hints,
            json,
            catalog,
        } => matrix(&catalog.load(settings)?, hints, json, settings),
    }
}

fn matrix(c: &Catalog, hints: bool, json: bool, settings: &Settings) -> Result<u8, CliError> {
    use std::io::Write;
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    let mut answers = Vec::new();
    let (mut yes, mut no) = (0usize, 0usize);
    for g in &c.gpus {
        for r in &c.pytorch {
            for p in &c.python {
                let mut req = Request {
                    gpus: vec![gpuimg_build::resolve::GpuTarget::Named(Box::new(g.clone()))],
                    ..Request::default()
                };
                req.stack
                    .insert(Component::Pytorch, format!("={}", r.version).parse()?);
                req.stack
                    .insert(Component::Python, Constraint::from_prefix(&p.version));
                let answer = match hints {
                    true => gpuimg_build::resolve::resolve_request(&req, c),
                    false => gpuimg_build::resolve::decide(&req, c),
                };
                let mut row = json!({
                    "gpu": g.name,
                    "pytorch": r.version.to_string(),
                    "python": p.version.to_string(),
                });
                let line = match answer {
                    Ok(res) => {
                        yes += 1;
                        let cuda = res
                            .version(Component::Cuda)
                            .map(|v| v.to_string())
                            .unwrap_or_default();
                        row["ok"] = json!(true);
                        row["cuda"] = json!(cuda);
                        row["driver"] = json!(res.host.driver.to_string());
                        format!("yes cuda {cuda} driver {}", res.host.driver)
                    }
                    Err(ResolveError::Incompatible(_)) => {
                        no += 1;
                        row["ok"] = json!(false);
                        "no".to_string()
                    }
                    Err(e) => return Err(CliError::bad_input(&e)),
                };
                if json {
                    answers.push(row);
                    continue;
                }
                if settings.quiet {
                    continue;
                }
                let w = writeln!(
                    out,
                    "{}\tpytorch {}\tpython {}\t{line}",
                    g.name, r.version, p.version
                );
                if w.is_err() {
                    return Ok(0); // a closed pipe is not an error
                }
            }
        }
    }
    if json {
        let _ = writeln!(
            out,
            "{}",
            gpuimg_build::lock::canonical_json(&json!(answers))
        );
    }
    let _ = out.flush();
    if !json && !settings.quiet {
        eprintln!("{} answers: {yes} yes, {no} no", yes + no);
    }
    Ok(0)
}

fn list(c: &Catalog, kind: Kind, json: bool, settings: &Settings) -> Result<u8, CliError> {
    if json {
        outln!("{}", gpuimg_build::lock::canonical_json(&records(c, kind)?));
        return Ok(0);
    }
    if settings.quiet {
        return Ok(0);
    }
    let lines: Vec<String> = match kind {
        Kind::Gpus => c
            .gpus
            .iter()
            .map(|g| {
                format!(
                    "{:<40} cc {:<5} {:<10} {}",
                    g.name,
                    g.cc.to_string(),
                    g.arch,
                    g.aliases.join(", ")
                )
            })
            .collect(),
        Kind::Cuda => c
            .cuda
            .iter()
            .map(|t| {
                format!(
                    "{:<8} driver >= {:<11} sm {}..{}{}",
                    t.version.to_string(),
                    t.driver
                        .as_ref()
                        .map_or("unknown".into(), |d| d.to_string()),
                    t.sm_min,
                    t.sm_max,
                    if t.unverified.is_empty() {
                        ""
                    } else {
                        "  (unverified)"
                    }
                )
            })
            .collect(),
        Kind::Drivers => c
            .drivers
            .iter()
            .map(|b| {
                format!(
                    "R{:<4} cc >= {:<4} kernel >= {:<5} {}",
                    b.branch,
                    b.min_cc.to_string(),
                    b.min_kernel.as_ref().map_or("?".into(), |k| k.to_string()),
                    b.eol
                        .as_deref()
                        .map(|e| format!("EOL {e}"))
                        .unwrap_or_default()
                )
            })
            .collect(),
        Kind::Python => c.python.iter().map(|p| p.version.to_string()).collect(),
        Kind::Pytorch => c
            .pytorch
            .iter()
            .map(|r| {
                let v: Vec<&str> = r.variants.iter().map(|v| v.name.as_str()).collect();
                format!("{:<8} {}", r.version.to_string(), v.join(" "))
            })
            .collect(),
        Kind::Tensorflow => c
            .tensorflow
            .iter()
            .map(|r| {
                format!(
                    "{:<8} cuda `{}` cudnn `{}`",
                    r.version.to_string(),
                    r.cuda,
                    r.cudnn
                )
            })
            .collect(),
        Kind::Jax => c
            .jax
            .iter()
            .map(|r| {
                let v: Vec<&str> = r.variants.iter().map(|v| v.name.as_str()).collect();
                format!("{:<9} {}", r.version.to_string(), v.join(" "))
            })
            .collect(),
        Kind::Cudnn => c.cudnn.iter().map(|r| r.version.to_string()).collect(),
        Kind::Nccl => c.nccl.iter().map(|r| r.version.to_string()).collect(),
        Kind::Sources => c
            .sources
            .iter()
            .map(|s| format!("{:<24} {}", s.id, s.url))
            .collect(),
    };
    for l in lines {
        outln!("{}", l.trim_end());
    }
    Ok(0)
}

/// The records of `kind` as one JSON array, each record as `catalog show` prints it.
fn records(c: &Catalog, kind: Kind) -> Result<serde_json::Value, CliError> {
    fn all<T: serde::Serialize>(v: &[T]) -> Result<serde_json::Value, serde_json::Error> {
        serde_json::to_value(v)
    }
    match kind {
        Kind::Gpus => all(&c.gpus),
        Kind::Cuda => all(&c.cuda),
        Kind::Drivers => all(&c.drivers),
        Kind::Python => all(&c.python),
        Kind::Pytorch => all(&c.pytorch),
        Kind::Tensorflow => all(&c.tensorflow),
        Kind::Jax => all(&c.jax),
        Kind::Cudnn => all(&c.cudnn),
        Kind::Nccl => all(&c.nccl),
        Kind::Sources => all(&c.sources),
    }
    .map_err(|e| CliError::msg(3, e.to_string()))
}

/// The record `show` names, as JSON, and the exit code.
fn show(
    c: &Catalog,
    name: &str,
    version: Option<&str>,
) -> Result<(serde_json::Value, u8), CliError> {
    let to = |r: Result<serde_json::Value, serde_json::Error>| {
        r.map_err(|e| CliError::msg(3, e.to_string()))
    };
    if let Some(ver) = version {
        let v: gpuimg_expect::version::Version = ver.parse()?;
        let found = match name {
            "cuda" => c
                .cuda
                .iter()
                .find(|t| t.version == v)
                .map(serde_json::to_value),
            "pytorch" | "torch" => c
                .pytorch
                .iter()
                .find(|t| t.version == v)
                .map(serde_json::to_value),
            "tensorflow" => c
                .tensorflow
                .iter()
                .find(|t| t.version == v)
                .map(serde_json::to_value),
            "jax" => c
                .jax
                .iter()
                .find(|t| t.version == v)
                .map(serde_json::to_value),
            "cudnn" => c.cudnn_record(&v).map(serde_json::to_value),
            "nccl" => c
                .nccl
                .iter()
                .find(|t| t.version == v)
                .map(serde_json::to_value),
            "python" => c
                .python
                .iter()
                .find(|t| t.version == v)
                .map(serde_json::to_value),
            _ => None,
        };
        return match found {
            Some(j) => Ok((to(j)?, 0)),
            None => Err(CliError::msg(
                2,
                format!("The catalog has no `{name} {ver}`"),
            )),
        };
    }
    if let Some(g) = c.gpu(name) {
        return Ok((to(serde_json::to_value(g))?, 0));
    }
    let branch = name.trim_start_matches(['R', 'r']).parse::<u64>().ok();
    if let Some(b) = branch.and_then(|n| c.drivers.iter().find(|d| d.branch == n)) {
        return Ok((to(serde_json::to_value(b))?, 0));
    }
    if let Some(s) = c.source(name) {
        return Ok((to(serde_json::to_value(s))?, 0));
    }
    if let Some(f) = c.module_build_failures.iter().find(|f| f.id == name) {
        return Ok((to(serde_json::to_value(f))?, 0));
    }
    let mut e = CliError::msg(2, format!("The catalog has no record named `{name}`"));
    if let Some(s) = c.closest_gpu(name) {
        e = e.with_hint(format!("did you mean `{s}`?"));
    }
    Err(e)
}

fn why(a: WhyArgs, settings: &Settings) -> Result<u8, CliError> {
    let catalog = a.catalog.load(settings)?;
    let parse = |flag: &str, s: &str| -> Result<Constraint, CliError> {
        let c: Constraint = s
            .parse()
            .map_err(|e| CliError::bad_input(&e).with_hint(format!("in `--{flag}`")))?;
        if c.to_set().is_empty() {
            return Err(CliError::msg(
                2,
                format!("`--{flag} {s}` can match no version at all"),
            ));
        }
        Ok(c)
    };
    let mut req = Request {
        kernel_module: match a.kernel_module {
            ModuleArg::Open => KernelModule::Open,
            ModuleArg::Proprietary => KernelModule::Proprietary,
            ModuleArg::Any => KernelModule::Any,
        },
        compat: match a.compat {
            CompatArg::Strict => CompatMode::Strict,
            CompatArg::Minor => CompatMode::Minor,
            CompatArg::Forward => CompatMode::Forward,
        },
        ..Request::default()
    };
    for g in &a.gpus {
        match lookup_gpu(&catalog, g) {
            Some(t) => req.gpus.push(t),
            None => {
                let mut e = CliError::msg(2, format!("Unknown GPU `{g}`"));
                if let Some(s) = catalog.closest_gpu(g) {
                    e = e.with_hint(format!("did you mean `{s}`?"));
                }
                return Err(e);
            }
        }
    }
    req.driver = a
        .driver
        .as_deref()
        .map(|s| parse("driver", s))
        .transpose()?;
    req.kernel = a
        .kernel
        .as_deref()
        .map(|s| parse("kernel", s))
        .transpose()?;
    for (comp, v) in [
        (Component::Cuda, &a.cuda),
        (Component::Cudnn, &a.cudnn),
        (Component::Nccl, &a.nccl),
        (Component::Python, &a.python),
        (Component::Pytorch, &a.pytorch),
        (Component::Tensorflow, &a.tensorflow),
        (Component::Jax, &a.jax),
    ] {
        if let Some(s) = v {
            req.stack.insert(comp, parse(comp.as_str(), s)?);
        }
    }
    let result: Result<_, ResolveError> = gpuimg_build::resolve::resolve_request(&req, &catalog);
    super::resolve::answer(result, a.json, settings)
}

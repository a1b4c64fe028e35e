//! `gpuimg device-code list FILE` and `gpuimg device-code prune --for CC SRC DST`: what device
//! code a CUDA shared object carries, and a copy of it pruned to what some GPUs can select
//! (the same rewrite `strip: [device-code]` applies in a build; with `--debug-symbols`, also
//! `strip: [debug-symbols]`'s cut of debug sections and symbol table). No licence check here: the
//! user owns the file; a build asks the catalog's licence table first.
//!
//! list: one line per target with its entry count and bytes, then a total; `--json` prints the
//! whole listing. A file gpuimg does not fully understand is an error (exit 1) saying why.
//! prune: writes DST whole or not at all (a temporary file renamed into place); a file gpuimg
//! does not understand, or where nothing is dropped, is copied unchanged with a warning.
//! SRC and FILE must be regular files on a real file system (never a FIFO, a device, procfs);
//! an existing DST is replaced only with `--force`; the copy keeps SRC's permission bits but
//! never its setuid, setgid or sticky bit.

use std::collections::BTreeMap;
use std::fs::File;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use serde_json::json;

use crate::cli::{print_stdout, CliError, Settings};
use gpuimg_elf::fatbin::{self, Cc, Target};

#[derive(Debug, clap::Subcommand)]
pub enum Command {
    /// List the cubins and PTX in a file's fatbin containers.
    List {
        /// An ELF shared object or executable.
        file: PathBuf,
        /// Print the listing as JSON: `file`, `understood` (true; a file not understood is an
        /// error), `reason`, `file_size`, `containers` (`offset`, `size`, `entries`: `offset`,
        /// `size`, `kind`, `target`).
        #[arg(long)]
        json: bool,
    },
    /// Write a copy of SRC that keeps only the device code the given GPUs can select.
    Prune {
        /// A compute capability to keep code for (`9.0` or `sm_90`); repeatable.
        #[arg(long = "for", value_name = "CC", required = true)]
        gpus: Vec<Cc>,
        /// Also cut the debug sections and the full symbol table, as `strip:
        /// [debug-symbols]` does in a build (after pruning).
        #[arg(long)]
        debug_symbols: bool,
        /// Replace DST when it exists.
        #[arg(long)]
        force: bool,
        /// The ELF shared object or executable to read (never modified).
        src: PathBuf,
        /// Where the pruned copy is written (a new file unless `--force`).
        dst: PathBuf,
    },
}

pub fn exec(cmd: Command, settings: &Settings) -> Result<u8, CliError> {
    match cmd {
        Command::List { file, json } => list(&file, json),
        Command::Prune {
            gpus,
            debug_symbols,
            force,
            src,
            dst,
        } => prune(&gpus, debug_symbols, force, &src, &dst, settings),
    }
}

fn open(path: &Path) -> Result<File, CliError> {
    gpuimg_store::user_file::open_regular(path).map_err(|e| CliError::msg(2, e.to_string()))
}

fn list(path: &Path, as_json: bool) -> Result<u8, CliError> {
    let f = open(path)?;
    let listing = fatbin::read(&f).map_err(|e| {
        CliError::msg(
            1,
            format!("{}: device code not understood: {e}", path.display()),
        )
    })?;
    if as_json {
        let v = json!({
            "file": path.display().to_string(),
            "understood": true,
            "reason": null,
            "file_size": listing.file_size,
            "containers": listing.containers,
        });
        print_stdout(&format!("{v:#}\n"));
        return Ok(0);
    }
    let mut by: BTreeMap<Target, (usize, u64)> = BTreeMap::new();
    for e in listing.entries() {
        let t = by.entry(e.target).or_default();
        t.0 += 1;
        t.1 += e.size;
    }
    let mut out = String::new();
    for (t, (n, bytes)) in &by {
        out.push_str(&format!(
            "{:<14} {n:>6} entries {bytes:>12} bytes\n",
            t.to_string()
        ));
    }
    out.push_str(&format!(
        "{}: {} containers, {} entries, {} bytes of device code\n",
        path.display(),
        listing.containers.len(),
        listing.entries().count(),
        listing.entries().map(|e| e.size).sum::<u64>()
    ));
    print_stdout(&out);
    Ok(0)
}

fn prune(
    gpus: &[Cc],
    debug_symbols: bool,
    force: bool,
    src: &Path,
    dst: &Path,
    settings: &Settings,
) -> Result<u8, CliError> {
    let f = open(src)?;
    match std::fs::symlink_metadata(dst) {
        Ok(m) if m.is_dir() => {
            return Err(CliError::msg(
                2,
                format!("`{}` is a directory; name the file to write", dst.display()),
            ))
        }
        Ok(_) if !force => {
            return Err(CliError::msg(
                2,
                format!(
                    "`{}` exists; pass `--force` to replace it, or name another file",
                    dst.display()
                ),
            ))
        }
        _ => {}
    }
    let dir = match dst.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let mut tmp = tempfile::NamedTempFile::new_in(dir)
        .map_err(|e| CliError::msg(2, format!("cannot write in {}: {e}", dir.display())))?;
    let io = |e: std::io::Error| CliError::msg(2, format!("writing {}: {e}", dst.display()));
    let summary = match fatbin::read(&f) {
        Err(e) => {
            std::io::copy(&mut &f, tmp.as_file_mut()).map_err(io)?;
            format!(
                "warning: {}: device code not understood ({e}): copied unchanged",
                src.display()
            )
        }
        Ok(listing) => {
            let p = fatbin::prune(&listing, gpus);
            if !p.changes() {
                std::io::copy(&mut &f, tmp.as_file_mut()).map_err(io)?;
                format!(
                    "{}: nothing to drop for {}: copied unchanged",
                    src.display(),
                    ccs(gpus)
                )
            } else {
                p.write(&f, tmp.as_file_mut()).map_err(io)?;
                format!(
                    "{}: kept {} of {} entries ({}) for {}, zeroed {} bytes",
                    src.display(),
                    p.kept,
                    p.entries,
                    names(&p.kept_targets),
                    ccs(gpus),
                    p.zeroed
                )
            }
        }
    };
    let mut summary = vec![summary];
    if debug_symbols {
        let mut pruned = tmp.reopen().map_err(io)?;
        if let Some(plan) = gpuimg_elf::strip::plan(&mut pruned).map_err(io)? {
            let mut stripped = tempfile::NamedTempFile::new_in(dir).map_err(io)?;
            plan.write(&pruned, stripped.as_file_mut()).map_err(io)?;
            summary.push(format!(
                "{}: cut {} bytes of {}",
                src.display(),
                plan.file_size.saturating_sub(plan.new_size),
                plan.removed.join(" ")
            ));
            tmp = stripped;
        }
    }
    // The permission bits, never setuid, setgid or sticky: a copy is not a grant.
    let mode = f.metadata().map_err(io)?.permissions().mode() & 0o777;
    tmp.as_file()
        .set_permissions(std::fs::Permissions::from_mode(mode))
        .map_err(io)?;
    tmp.persist(dst).map_err(|e| io(e.error))?;
    if !settings.quiet {
        for line in summary {
            eprintln!("{line}");
        }
    }
    Ok(0)
}

fn ccs(gpus: &[Cc]) -> String {
    gpus.iter()
        .map(|c| format!("cc {c}"))
        .collect::<Vec<_>>()
        .join(", ")
}

fn names(t: &std::collections::BTreeSet<Target>) -> String {
    if t.is_empty() {
        return "nothing".into();
    }
    t.iter()
        .map(|t| t.to_string())
        .collect::<Vec<_>>()
        .join(" ")
}

//! `gpuimg inspect IMAGE [--tag T] [--platform P] [--json] [--files | --sizes | --unused]`:
//! tag, digest, config, layers and sizes; with `--files`, every path with its mode, size,
//! layer, owning package and an ELF file's machine; with `--sizes`, the size report
//! (`size_table.rs`); with `--unused`, the ELF closure report (`inspect::inspect_unused`).
//! IMAGE is a layout (`DIR`, `oci:DIR[:TAG]`) or an oci-archive (`oci-archive:FILE[:TAG]`,
//! read in place). An image index shows its head, then each platform's section (or the one
//! `--platform` names) as a single image shows; its JSON wraps each platform's single-image
//! JSON (`image`) beside that platform's manifest descriptor. Never writes anything.

use serde::Serialize;

use crate::cli::{print_result, print_stdout, CliError, Settings};
use gpuimg_build::inspect::{
    self, FileEntry, FileKind, FileListing, Image, ImageInfo, IndexListing, IndexSize,
    InspectError, Pick, PlatformManifest, SizeReport, UnusedReport,
};
use gpuimg_oci::reference::{ImageRef, Transport};
use gpuimg_store::byte_size::ByteSize;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The image: DIR, oci:DIR[:TAG] or oci-archive:FILE[:TAG].
    pub image: String,
    /// Which tag to show (default: the TAG of IMAGE, else the first image in the index).
    #[arg(long)]
    pub tag: Option<String>,
    /// Print JSON on stdout.
    #[arg(long)]
    pub json: bool,
    /// List every path of the image with its mode, size, layer, owner and, for an ELF file, its
    /// machine (reads every layer).
    #[arg(long, conflicts_with_all = ["sizes", "unused"])]
    pub files: bool,
    /// Where the image's bytes are: per layer, component, strip class and package, before
    /// stripping and as stored, compressed and not (from the size records gpuimg writes).
    #[arg(long, conflicts_with = "unused")]
    pub sizes: bool,
    /// List the Python packages' shared libraries that nothing in the image loads (the ELF
    /// closure from its programs, extension modules and known dlopen targets), and the
    /// library names nothing provides (reads every layer).
    #[arg(long)]
    pub unused: bool,
    /// In an image index, show only the manifest for this platform (`os/arch[/variant]`; a
    /// manifest whose index states no platform is `unknown`); for one image, refuse another.
    #[arg(long, value_name = "OS/ARCH[/VARIANT]")]
    pub platform: Option<String>,
}

pub fn exec(args: Args, settings: &Settings) -> Result<u8, CliError> {
    let r = ImageRef::parse(&args.image).map_err(|e| {
        CliError::msg(
            2,
            format!(
                "`{}` is not a valid image reference: {e}",
                args.image.escape_debug()
            ),
        )
    })?;
    let img = match r.transport {
        Transport::Layout => Image::layout(&r.path)?,
        Transport::Archive => Image::archive(&r.path)?,
        Transport::DockerArchive => {
            return Err(CliError::msg(
                2,
                "`inspect` reads `oci:DIR` and `oci-archive:FILE`; a docker-archive is an output only (build with `-o oci-archive:FILE` to inspect)",
            ))
        }
    };
    let tag = args.tag.clone().or(r.tag);
    let mode = Mode::of(&args);
    let Some(index) = inspect::index_of(&img, tag.as_deref())? else {
        if let Some(p) = &args.platform {
            one_platform(&img, tag.as_deref(), p)?;
        }
        let shown = Shown::gather(&img, tag.as_deref().into(), mode)?;
        if args.json {
            print_stdout(&format!("{}\n", mode.json(&shown)?));
        } else {
            print_result(settings, &shown.text(true));
        }
        return Ok(0);
    };
    let parts = index
        .matching(args.platform.as_deref())?
        .into_iter()
        .map(|m| Ok((m, Shown::gather(&img, m.into(), mode)?)))
        .collect::<Result<Vec<_>, InspectError>>()?;
    let images: Vec<&ImageInfo> = parts.iter().filter_map(|(_, s)| s.image()).collect();
    let together = (parts.len() > 1 && images.len() == parts.len())
        .then(|| inspect::index_size(&index, &images));
    if args.json {
        let platforms: Vec<PlatformJson> = parts
            .iter()
            .map(|(m, image)| PlatformJson { manifest: m, image })
            .collect();
        let v = IndexJson {
            index: &index,
            all_platforms: together,
            platforms,
        };
        print_stdout(&format!("{}\n", mode.json(&v)?));
        return Ok(0);
    }
    let mut s = index_text(&index, mode, together.as_ref());
    for (m, shown) in &parts {
        s.push_str(&format!("\n== {} {} ==\n", m.platform_name(), m.digest));
        s.push_str(&shown.text(false));
    }
    print_result(settings, &s);
    Ok(0)
}

/// What `inspect` shows of each image: the summary, or one of the reports its flags ask for.
#[derive(Debug, Clone, Copy)]
enum Mode {
    Image,
    Files,
    Sizes,
    Unused,
}

impl Mode {
    fn of(args: &Args) -> Mode {
        if args.unused {
            Mode::Unused
        } else if args.files {
            Mode::Files
        } else if args.sizes {
            Mode::Sizes
        } else {
            Mode::Image
        }
    }

    /// The JSON of `v` as this mode prints it: a file list and the ELF report on one line,
    /// the summary and the size report indented.
    fn json(self, v: &impl Serialize) -> Result<String, CliError> {
        match self {
            Mode::Files | Mode::Unused => serde_json::to_string(v),
            Mode::Image | Mode::Sizes => serde_json::to_string_pretty(v),
        }
        .map_err(|e| CliError::msg(3, e.to_string()))
    }
}

/// One image's report in a [`Mode`]; as JSON, exactly the report's own form.
enum Shown {
    Image(ImageInfo),
    Files(FileListing),
    /// The report and the summary it is made from.
    Sizes(SizeReport, Box<ImageInfo>),
    Unused(UnusedReport),
}

impl Serialize for Shown {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Shown::Image(i) => i.serialize(s),
            Shown::Files(f) => f.serialize(s),
            Shown::Sizes(r, _) => r.serialize(s),
            Shown::Unused(u) => u.serialize(s),
        }
    }
}

impl Shown {
    fn gather(img: &Image, which: Pick<'_>, mode: Mode) -> Result<Shown, InspectError> {
        Ok(match mode {
            Mode::Image => Shown::Image(inspect::inspect(img, which)?),
            Mode::Files => Shown::Files(inspect::inspect_files(img, which)?),
            Mode::Sizes => {
                let info = inspect::inspect(img, which)?;
                Shown::Sizes(inspect::size_report(&info), Box::new(info))
            }
            Mode::Unused => Shown::Unused(inspect::inspect_unused(img, which)?),
        })
    }

    /// The summary it was made from, where it has one.
    fn image(&self) -> Option<&ImageInfo> {
        match self {
            Shown::Image(i) => Some(i),
            Shown::Sizes(_, i) => Some(i),
            Shown::Files(_) | Shown::Unused(_) => None,
        }
    }

    /// The text; `tag_line`: whether the summary starts with the image's tag (an index's
    /// platform has none of its own).
    fn text(&self, tag_line: bool) -> String {
        match self {
            Shown::Image(info) => image_text(info, tag_line),
            Shown::Files(listing) => files_table(&listing.files),
            Shown::Sizes(report, _) => super::size_table::render(report),
            Shown::Unused(report) => unused_text(report),
        }
    }
}

/// `--platform` given for a single image: it must be the image's own (by `os/arch`).
fn one_platform(img: &Image, tag: Option<&str>, wanted: &str) -> Result<(), InspectError> {
    let info = inspect::inspect(img, tag)?;
    let os_arch = wanted.splitn(3, '/').take(2).collect::<Vec<_>>().join("/");
    if wanted == info.platform || os_arch == info.platform {
        return Ok(());
    }
    Err(InspectError::OtherPlatform {
        tag: info.tag.unwrap_or_else(|| "-".into()),
        has: info.platform,
        platform: wanted.to_string(),
    })
}

/// An index's JSON: the index, the shown platforms' total where there are several, then each
/// platform's manifest with what a single image shows (`image`).
#[derive(Serialize)]
struct IndexJson<'a> {
    index: &'a IndexListing,
    #[serde(skip_serializing_if = "Option::is_none")]
    all_platforms: Option<IndexSize>,
    platforms: Vec<PlatformJson<'a>>,
}

#[derive(Serialize)]
struct PlatformJson<'a> {
    #[serde(flatten)]
    manifest: &'a PlatformManifest,
    image: &'a Shown,
}

/// The head of an index's text: tag, digest, media type, its platforms; with the summary, its
/// annotations and (`together`) what the shown platforms hold in all.
fn index_text(index: &IndexListing, mode: Mode, together: Option<&IndexSize>) -> String {
    let mut s = format!("tag:       {}\n", index.tag.as_deref().unwrap_or("-"));
    s.push_str(&format!(
        "index:     {} ({})\n",
        index.digest, index.media_type
    ));
    s.push_str(&format!("platforms: {}\n", index.platform_names()));
    if matches!(mode, Mode::Image) && !index.annotations.is_empty() {
        s.push_str("annotations:\n");
        for (k, v) in &index.annotations {
            s.push_str(&format!("  {k}={v}\n"));
        }
    }
    if let Some(t) = together {
        s.push_str(&format!(
            "all:       {} ({} bytes: the index and each platform's manifest, config and layers; {} {} shared by several platforms, stored once)\n",
            ByteSize(t.total),
            t.total,
            t.shared_layers,
            if t.shared_layers == 1 { "layer" } else { "layers" },
        ));
    }
    s
}

/// The summary of one image: tag (with `tag_line`), digest, platform, config, annotations and
/// layers.
fn image_text(info: &ImageInfo, tag_line: bool) -> String {
    let mut s = String::new();
    let mb = |b: u64| format!("{:.1} MB", b as f64 / 1e6);
    if tag_line {
        s.push_str(&format!(
            "tag:       {}\n",
            info.tag.as_deref().unwrap_or("-")
        ));
    }
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
    if let Some(labels) = c.get("Labels").and_then(|l| l.as_object()) {
        s.push_str("labels:\n");
        for (k, v) in labels {
            s.push_str(&format!("  {k}={}\n", v.as_str().unwrap_or_default()));
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
    s
}

/// Owners shown in the table before the rest are counted (`a, b, c +4`).
const SHOWN_OWNERS: usize = 3;

/// `ls -l`-style mode: type letter and permission bits with setuid/setgid/sticky.
fn mode_string(kind: FileKind, mode: u32) -> String {
    let t = match kind {
        FileKind::File | FileKind::Hardlink => '-',
        FileKind::Dir => 'd',
        FileKind::Symlink => 'l',
        FileKind::Char => 'c',
        FileKind::Block => 'b',
        FileKind::Fifo => 'p',
    };
    let mut s = String::from(t);
    for (shift, special, set, unset) in [
        (6, 0o4000, 's', 'S'),
        (3, 0o2000, 's', 'S'),
        (0, 0o1000, 't', 'T'),
    ] {
        let bits = (mode >> shift) & 7;
        s.push(if bits & 4 != 0 { 'r' } else { '-' });
        s.push(if bits & 2 != 0 { 'w' } else { '-' });
        s.push(match (mode & special != 0, bits & 1 != 0) {
            (true, true) => set,
            (true, false) => unset,
            (false, true) => 'x',
            (false, false) => '-',
        });
    }
    s
}

fn short_owner(owner: Option<&str>) -> String {
    let Some(owner) = owner else {
        return "-".into();
    };
    let all: Vec<&str> = owner.split(", ").collect();
    if all.len() <= SHOWN_OWNERS {
        return owner.to_string();
    }
    format!(
        "{} +{}",
        all[..SHOWN_OWNERS].join(", "),
        all.len() - SHOWN_OWNERS
    )
}

/// The `--unused` report: counts, then the unused libraries (size, owner, path), then the
/// names nothing provides.
fn unused_text(r: &gpuimg_build::inspect::UnusedReport) -> String {
    let mut s = format!(
        "{} ELF objects, {} reached from the image's programs, extension modules and dlopen list\n",
        r.objects, r.reached
    );
    s.push_str(&format!(
        "unused Python package libraries: {} ({:.1} MB)\n",
        r.unused.len(),
        r.unused_bytes as f64 / 1e6
    ));
    for u in &r.unused {
        s.push_str(&format!(
            "  {:>10}  {:<24}  {}\n",
            u.size,
            u.owner.as_deref().unwrap_or("-"),
            u.path
        ));
    }
    s.push_str(&format!(
        "needed but provided by nothing: {}\n",
        r.missing.len()
    ));
    for m in &r.missing {
        let add = gpuimg_apt::soname_hint(&m.needed)
            .map(|h| format!("; add {h}"))
            .unwrap_or_default();
        s.push_str(&format!("  {}  (needed by {}{add})\n", m.needed, m.by));
    }
    s
}

/// The `--files` table: mode, size, layer, owner, an ELF file's machine, then the path (and
/// a link's target).
fn files_table(files: &[FileEntry]) -> String {
    let rows: Vec<[String; 6]> = files
        .iter()
        .map(|f| {
            let path = match (&f.link, f.kind) {
                (Some(l), FileKind::Symlink) => format!("{} -> {l}", f.path),
                (Some(l), _) => format!("{} link to {l}", f.path),
                _ => f.path.clone(),
            };
            [
                mode_string(f.kind, f.mode),
                f.size.to_string(),
                f.layer.clone(),
                short_owner(f.owner.as_deref()),
                f.machine.clone().unwrap_or_else(|| "-".into()),
                path,
            ]
        })
        .collect();
    let head = ["MODE", "SIZE", "LAYER", "OWNER", "MACHINE", "PATH"].map(String::from);
    let mut width = [0usize; 5];
    for r in rows.iter().chain(std::iter::once(&head)) {
        for (w, c) in width.iter_mut().zip(r) {
            *w = (*w).max(c.chars().count());
        }
    }
    let mut s = String::new();
    for r in std::iter::once(&head).chain(&rows) {
        s.push_str(&format!(
            "{:<w0$}  {:>w1$}  {:<w2$}  {:<w3$}  {:<w4$}  {}\n",
            r[0],
            r[1],
            r[2],
            r[3],
            r[4],
            r[5],
            w0 = width[0],
            w1 = width[1],
            w2 = width[2],
            w3 = width[3],
            w4 = width[4],
        ));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes_read_like_ls() {
        assert_eq!(mode_string(FileKind::File, 0o755), "-rwxr-xr-x");
        assert_eq!(mode_string(FileKind::File, 0o4755), "-rwsr-xr-x");
        assert_eq!(mode_string(FileKind::Dir, 0o1777), "drwxrwxrwt");
        assert_eq!(mode_string(FileKind::Dir, 0o2644), "drw-r-Sr--");
        assert_eq!(mode_string(FileKind::Symlink, 0o777), "lrwxrwxrwx");
    }

    #[test]
    fn long_owner_lists_are_counted() {
        assert_eq!(short_owner(None), "-");
        assert_eq!(short_owner(Some("a, b, c")), "a, b, c");
        assert_eq!(short_owner(Some("a, b, c, d, e")), "a, b, c +2");
    }
}

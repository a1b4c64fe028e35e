//! The real kernels the tests read, unpacked once per test process (the build host's suite's,
//! and trixie's 6.12), and the first tests: every module each `linux-image` package ships passes
//! the check against its own headers' `Module.symvers`.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use gpuimg_kmod::{check, Kernel, Module, Symvers};

use crate::cmd::{require, run_ok};

/// One kernel's files, read into memory.
pub struct Fixture {
    pub abi: String,
    /// `(path under lib/modules/<abi>, bytes)` of every module, sorted by path.
    pub files: Vec<(String, Vec<u8>)>,
    /// Every module, read, in the same order.
    pub modules: Vec<Module>,
    pub symvers_text: Vec<u8>,
    pub symvers: Symvers,
}

impl Fixture {
    /// The bytes of the module named `name`.
    pub fn bytes(&self, name: &str) -> &[u8] {
        let i = self.modules.iter().position(|m| m.name == name).unwrap();
        &self.files[i].1
    }

    /// The whole `vermagic` every module of the kernel shares.
    pub fn vermagic(&self) -> &str {
        self.modules[0].vermagic().unwrap()
    }

    pub fn kernel(&self) -> Kernel<'_> {
        Kernel {
            release: &self.abi,
            vermagic: Some(self.vermagic()),
            symvers: &self.symvers,
        }
    }
}

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn modules_under(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            modules_under(&p, out);
        } else if p.to_string_lossy().ends_with(".ko") || p.to_string_lossy().ends_with(".ko.xz") {
            out.push(p);
        }
    }
}

/// A module file's bytes (Debian compresses modules with xz from trixie on).
fn module_bytes(path: &Path) -> Vec<u8> {
    let raw = std::fs::read(path).unwrap();
    if !path.to_string_lossy().ends_with(".xz") {
        return raw;
    }
    let mut out = Vec::new();
    std::io::Read::read_to_end(&mut liblzma::read::XzDecoder::new(&raw[..]), &mut out)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    out
}

/// The build host's suite's cloud kernel (bookworm's is 6.1), fetched and unpacked by
/// `scripts/kernel-fixture.sh` the first time.
pub fn fixture() -> &'static Fixture {
    static FIXTURE: OnceLock<Fixture> = OnceLock::new();
    FIXTURE.get_or_init(|| load("kernel-fixture", None))
}

/// trixie's cloud kernel (6.12, its modules xz-compressed), the same way.
fn trixie() -> &'static Fixture {
    static FIXTURE: OnceLock<Fixture> = OnceLock::new();
    FIXTURE.get_or_init(|| load("kernel-fixture-trixie", Some("trixie")))
}

fn load(name: &str, suite: Option<&str>) -> Fixture {
    require("apt-get");
    require("dpkg");
    let dir = root().join("target").join(name);
    run_ok(
        Command::new("bash")
            .arg(root().join("scripts/kernel-fixture.sh"))
            .arg(&dir)
            .args(suite),
    );
    let abi = std::fs::read_to_string(dir.join("abi"))
        .unwrap()
        .trim()
        .to_string();
    let tree = ["lib", "usr/lib"]
        .iter()
        .map(|l| dir.join("root").join(l).join("modules").join(&abi))
        .find(|d| d.is_dir())
        .expect("the linux-image package has no module tree");
    let mut paths = Vec::new();
    modules_under(&tree, &mut paths);
    paths.sort();
    let files: Vec<(String, Vec<u8>)> = paths
        .iter()
        .map(|p| {
            let rel = p
                .strip_prefix(&tree)
                .unwrap()
                .to_string_lossy()
                .into_owned();
            (rel, module_bytes(p))
        })
        .collect();
    let modules = files
        .iter()
        .map(|(rel, b)| Module::read(rel, b).unwrap_or_else(|e| panic!("{e}")))
        .collect();
    let symvers_text = std::fs::read(
        dir.join("root/usr/src")
            .join(format!("linux-headers-{abi}"))
            .join("Module.symvers"),
    )
    .unwrap();
    let symvers = Symvers::parse(&symvers_text).unwrap();
    Fixture {
        abi,
        files,
        modules,
        symvers_text,
        symvers,
    }
}

#[test]
fn every_module_of_the_hosts_kernel_passes_against_its_own_module_symvers() {
    every_module_passes(fixture());
}

#[test]
fn every_module_of_trixies_6_12_kernel_passes_against_its_own_module_symvers() {
    let f = trixie();
    assert!(f.abi.starts_with("6.12."), "{}", f.abi);
    assert!(f.files.iter().all(|(p, _)| p.ends_with(".ko.xz")));
    every_module_passes(f);
}

fn every_module_passes(f: &Fixture) {
    assert!(f.modules.len() > 500, "only {} modules", f.modules.len());
    assert!(f.symvers.len() > 5000, "only {} symbols", f.symvers.len());
    // Every module of one kernel build has the same vermagic, naming the ABI first.
    let vermagic = f.vermagic();
    assert!(vermagic.starts_with(&format!("{} ", f.abi)), "{vermagic}");
    assert!(vermagic.contains("modversions"), "{vermagic}");
    let facts = check(&f.modules, &f.kernel()).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(facts.len(), f.modules.len());
    // What the check went through: real symbols, CRCs and exports, not empty tables.
    let needed: usize = f.modules.iter().map(|m| m.undefined.len()).sum();
    let crcs: usize = f
        .modules
        .iter()
        .map(|m| m.versions.as_ref().map_or(0, |v| v.len()))
        .sum();
    let exports: Vec<_> = f.modules.iter().flat_map(|m| &m.exports).collect();
    assert!(
        needed > 20_000 && crcs > 20_000,
        "{needed} undefined, {crcs} CRCs"
    );
    // The modules' own exports are what Module.symvers lists for them, CRC, licence and
    // namespace alike.
    assert!(exports.len() > 3000, "{} exports", exports.len());
    for x in &exports {
        let e = f
            .symvers
            .get(&x.symbol)
            .unwrap_or_else(|| panic!("{} not listed", x.symbol));
        assert_eq!(
            (x.crc, x.gpl_only, &x.namespace),
            (e.crc, e.gpl_only, &e.namespace),
            "{}",
            x.symbol
        );
    }
    assert!(exports.iter().any(|x| x.namespace.is_some()));
    // Debian signs every module it ships; each fact names the signer and a module's name and
    // vermagic.
    for fact in &facts {
        assert_eq!(fact.vermagic, vermagic);
        let sig = fact
            .signature
            .as_ref()
            .unwrap_or_else(|| panic!("{} is unsigned", fact.file));
        assert!(
            !sig.key_id.is_empty() && sig.hash.starts_with("sha"),
            "{sig:?}"
        );
        assert!(
            fact.signed_by.as_ref().is_some_and(|s| !s.is_empty()),
            "{sig:?}"
        );
        assert!(fact.file.ends_with(".ko") || fact.file.ends_with(".ko.xz"));
    }
    let signers: std::collections::BTreeSet<_> = facts.iter().map(|f| &f.signed_by).collect();
    assert_eq!(signers.len(), 1, "{signers:?}");
    eprintln!(
        "{} modules of {}: {needed} undefined symbols, {crcs} CRCs, {} exports; signed by {:?}",
        f.modules.len(),
        f.abi,
        exports.len(),
        signers
    );
}

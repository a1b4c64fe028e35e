//! A case against the fixture repository (`apt_repo::apt_fixture`): the request as the client
//! takes it (`PackagesSpec`, the fixture's key as its keyring, no host configuration), its own
//! cache, and an observer that keeps the warnings.

use std::path::{Path, PathBuf};

use crate::apt_repo::apt_fixture;
use gpuimg_apt::{
    self as apt, AptError, AptOptions, DebianArch, LockedPackage, Mirror, PackagesSpec,
};
use gpuimg_fetch::observe::Observer;

/// Collects warnings and what finished tasks said; drops progress.
#[derive(Default)]
pub struct Record {
    pub warnings: Vec<String>,
    pub done: Vec<String>,
}

impl Observer for Record {
    fn message(&mut self, _: &str) {}
    fn warn(&mut self, text: &str) {
        self.warnings.push(text.to_string());
    }
    fn task_start(&mut self, _: &str, _: Option<u64>) {}
    fn task_progress(&mut self, _: u64) {}
    fn task_done(&mut self, _: &str, _: u64, text: &str) {
        self.done.push(text.to_string());
    }
}

pub struct Case {
    pub spec: PackagesSpec,
    pub arch: DebianArch,
    pub dir: PathBuf,
    pub opts: AptOptions,
    _tmp: tempfile::TempDir,
}

/// `packages` (comma-separated roots) from the fixture's `suite`, signed by the fixture's key
/// (`repo.gpg` in the case's directory; `wrong.gpg` beside it), for amd64.
pub fn case(suite: &str, packages: &str) -> Case {
    case_with(suite, packages, |_| {})
}

/// [`case`], its request changed by `change` (`essential`, `trusted`).
pub fn case_with(suite: &str, packages: &str, change: impl FnOnce(&mut PackagesSpec)) -> Case {
    let f = apt_fixture();
    let tmp = tempfile::tempdir().unwrap();
    std::fs::copy(&f.key, tmp.path().join("repo.gpg")).unwrap();
    std::fs::copy(&f.wrong_key, tmp.path().join("wrong.gpg")).unwrap();
    let mut spec = PackagesSpec {
        mirror: Mirror::Url(f.url.clone()),
        suite: suite.to_string(),
        components: vec!["main".to_string()],
        keyring: Some(tmp.path().join("repo.gpg")),
        trusted: false,
        essential: false,
        packages: packages.split(", ").map(String::from).collect(),
        repositories: Vec::new(),
        system: false,
    };
    change(&mut spec);
    let mut opts = AptOptions::new(tmp.path().join("cache"));
    opts.apt_dir = tmp.path().join("no-host-apt");
    Case {
        spec,
        arch: DebianArch::from_oci("amd64"),
        dir: tmp.path().to_path_buf(),
        opts,
        _tmp: tmp,
    }
}

impl Case {
    pub fn resolve(&self) -> Result<Vec<LockedPackage>, AptError> {
        apt::resolve(&self.spec, &self.arch, &self.opts, &mut Record::default())
    }

    /// Install into a fresh directory of the case: the result and the directory.
    pub fn install(
        &self,
        locked: Option<&[LockedPackage]>,
    ) -> (Result<apt::Installed, AptError>, PathBuf) {
        let dest = self.dir.join(format!("root-{}", rand_suffix()));
        std::fs::create_dir(&dest).unwrap();
        let r = apt::install(
            &self.spec,
            &self.arch,
            &self.opts,
            locked,
            &dest,
            &mut Record::default(),
        );
        (r, dest)
    }
}

fn rand_suffix() -> String {
    use std::sync::atomic::{AtomicUsize, Ordering};
    static N: AtomicUsize = AtomicUsize::new(0);
    N.fetch_add(1, Ordering::Relaxed).to_string()
}

/// `name version` of each package.
pub fn names(l: &[LockedPackage]) -> Vec<String> {
    l.iter()
        .map(|p| format!("{} {}", p.name, p.version))
        .collect()
}

pub fn is_empty_dir(p: &Path) -> bool {
    std::fs::read_dir(p).unwrap().next().is_none()
}

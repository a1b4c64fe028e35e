//! Resolution and fetching against a real simple index the test writes and serves on loopback
//! (PEP 503 HTML and PEP 691 JSON pages, real wheels): markers and tags follow the image, not
//! the host; yanked files, source-only packages, conflicts and hash mismatches are refused
//! with messages that say why; metadata comes from PEP 658 files (or range reads), never a
//! wheel's body; `--offline` works from the cache alone. A hostile index (thousands of
//! unreadable versions, lying metadata files, links to host files, FIFOs, absurd sizes) costs
//! bounded work and gets one clear refusal.

use crate::common;

use std::path::Path;

use common::hostile_index;
use common::pyindex::{write_index, Dist, Pages};
use gpuimg_fetch::observe::Silent;
use gpuimg_pypi::ImagePython;
use gpuimg_pypi::PinnedWheel;
use gpuimg_pypi::{self as pypi, HostSettings, PypiError, PythonRequest};
use gpuimg_store::cache::Cache;

/// The request of a loaded profile's `python:`, through the plan's conversion.
fn request_of(
    p: &gpuimg_build::profile::Profile,
    host: &HostSettings,
) -> Result<PythonRequest, PypiError> {
    let spec = gpuimg_build::plan::source_specs::python_request(p).expect("a `python:` section");
    PythonRequest::new(&spec, host)
}

fn image(minor: u32, machine: &str) -> ImagePython {
    ImagePython {
        version: (3, minor),
        full_version: format!("3.{minor}.2"),
        interpreter: format!("/usr/bin/python3.{minor}"),
        site_dir: format!("/usr/local/lib/python3.{minor}/dist-packages"),
        scripts_dir: "/usr/local/bin".into(),
        glibc: (2, 36),
        machine: machine.into(),
    }
}

struct Index {
    dir: tempfile::TempDir,
    server: common::Server,
    cache: Cache,
}

impl Index {
    fn new(dists: &[Dist], pages: Pages) -> Index {
        let dir = tempfile::tempdir().unwrap();
        write_index(&dir.path().join("root"), dists, pages);
        let server = common::serve(&dir.path().join("root"));
        let cache = Cache::open(&dir.path().join("cache")).unwrap();
        Index { dir, server, cache }
    }

    fn url(&self) -> String {
        format!("{}/simple/", self.server.url)
    }

    fn request(&self, packages: &[&str]) -> PythonRequest {
        PythonRequest::from_parts(packages, &[("index", &self.url())]).unwrap()
    }

    fn resolve_for(
        &self,
        packages: &[&str],
        img: &ImagePython,
    ) -> Result<Vec<PinnedWheel>, PypiError> {
        pypi::resolve(
            &self.request(packages),
            img,
            &self.cache,
            &mut Silent,
            false,
        )
    }

    fn resolve(&self, packages: &[&str]) -> Result<Vec<PinnedWheel>, PypiError> {
        self.resolve_for(packages, &image(11, "x86_64"))
    }

    fn root(&self) -> std::path::PathBuf {
        self.dir.path().join("root")
    }
}

fn names(pins: &[PinnedWheel]) -> Vec<String> {
    pins.iter()
        .map(|p| format!("{} {}", p.name, p.version))
        .collect()
}

fn no_solution(r: Result<Vec<PinnedWheel>, PypiError>) -> String {
    match r {
        Err(e @ PypiError::NoSolution { .. }) => {
            assert_eq!(e.exit_code(), 1);
            e.to_string()
        }
        other => panic!("expected no solution, got {other:?}"),
    }
}

const JSON_658: Pages = Pages {
    json: true,
    metadata_files: true,
};

#[test]
fn markers_are_evaluated_for_the_image_not_the_host() {
    let idx = Index::new(
        &[
            Dist::wheel("app", "1.0")
                .requires("armonly; platform_machine == \"aarch64\"")
                .requires("backport>=1; python_version < \"3.12\"")
                .requires("linuxonly; sys_platform == \"linux\"")
                .requires("winonly; sys_platform == \"win32\""),
            Dist::wheel("armonly", "1.0"),
            Dist::wheel("backport", "1.2"),
            Dist::wheel("linuxonly", "0.1"),
            Dist::wheel("winonly", "0.1"),
        ],
        JSON_658,
    );
    let amd = idx.resolve(&["app"]).unwrap();
    assert_eq!(names(&amd), ["app 1.0", "backport 1.2", "linuxonly 0.1"]);
    let arm = idx.resolve_for(&["app"], &image(11, "aarch64")).unwrap();
    assert_eq!(
        names(&arm),
        ["app 1.0", "armonly 1.0", "backport 1.2", "linuxonly 0.1"]
    );
    // The image's Python decides `python_version`, whatever runs the build.
    let py312 = idx.resolve_for(&["app"], &image(12, "x86_64")).unwrap();
    assert_eq!(names(&py312), ["app 1.0", "linuxonly 0.1"]);
    let app = &amd[0];
    assert!(app.requested && app.index == "index", "{app:?}");
    assert_eq!(app.required_by, ["app"]);
    assert_eq!(amd[1].required_by, ["app 1.0"]);
    assert!(!amd[1].requested);
}

#[test]
fn wheels_are_chosen_by_the_images_tags_and_a_refusal_says_what_exists_and_what_is_needed() {
    let idx = Index::new(
        &[
            Dist::wheel("native", "2.0").tags("cp311-cp311-manylinux_2_39_x86_64"),
            Dist::wheel("native", "1.0")
                .tags("cp311-cp311-manylinux_2_17_x86_64.manylinux2014_x86_64"),
            Dist::wheel("native", "1.0").tags("cp311-cp311-musllinux_1_2_x86_64"),
            Dist::wheel("newglibc", "1.0").tags("cp311-cp311-manylinux_2_39_x86_64"),
        ],
        JSON_658,
    );
    let pins = idx.resolve(&["native"]).unwrap();
    assert_eq!(names(&pins), ["native 1.0"]);
    assert_eq!(
        pins[0].filename,
        "native-1.0-cp311-cp311-manylinux_2_17_x86_64.manylinux2014_x86_64.whl"
    );
    let e = no_solution(idx.resolve(&["newglibc"]));
    assert!(e.contains("newglibc"), "{e}");
    assert!(
        e.contains("cp311-cp311-manylinux_2_39_x86_64"),
        "names what exists: {e}"
    );
    assert!(
        e.contains("manylinux_2_36_x86_64"),
        "names what is needed: {e}"
    );
    assert!(e.contains("glibc 2.36"), "{e}");
}

#[test]
fn yanked_files_are_taken_only_when_pinned_exactly() {
    let idx = Index::new(
        &[
            Dist::wheel("yk", "2.0").yanked("broken build"),
            Dist::wheel("yk", "1.0"),
            Dist::wheel("onlyyanked", "1.0").yanked(""),
        ],
        Pages {
            json: false,
            metadata_files: true,
        },
    );
    assert_eq!(names(&idx.resolve(&["yk"]).unwrap()), ["yk 1.0"]);
    assert_eq!(names(&idx.resolve(&["yk>=1"]).unwrap()), ["yk 1.0"]);
    assert_eq!(names(&idx.resolve(&["yk==2.0"]).unwrap()), ["yk 2.0"]);
    let e = no_solution(idx.resolve(&["onlyyanked"]));
    assert!(e.contains("onlyyanked 1.0 is yanked"), "{e}");
}

#[test]
fn a_source_only_package_is_refused_by_name() {
    let idx = Index::new(
        &[
            Dist::sdist("srconly", "3.1"),
            Dist::wheel("uses-src", "1.0").requires("srconly>=3"),
        ],
        JSON_658,
    );
    let e = no_solution(idx.resolve(&["uses-src"]));
    assert!(
        e.contains("srconly 3.1 has only a source distribution"),
        "{e}"
    );
    assert!(e.contains("never builds from source"), "{e}");
    assert!(e.contains("uses-src"), "{e}");
}

#[test]
fn an_unsatisfiable_pair_of_pins_is_explained_naming_both() {
    let idx = Index::new(
        &[
            Dist::wheel("alpha", "1.0").requires("common<2"),
            Dist::wheel("beta", "1.0").requires("common>=2"),
            Dist::wheel("common", "1.5"),
            Dist::wheel("common", "2.5"),
        ],
        JSON_658,
    );
    let e = no_solution(idx.resolve(&["alpha==1.0", "beta==1.0"]));
    for want in [
        "alpha 1.0 depends on common <2",
        "beta 1.0 depends on common >=2",
        "`alpha==1.0` (requirement 1)",
        "`beta==1.0` (requirement 2)",
    ] {
        assert!(e.contains(want), "missing `{want}` in:\n{e}");
    }
}

#[test]
fn requires_python_and_extras_are_honoured() {
    let idx = Index::new(
        &[
            Dist::wheel("modern", "2.0").requires_python(">=3.12"),
            Dist::wheel("modern", "1.0").requires_python(">=3.8"),
            Dist::wheel("withx", "1.0")
                .requires("speedy>=1; extra == \"fast\"")
                .requires("base-dep"),
            Dist::wheel("speedy", "1.1"),
            Dist::wheel("base-dep", "0.3"),
        ],
        JSON_658,
    );
    assert_eq!(names(&idx.resolve(&["modern"]).unwrap()), ["modern 1.0"]);
    let py312 = idx.resolve_for(&["modern"], &image(12, "x86_64")).unwrap();
    assert_eq!(names(&py312), ["modern 2.0"]);
    let e = no_solution(idx.resolve(&["modern>=2"]));
    assert!(
        e.contains("requires Python >=3.12 and the image has 3.11.2"),
        "{e}"
    );
    assert_eq!(
        names(&idx.resolve(&["withx"]).unwrap()),
        ["base-dep 0.3", "withx 1.0"]
    );
    let pins = idx.resolve(&["withx[fast]"]).unwrap();
    assert_eq!(names(&pins), ["base-dep 0.3", "speedy 1.1", "withx 1.0"]);
    assert_eq!(pins[1].required_by, ["withx[fast] 1.0"]);
}

#[test]
fn metadata_comes_from_pep_658_files_and_no_wheel_body_is_fetched_to_resolve() {
    for json in [true, false] {
        let idx = Index::new(
            &[
                Dist::wheel("top", "1.0").requires("leaf"),
                Dist::wheel("leaf", "2.0"),
            ],
            Pages {
                json,
                metadata_files: true,
            },
        );
        let pins = idx.resolve(&["top"]).unwrap();
        assert_eq!(names(&pins), ["leaf 2.0", "top 1.0"]);
        let hits = idx.server.hits.lock().unwrap().clone();
        let whole = idx.server.whole_bodies();
        assert!(
            whole.iter().all(|h| !h.ends_with(".whl")),
            "a wheel was fetched to resolve: {whole:?}"
        );
        if json {
            // PEP 691 pages give the size: the wheels are not asked for at all.
            assert!(hits.iter().all(|h| !h.ends_with(".whl")), "{hits:?}");
        } else {
            let ranges = idx.server.ranges.lock().unwrap().clone();
            assert!(ranges.iter().all(|(_, r)| r == "bytes=-1"), "{ranges:?}");
        }
        assert_eq!(
            hits.iter().filter(|h| h.ends_with(".whl.metadata")).count(),
            2,
            "{hits:?}"
        );
        // HTML pages give no size: it is learnt with a one-byte range, not the body.
        assert!(pins.iter().all(|p| p.size > 96 * 1024), "{pins:?}");
    }
}

#[test]
fn without_metadata_files_the_wheel_directory_is_read_by_ranges() {
    let idx = Index::new(
        &[
            Dist::wheel("top", "1.0").requires("leaf"),
            Dist::wheel("leaf", "2.0"),
        ],
        Pages {
            json: false,
            metadata_files: false,
        },
    );
    let pins = idx.resolve(&["top"]).unwrap();
    assert_eq!(names(&pins), ["leaf 2.0", "top 1.0"]);
    let whole = idx.server.whole_bodies();
    assert!(whole.iter().all(|h| !h.ends_with(".whl")), "{whole:?}");
    let ranges = idx.server.ranges.lock().unwrap().clone();
    assert!(
        ranges
            .iter()
            .any(|(p, r)| p.ends_with("top-1.0-py3-none-any.whl") && r.starts_with("bytes=-")),
        "{ranges:?}"
    );
}

#[test]
fn fetch_checks_sha256_caches_wheels_and_offline_needs_no_server() {
    let idx = Index::new(
        &[
            Dist::wheel("top", "1.0").requires("leaf"),
            Dist::wheel("leaf", "2.0"),
        ],
        JSON_658,
    );
    let req = idx.request(&["top"]);
    let pins = pypi::resolve(&req, &image(11, "x86_64"), &idx.cache, &mut Silent, false).unwrap();
    let got = pypi::fetch(&pins, &req, &idx.cache, &mut Silent, false).unwrap();
    for w in &got {
        assert!(w
            .path
            .starts_with(idx.dir.path().join("cache/wheels-v1/sha256")));
        assert_eq!(std::fs::metadata(&w.path).unwrap().len(), w.pin.size);
    }
    // Offline: the same answer from the cache alone, not one more request.
    let before = idx.server.hits.lock().unwrap().len();
    let again = pypi::resolve(&req, &image(11, "x86_64"), &idx.cache, &mut Silent, true).unwrap();
    assert_eq!(again, pins);
    let got2 = pypi::fetch(&pins, &req, &idx.cache, &mut Silent, true).unwrap();
    assert_eq!(got2.len(), 2);
    assert_eq!(idx.server.hits.lock().unwrap().len(), before);
    // Offline with an empty cache: an error naming what is missing.
    let empty = Cache::open(&idx.dir.path().join("empty-cache")).unwrap();
    let e = pypi::resolve(&req, &image(11, "x86_64"), &empty, &mut Silent, true).unwrap_err();
    assert!(e.to_string().contains("--offline"), "{e}");
    assert_eq!(e.exit_code(), 2);
}

#[test]
fn a_wheel_whose_bytes_differ_from_the_index_sha256_is_refused() {
    let idx = Index::new(&[Dist::wheel("solo", "1.0")], JSON_658);
    let req = idx.request(&["solo"]);
    let pins = pypi::resolve(&req, &image(11, "x86_64"), &idx.cache, &mut Silent, false).unwrap();
    // Same length, one byte changed on the server.
    let file = idx.root().join("files").join(&pins[0].filename);
    let mut bytes = std::fs::read(&file).unwrap();
    bytes[100] ^= 0x20;
    std::fs::write(&file, &bytes).unwrap();
    let e = pypi::fetch(&pins, &req, &idx.cache, &mut Silent, false).unwrap_err();
    let s = e.to_string();
    assert!(
        s.contains("Checksum mismatch") && s.contains(&pins[0].filename),
        "{s}"
    );
    assert!(!idx
        .dir
        .path()
        .join("cache/wheels-v1/sha256")
        .join(pins[0].sha256.hex())
        .exists());
    // A lock whose sha256 differs from what the index lists is refused before downloading.
    let mut lying = pins[0].clone();
    lying.sha256 = gpuimg_store::digest::Digest::of(b"something else");
    let e = pypi::fetch(&[lying], &req, &idx.cache, &mut Silent, false).unwrap_err();
    assert!(e.to_string().contains("has the sha256"), "{e}");
}

#[test]
fn requirements_hashes_are_enforced() {
    let idx = Index::new(
        &[Dist::wheel("solo", "1.0"), Dist::wheel("solo", "0.9")],
        JSON_658,
    );
    let dir = tempfile::tempdir().unwrap();
    let good = common::pyindex::sha256_hex(&Dist::wheel("solo", "0.9").bytes());
    let profile = |reqs: &str| {
        std::fs::write(dir.path().join("requirements.txt"), reqs).unwrap();
        let yaml = format!(
            "name: t\npython:\n  requirements: ./requirements.txt\n  index: {}\n",
            idx.url()
        );
        let p = gpuimg_build::profile::parse(&yaml, "p.yaml", dir.path(), &|_| None).unwrap();
        request_of(&p, &HostSettings::default()).unwrap()
    };
    // The hash allows 0.9 only: the newer 1.0 is not a candidate.
    let req = profile(&format!("solo --hash=sha256:{good}\n"));
    let pins = pypi::resolve(&req, &image(11, "x86_64"), &idx.cache, &mut Silent, false).unwrap();
    assert_eq!(names(&pins), ["solo 0.9"]);
    let req = profile(&format!("solo>=1.0 --hash=sha256:{good}\n"));
    let e = no_solution(pypi::resolve(
        &req,
        &image(11, "x86_64"),
        &idx.cache,
        &mut Silent,
        false,
    ));
    assert!(e.contains("hashes allow"), "{e}");
}

#[test]
fn with_nothing_configured_and_no_python_to_ask_one_line_says_what_to_set() {
    let dir = tempfile::tempdir().unwrap();
    let p = gpuimg_build::profile::parse(
        "name: t\npython:\n  packages: [requests]\n",
        "p.yaml",
        dir.path(),
        &|_| None,
    )
    .unwrap();
    let e = request_of(&p, &HostSettings::default()).unwrap_err();
    assert_eq!(e.exit_code(), 2);
    let s = e.to_string();
    assert!(
        s.contains("`python.index`") && s.contains("PIP_INDEX_URL"),
        "{s}"
    );
    assert!(!s.contains('\n'), "{s}");
    // A host Python that is not there is no better.
    let host = HostSettings {
        python: Some(Path::new("/nonexistent/python3").to_path_buf()),
        ..HostSettings::default()
    };
    let s = request_of(&p, &host).unwrap_err().to_string();
    assert!(
        s.contains("/nonexistent/python3") && s.contains("PIP_INDEX_URL"),
        "{s}"
    );
}

#[test]
fn index_discovery_follows_the_documented_order() {
    let dir = tempfile::tempdir().unwrap();
    let conf = dir.path().join("pip.conf");
    std::fs::write(
        &conf,
        "[global]\nindex-url = http://from-pip-conf.invalid/simple\n",
    )
    .unwrap();
    let load =
        |yaml: &str| gpuimg_build::profile::parse(yaml, "p.yaml", dir.path(), &|_| None).unwrap();
    let host = HostSettings {
        index_vars: vec![(
            "PIP_INDEX_URL".into(),
            "http://u:secret@from-env.invalid/simple".into(),
        )],
        pip_config_files: vec![conf.clone()],
        ..HostSettings::default()
    };
    let first = |yaml: &str, host: &HostSettings| {
        let r = request_of(&load(yaml), host).unwrap();
        let main = r.indexes.last().unwrap().clone();
        (main.name, main.url.to_string(), r)
    };
    let (name, url, _) = first(
        "name: t\npython:\n  packages: [x]\n  index: http://from-profile.invalid/simple\n",
        &host,
    );
    assert_eq!(
        (name.as_str(), url.as_str()),
        ("index", "http://from-profile.invalid/simple/")
    );
    let (name, url, r) = first("name: t\npython:\n  packages: [x]\n", &host);
    assert_eq!(
        (name.as_str(), url.as_str()),
        ("host", "http://from-env.invalid/simple/")
    );
    assert!(
        !format!("{r:?}").contains("secret"),
        "a credential is in the request"
    );
    assert_eq!(r.credentials.len(), 1);
    let files_only = HostSettings {
        pip_config_files: vec![conf],
        ..HostSettings::default()
    };
    let (_, url, _) = first("name: t\npython:\n  packages: [x]\n", &files_only);
    assert_eq!(url, "http://from-pip-conf.invalid/simple/");
    // Extras are searched before the main index and keep their names.
    let (_, _, r) = first(
        "name: t\npython:\n  packages: [x]\n  index: http://a.invalid/simple\n  extra-indexes: [\"cu=http://b.invalid/whl\", \"http://c.invalid/simple\"]\n",
        &host,
    );
    let order: Vec<&str> = r.indexes.iter().map(|i| i.name.as_str()).collect();
    assert_eq!(order, ["cu", "extra-2", "index"]);
}

#[test]
fn a_pylock_toml_as_requirements_gives_exactly_its_wheels() {
    let dists = [
        Dist::wheel("top", "1.0").requires("leaf"),
        Dist::wheel("leaf", "2.0"),
        Dist::wheel("leaf", "1.0"),
    ];
    let idx = Index::new(&dists, JSON_658);
    let sha = |d: &Dist| common::pyindex::sha256_hex(&d.bytes());
    let dir = tempfile::tempdir().unwrap();
    let lock = |leaf: &Dist| {
        format!(
            "lock-version = \"1.0\"\ncreated-by = \"test\"\n[[packages]]\nname = \"top\"\nversion = \"1.0\"\nwheels = [{{ name = \"{}\", hashes = {{ sha256 = \"{}\" }} }}]\n[[packages]]\nname = \"leaf\"\nversion = \"{}\"\nwheels = [{{ name = \"{}\", hashes = {{ sha256 = \"{}\" }} }}]\n",
            dists[0].filename(),
            sha(&dists[0]),
            leaf.version,
            leaf.filename(),
            sha(leaf)
        )
    };
    let request = |text: &str| {
        std::fs::write(dir.path().join("pylock.toml"), text).unwrap();
        let yaml = format!(
            "name: t\npython:\n  requirements: ./pylock.toml\n  index: {}\n",
            idx.url()
        );
        let p = gpuimg_build::profile::parse(&yaml, "p.yaml", dir.path(), &|_| None).unwrap();
        request_of(&p, &HostSettings::default()).unwrap()
    };
    // The older leaf, as locked, not the newest.
    let req = request(&lock(&dists[2]));
    let pins = pypi::resolve(&req, &image(11, "x86_64"), &idx.cache, &mut Silent, false).unwrap();
    assert_eq!(names(&pins), ["leaf 1.0", "top 1.0"]);
    // A lock whose hash no file on the index has is refused.
    let tampered = lock(&dists[2]).replace(&sha(&dists[2]), &"0".repeat(64));
    let e = no_solution(pypi::resolve(
        &request(&tampered),
        &image(11, "x86_64"),
        &idx.cache,
        &mut Silent,
        false,
    ));
    assert!(e.contains("leaf") && e.contains("hashes allow"), "{e}");
}

#[test]
fn a_page_of_thousands_of_unreadable_versions_costs_one_read_each_and_a_short_message() {
    let idx = Index::new(&[Dist::wheel("other", "1.0")], JSON_658);
    hostile_index::many_missing_versions(&idx.root(), "many", 1500);
    let e = no_solution(idx.resolve(&["many"]));
    // Skipped and counted, not one fact per version.
    assert!(e.len() < 2_000, "{} bytes:\n{}", e.len(), &e[..2_000]);
    assert!(
        e.contains("1500 versions of many (1.0 to 1.1499) were skipped"),
        "{e}"
    );
    assert!(e.contains("answers HTTP 404"), "{e}");
    let wheels = idx
        .server
        .hits
        .lock()
        .unwrap()
        .iter()
        .filter(|h| h.ends_with(".whl"))
        .count();
    assert_eq!(wheels, 1500, "one read per version");
    // A budget of reads stops it, naming the budget (not a conflict: exit 2).
    let mut req = idx.request(&["many"]);
    req.budget.metadata_reads = 100;
    let fresh = Cache::open(&idx.dir.path().join("cache-2")).unwrap();
    let e = pypi::resolve(&req, &image(11, "x86_64"), &fresh, &mut Silent, false).unwrap_err();
    assert_eq!(e.exit_code(), 2, "{e}");
    let s = e.to_string();
    assert!(
        s.contains(pypi::budget::READS_VAR) && s.contains("100 wheels"),
        "{s}"
    );
    // So does its time, checked before anything is read.
    req.budget.metadata_reads = u64::MAX;
    req.budget.wall = std::time::Duration::ZERO;
    let e = pypi::resolve(&req, &image(11, "x86_64"), &fresh, &mut Silent, false).unwrap_err();
    assert!(e.to_string().contains(pypi::budget::SECONDS_VAR), "{e}");
}

#[test]
fn a_derivation_of_many_facts_is_summarised() {
    // Every version of `wide` needs a version of `narrow` that does not exist.
    let mut dists: Vec<Dist> = (0..60)
        .map(|i| Dist::wheel("wide", &format!("1.{i}")).requires(&format!("narrow=={i}.5")))
        .collect();
    dists.push(Dist::wheel("narrow", "0.1"));
    let idx = Index::new(&dists, JSON_658);
    let e = no_solution(idx.resolve(&["wide"]));
    assert!(e.lines().count() < 20, "{} lines:\n{e}", e.lines().count());
    assert!(
        e.contains("in summary") && e.contains("facts on wide"),
        "{e}"
    );
    // Ruling versions out one by one grows what pubgrub holds with the square of their
    // number: the ranges chosen from have a budget too, named when spent (exit 2).
    let mut req = idx.request(&["wide"]);
    req.budget.range_segments = 200;
    let e = pypi::resolve(&req, &image(11, "x86_64"), &idx.cache, &mut Silent, false).unwrap_err();
    assert_eq!(e.exit_code(), 2, "{e}");
    let s = e.to_string();
    assert!(
        s.contains(pypi::budget::SEGMENTS_VAR) && s.contains("of wide"),
        "{s}"
    );
}

#[test]
fn metadata_read_from_one_index_never_answers_for_another() {
    let dists = [Dist::wheel("top", "1.0"), Dist::wheel("evil", "1.0")];
    let honest = Index::new(&dists, JSON_658);
    // The same wheel (same bytes, same sha256) on a hostile index whose PEP 658 file adds a
    // dependency, its announced sha256 matching the lie.
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    common::pyindex::write_index(&root, &dists, JSON_658);
    let top = dists[0].filename();
    let lie = format!("{}Requires-Dist: evil\n", dists[0].metadata());
    hostile_index::swap_metadata_file(&root, "top", &top, &lie);
    let hostile = common::serve(&root);
    // `lock` against the hostile index, on the cache the honest build uses.
    let req =
        PythonRequest::from_parts(&["top"], &[("index", &format!("{}/simple/", hostile.url))])
            .unwrap();
    let pins = pypi::resolve(
        &req,
        &image(11, "x86_64"),
        &honest.cache,
        &mut Silent,
        false,
    )
    .unwrap();
    assert_eq!(names(&pins), ["evil 1.0", "top 1.0"]);
    // The honest index is asked for its own metadata file, and its answer stands.
    assert_eq!(names(&honest.resolve(&["top"]).unwrap()), ["top 1.0"]);
    assert_eq!(honest.server.hits_of(&format!("/files/{top}.metadata")), 1);
    // Read by ranges from one server, metadata does not answer for another either.
    let ranged = Index::new(
        &dists,
        Pages {
            json: true,
            metadata_files: false,
        },
    );
    let cache = Cache::open(&ranged.dir.path().join("cache-2")).unwrap();
    pypi::resolve(&req, &image(11, "x86_64"), &cache, &mut Silent, false).unwrap();
    let again = ranged.request(&["top"]);
    let pins = pypi::resolve(&again, &image(11, "x86_64"), &cache, &mut Silent, false).unwrap();
    assert_eq!(names(&pins), ["top 1.0"]);
    assert!(!ranged.server.ranges.lock().unwrap().is_empty());
}

#[test]
fn an_http_page_names_no_file_of_the_build_host() {
    let idx = Index::new(&[Dist::wheel("other", "1.0")], JSON_658);
    // A real wheel on the host, linked by absolute `file:` URLs from the page.
    let host = idx.dir.path().join("host");
    std::fs::create_dir_all(&host).unwrap();
    let d = Dist::wheel("secret", "1.0");
    std::fs::write(host.join(d.filename()), d.bytes()).unwrap();
    let page = idx.root().join("simple/secret");
    std::fs::create_dir_all(&page).unwrap();
    let link = url::Url::from_file_path(host.join(d.filename())).unwrap();
    std::fs::write(
        page.join("index.html"),
        format!("<a href=\"{link}\">{}</a>", d.filename()),
    )
    .unwrap();
    let e = no_solution(idx.resolve(&["secret"]));
    assert!(
        e.contains("`secret` is on none of the indexes searched"),
        "{e}"
    );
}

#[test]
fn a_local_index_reads_only_regular_files_and_never_blocks() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    common::pyindex::write_index(&root, &[Dist::wheel("fine", "1.0")], JSON_658);
    // A project page that is a FIFO.
    hostile_index::fifo(&root.join("simple/piped/index.json"));
    // A page linking to a FIFO named like a wheel.
    let stuck = "stuck-1.0-py3-none-any.whl";
    hostile_index::fifo(&root.join("files").join(stuck));
    std::fs::create_dir_all(root.join("simple/stuck")).unwrap();
    std::fs::write(
        root.join("simple/stuck/index.html"),
        format!("<a href=\"../../files/{stuck}\">{stuck}</a>"),
    )
    .unwrap();
    let index = url::Url::from_directory_path(root.join("simple"))
        .unwrap()
        .to_string();
    let cache = Cache::open(&dir.path().join("cache")).unwrap();
    let resolve = move |p: &'static str| {
        let (index, cache) = (index.clone(), cache.clone());
        hostile_index::within_a_minute(p, move || {
            let req = PythonRequest::from_parts(&[p], &[("index", &index)]).unwrap();
            pypi::resolve(&req, &image(11, "x86_64"), &cache, &mut Silent, false)
        })
    };
    let e = resolve("piped").unwrap_err();
    assert_eq!(e.exit_code(), 2);
    let chain = format!(
        "{e}: {}",
        std::error::Error::source(&e)
            .map(|s| s.to_string())
            .unwrap_or_default()
    );
    assert!(
        chain.contains("piped/index.json") && chain.contains("not a regular file"),
        "{chain}"
    );
    let e = no_solution(resolve("stuck"));
    assert!(
        e.contains("stuck 1.0 was skipped") && e.contains("not a regular file"),
        "{e}"
    );
    assert_eq!(names(&resolve("fine").unwrap()), ["fine 1.0"]);
}

#[test]
fn a_claimed_wheel_size_over_the_maximum_is_refused_before_any_byte() {
    let d = Dist::wheel("huge", "1.0");
    let idx = Index::new(std::slice::from_ref(&d), JSON_658);
    let real = d.bytes().len();
    let claimed = 50u64 << 30;
    hostile_index::rewrite_pages(
        &idx.root(),
        "huge",
        &format!("\"size\":{real}"),
        &format!("\"size\":{claimed}"),
    );
    let wheel = format!("/files/{}", d.filename());
    idx.server.fault(&wheel, common::Fault::Endless);
    let e = idx.resolve(&["huge"]).unwrap_err();
    assert_eq!(e.exit_code(), 2);
    let s = e.to_string();
    assert!(
        s.contains(&d.filename()) && s.contains(&claimed.to_string()),
        "{s}"
    );
    assert!(s.contains(pypi::budget::MAX_WHEEL_VAR), "{s}");
    // A lock that claims it is refused the same way, before a request.
    let req = idx.request(&["huge"]);
    let pin = PinnedWheel {
        name: "huge".into(),
        version: "1.0".into(),
        filename: d.filename(),
        sha256: gpuimg_store::digest::Digest::of(&d.bytes()),
        size: claimed,
        index: "index".into(),
        requested: true,
        required_by: vec![],
    };
    let e = pypi::fetch(
        std::slice::from_ref(&pin),
        &req,
        &idx.cache,
        &mut Silent,
        false,
    )
    .unwrap_err();
    assert!(e.to_string().contains("over the"), "{e}");
    assert_eq!(idx.server.hits_of(&wheel), 0);
    // At its true size, an endless body is cut at that size: nothing past it is written.
    let pin = PinnedWheel {
        size: real as u64,
        ..pin
    };
    let e = pypi::fetch(&[pin], &req, &idx.cache, &mut Silent, false).unwrap_err();
    assert!(
        e.to_string().contains(&format!("more than {real} bytes")),
        "{e}"
    );
    assert_eq!(idx.server.hits_of(&wheel), 1, "not retried");
}

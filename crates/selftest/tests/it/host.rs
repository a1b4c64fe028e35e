//! The host checks (`gpuimg-selftest --host`, `run_host`) on node trees the tests make
//! (`node_tree`: real relocatable modules compiled by `gcc`, signed by `openssl cms` as
//! `sign-file` signs): a node as built passes every check and names where it read each fact; each
//! mismatch (another kernel, another module or library version, no firmware, the other flavour,
//! another signer or none) fails the check that names it and no other; a host whose module was
//! loaded from elsewhere warns that the file checks could not apply.

use std::collections::BTreeSet;

use gpuimg_expect::Expectation;
use gpuimg_selftest::{run_host, Check, Report, Status, Verdict};

use crate::node_tree::{self, Keys, Node, ABI, DRIVER};

const KEY_NAME: &str = "gpuimg node key";

fn report(node: &Node, keys: Option<&Keys>, expect: &str) -> (tempfile::TempDir, Report) {
    let dir = tempfile::tempdir().unwrap();
    node_tree::make(dir.path(), node, keys);
    let e = Expectation::from_json(expect, "expect.json").unwrap();
    let r = run_host(e.node.as_ref().unwrap(), dir.path());
    (dir, r)
}

fn the<'a>(r: &'a Report, name: &str) -> &'a Check {
    r.checks
        .iter()
        .find(|c| c.name == name)
        .unwrap_or_else(|| panic!("no check {name}: {}", r.to_text()))
}

fn failing(r: &Report) -> BTreeSet<String> {
    r.checks
        .iter()
        .filter(|c| c.status == Status::Fail)
        .map(|c| c.name.clone())
        .collect()
}

fn names(v: &[&str]) -> BTreeSet<String> {
    v.iter().map(|s| s.to_string()).collect()
}

#[test]
fn a_node_as_built_passes_every_check_naming_where_it_read_each() {
    let keys = Keys::new(KEY_NAME);
    let node = Node {
        signed: true,
        ..Node::default()
    };
    let (dir, r) = report(
        &node,
        Some(&keys),
        &node_tree::expectation(Some(&keys), KEY_NAME),
    );
    assert_eq!(r.verdict, Verdict::Pass, "{}", r.to_text());
    let got: Vec<(&str, Status)> = r
        .checks
        .iter()
        .map(|c| (c.name.as_str(), c.status))
        .collect();
    assert_eq!(
        got,
        [
            ("running-kernel", Status::Pass),
            ("module-vermagic[nvidia-current]", Status::Pass),
            ("module-vermagic[nvidia-current-uvm]", Status::Pass),
            ("module-version", Status::Pass),
            ("library-version", Status::Pass),
            ("gsp-firmware", Status::Pass),
            ("module-flavour", Status::Pass),
            ("signing-certificate", Status::Pass),
            ("module-signer[nvidia-current]", Status::Pass),
            ("module-signer[nvidia-current-uvm]", Status::Pass),
        ]
    );
    let at = |p: &str| dir.path().join(p).display().to_string();
    let c = the(&r, "running-kernel");
    assert_eq!(c.measured.as_deref(), Some(ABI));
    assert_eq!(c.read_from, Some(at("proc/sys/kernel/osrelease")));
    let c = the(&r, "module-vermagic[nvidia-current]");
    assert_eq!(
        c.measured.as_deref(),
        Some(format!("{ABI} SMP preempt mod_unload modversions").as_str())
    );
    // Read through `/lib`, the merged-/usr link, as the node's loader reads it.
    assert_eq!(
        c.read_from,
        Some(at(&format!(
            "lib/modules/{ABI}/updates/dkms/nvidia-current.ko"
        )))
    );
    let c = the(&r, "module-version");
    assert_eq!(
        c.measured.as_deref(),
        Some("535.309.01 (not loaded; nvidia-current.ko's modinfo)")
    );
    let c = the(&r, "library-version");
    assert_eq!(c.measured.as_deref(), Some(DRIVER));
    assert_eq!(
        c.read_from,
        Some(format!(
            "{} -> {}",
            at("usr/lib/x86_64-linux-gnu/libcuda.so.1"),
            at("usr/lib/x86_64-linux-gnu/nvidia/current/libcuda.so.535.309.01")
        ))
    );
    let c = the(&r, "gsp-firmware");
    assert_eq!(c.measured.as_deref(), Some("gsp_ga10x.bin, gsp_tu10x.bin"));
    assert_eq!(c.read_from, Some(at("lib/firmware/nvidia/535.309.01")));
    let c = the(&r, "module-flavour");
    assert_eq!(
        c.measured.as_deref(),
        Some("proprietary (not loaded; nvidia-current.ko's license `NVIDIA`)")
    );
    let signer = format!("{KEY_NAME} (serial {})", keys.serial);
    assert_eq!(
        the(&r, "signing-certificate").measured,
        Some(signer.clone())
    );
    assert_eq!(
        the(&r, "module-signer[nvidia-current-uvm]").measured,
        Some(signer)
    );
    let text = r.to_text();
    assert!(text.contains("gpuimg-selftest: PASS (host level"), "{text}");
    assert!(
        text.contains(&format!("from {}", at("proc/sys/kernel/osrelease"))),
        "{text}"
    );
}

#[test]
fn a_loaded_module_is_read_from_sys_and_proc() {
    let node = Node {
        loaded: Some((DRIVER.into(), false)),
        ..Node::default()
    };
    let (dir, r) = report(&node, None, &node_tree::expectation(None, KEY_NAME));
    assert_eq!(r.verdict, Verdict::Pass, "{}", r.to_text());
    let c = the(&r, "module-version");
    assert_eq!(c.measured.as_deref(), Some("535.309.01 (loaded)"));
    assert_eq!(
        c.read_from,
        Some(
            dir.path()
                .join("sys/module/nvidia/version")
                .display()
                .to_string()
        )
    );
    let c = the(&r, "module-flavour");
    assert_eq!(c.measured.as_deref(), Some("proprietary (loaded)"));
    assert_eq!(
        c.read_from,
        Some(
            dir.path()
                .join("proc/driver/nvidia/version")
                .display()
                .to_string()
        )
    );
    assert_eq!(the(&r, "module-signer").status, Status::Skip);
    assert_eq!(r.driver_version.as_deref(), Some(DRIVER));
}

#[test]
fn each_mismatch_fails_the_check_that_names_it() {
    let expect = node_tree::expectation(None, KEY_NAME);
    let other = "535.261.03".to_string();
    for (what, node, fails, says) in [
        (
            "booted into another kernel",
            Node {
                running: Some("6.1.0-29-cloud-amd64".into()),
                ..Node::default()
            },
            names(&[
                "running-kernel",
                "module-vermagic[nvidia-current]",
                "module-vermagic[nvidia-current-uvm]",
                "module-version",
                "module-flavour",
            ]),
            (
                "running-kernel",
                "another kernel than the one it was built for",
            ),
        ),
        (
            "modules built against another kernel",
            Node {
                vermagic: Some("6.1.0-27-cloud-amd64".into()),
                ..Node::default()
            },
            names(&[
                "module-vermagic[nvidia-current]",
                "module-vermagic[nvidia-current-uvm]",
            ]),
            (
                "module-vermagic[nvidia-current]",
                "Built for another kernel",
            ),
        ),
        (
            "user space of another version",
            Node {
                library: Some(other.clone()),
                ..Node::default()
            },
            names(&["library-version"]),
            ("library-version", "RM_VERSION_MISMATCH"),
        ),
        (
            "no libcuda.so.1",
            Node {
                library: None,
                ..Node::default()
            },
            names(&["library-version"]),
            ("library-version", "no `libcuda.so.1`"),
        ),
        (
            "a broken alternative",
            Node {
                library: Some("broken".into()),
                ..Node::default()
            },
            names(&["library-version"]),
            ("library-version", "does not exist"),
        ),
        (
            "modules of another version (and so no firmware for it)",
            Node {
                module_version: other.clone(),
                ..Node::default()
            },
            names(&["module-version", "gsp-firmware"]),
            ("module-version", "another driver's"),
        ),
        (
            "another driver loaded",
            Node {
                loaded: Some(("550.163.01".into(), false)),
                ..Node::default()
            },
            names(&["module-version", "gsp-firmware"]),
            ("module-version", "The loaded NVIDIA module"),
        ),
        (
            "no GSP firmware",
            Node {
                firmware: None,
                ..Node::default()
            },
            names(&["gsp-firmware"]),
            ("gsp-firmware", "loads its GSP firmware from here"),
        ),
        (
            "the open flavour's files",
            Node {
                open: true,
                ..Node::default()
            },
            names(&["module-flavour"]),
            ("module-flavour", "built with the proprietary module"),
        ),
        (
            "the open flavour loaded",
            Node {
                loaded: Some((DRIVER.into(), true)),
                ..Node::default()
            },
            names(&["module-flavour"]),
            ("module-flavour", "built with the proprietary module"),
        ),
        (
            "no module files and nothing loaded",
            Node {
                no_module_files: true,
                ..Node::default()
            },
            names(&[
                "module-vermagic[nvidia-current]",
                "module-vermagic[nvidia-current-uvm]",
                "module-version",
                "module-flavour",
            ]),
            ("module-vermagic[nvidia-current]", "has nothing to load"),
        ),
    ] {
        let (_dir, r) = report(&node, None, &expect);
        assert_eq!(r.verdict, Verdict::Fail, "{what}: {}", r.to_text());
        assert_eq!(failing(&r), fails, "{what}: {}", r.to_text());
        let detail = the(&r, says.0).detail.clone().unwrap_or_default();
        assert!(detail.contains(says.1), "{what}: {detail}");
    }
}

#[test]
fn another_signer_or_none_fails_naming_both() {
    let keys = Keys::new(KEY_NAME);
    let others = Keys::new("someone else");
    let expect = node_tree::expectation(Some(&keys), KEY_NAME);
    let signed = Node {
        signed: true,
        ..Node::default()
    };
    let (_dir, r) = report(&signed, Some(&others), &expect);
    assert_eq!(
        failing(&r),
        names(&[
            "signing-certificate",
            "module-signer[nvidia-current]",
            "module-signer[nvidia-current-uvm]",
        ]),
        "{}",
        r.to_text()
    );
    let c = the(&r, "module-signer[nvidia-current]");
    assert_eq!(
        c.expected,
        Some(format!("{KEY_NAME} (serial {})", keys.serial))
    );
    assert_eq!(
        c.measured,
        Some(format!("someone else (serial {})", others.serial))
    );
    let (_dir, r) = report(&Node::default(), None, &expect);
    assert_eq!(
        the(&r, "module-signer[nvidia-current]").measured.as_deref(),
        Some("unsigned")
    );
    let c = the(&r, "signing-certificate");
    assert_eq!(c.status, Status::Fail);
    assert!(
        c.detail
            .as_deref()
            .unwrap_or_default()
            .contains("does not exist"),
        "{c:?}"
    );
}

#[test]
fn a_host_whose_module_was_loaded_from_elsewhere_warns_that_the_file_checks_cannot_apply() {
    // A GPU machine that is not a gpuimg node: the right driver loaded, no dkms files.
    let node = Node {
        no_module_files: true,
        loaded: Some((DRIVER.into(), false)),
        ..Node::default()
    };
    let (_dir, r) = report(&node, None, &node_tree::expectation(None, KEY_NAME));
    assert_eq!(r.verdict, Verdict::Pass, "{}", r.to_text());
    for m in node_tree::MODULES {
        let c = the(&r, &format!("module-vermagic[{m}]"));
        assert_eq!(c.status, Status::Warn);
        let d = c.detail.as_deref().unwrap_or_default();
        assert!(
            d.contains("does not exist") && d.contains("loaded from elsewhere"),
            "{d}"
        );
    }
}

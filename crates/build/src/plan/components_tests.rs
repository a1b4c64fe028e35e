//! Tests of the component table, the rules for unlisted packages and `layers:` overrides.

use super::*;

fn meta(name: &str, essential: bool, priority: Option<&str>, section: Option<&str>) -> PackageMeta {
    PackageMeta {
        name: name.to_string(),
        essential,
        priority: priority.map(str::to_string),
        section: section.map(str::to_string),
        maintainer: None,
    }
}

fn overrides(v: &[(&str, &[&str])]) -> LayerOverrides {
    LayerOverrides::new(
        v.iter()
            .map(|(n, d)| (n.to_string(), d.iter().map(|s| s.to_string()).collect()))
            .collect(),
    )
}

#[test]
fn embedded_table_is_valid_and_ordered() {
    let t = Table::parse(TABLE_FILE, TABLE_TEXT).unwrap();
    assert_eq!(
        t.order,
        [
            "os",
            "python",
            "cuda-runtime",
            "cuda-math",
            "cudnn",
            "nccl",
            "framework",
            "kernel",
            "nvidia-driver",
            "packages"
        ]
    );
    assert_eq!(table_order(), t.order.as_slice());
    assert!(t.exact.len() > 40, "{}", t.exact.len());
}

#[test]
fn table_entries_and_rules() {
    let cases = [
        // Exact names and globs in the table.
        (meta("libc6", false, Some("optional"), Some("libs")), "os"),
        (meta("base-files", false, None, None), "os"),
        (meta("gcc-12-base", false, None, None), "os"),
        (meta("libssl3t64", false, None, None), "os"),
        (meta("ca-certificates", false, None, Some("misc")), "os"),
        (meta("python3.11", false, None, None), "python"),
        (meta("python3.11-minimal", false, None, None), "python"),
        (meta("libpython3.12-stdlib", false, None, None), "python"),
        (meta("libmpdec3", false, None, Some("libs")), "python"),
        (meta("cuda-cudart-12-4", false, None, None), "cuda-runtime"),
        (meta("libcublas-12-4", false, None, None), "cuda-math"),
        (meta("libcudnn9-cuda-12", false, None, None), "cudnn"),
        (meta("libnccl2", false, None, None), "nccl"),
        // The table wins over the rules.
        (meta("media-types", false, None, Some("net")), "os"),
        // Rules for unlisted packages.
        (meta("libfoo1", true, None, None), "os"),
        (meta("libfoo1", false, Some("required"), None), "os"),
        (meta("libfoo1", false, Some(" Required "), None), "os"),
        (meta("libfoo1", false, Some("important"), None), "packages"),
        (meta("ruby3.1", false, None, Some("interpreters")), "python"),
        (
            meta("pyyaml-thing", false, None, Some("universe/python")),
            "python",
        ),
        (
            meta("python3-numpy", false, Some("optional"), Some("python")),
            "python",
        ),
        (meta("python3-whatever", false, None, None), "python"),
        (
            meta("libpython3-dev", false, None, Some("libdevel")),
            "python",
        ),
        // Essential beats the python rule.
        (
            meta("python3-essentialised", true, None, Some("python")),
            "os",
        ),
        (
            meta("xz-utils", false, Some("optional"), Some("utils")),
            "packages",
        ),
        (meta("python", false, None, Some("oldlibs")), "packages"),
        (meta("curl", false, None, None), "packages"),
    ];
    for (m, want) in cases {
        assert_eq!(component_of(&m), want, "{m:?}");
    }
}

#[test]
fn a_package_lands_in_the_same_component_whatever_else_is_pulled() {
    let all = [
        meta("libc6", false, None, None),
        meta("python3.11", false, None, Some("python")),
        meta("xz-utils", false, None, Some("utils")),
        meta("bash", true, Some("required"), Some("shells")),
        meta("libnccl2", false, None, None),
        meta("libfoo", false, Some("required"), None),
    ];
    let full = assign(&all, &LayerOverrides::default());
    // Every subset (by bit mask) gives each member the same component as the full set.
    for mask in 0u32..(1 << all.len()) {
        let subset: Vec<PackageMeta> = all
            .iter()
            .enumerate()
            .filter(|(i, _)| mask & (1 << i) != 0)
            .map(|(_, m)| m.clone())
            .collect();
        let a = assign(&subset, &LayerOverrides::default());
        for m in &subset {
            assert_eq!(a.component(&m.name), full.component(&m.name), "{mask:b}");
        }
        assert_eq!(a.order(), full.order());
    }
    assert_eq!(full.packages("os"), ["bash", "libc6", "libfoo"]);
    assert_eq!(full.packages("python"), ["python3.11"]);
    assert_eq!(full.packages("packages"), ["xz-utils"]);
    assert!(full.packages("cudnn").is_empty());
    assert_eq!(full.component("nope"), None);
}

#[test]
fn overrides_win_and_new_names_come_after_packages_in_profile_order() {
    let pkgs = [
        meta("libc6", false, None, None),
        meta("xz-utils", false, None, None),
        meta("zstd", false, None, None),
        meta("curl", false, None, None),
        meta("libfoo1", false, None, None),
    ];
    let o = overrides(&[
        ("tools", &["zstd", "xz-utils"]),
        ("os", &["libfoo1"]),
        ("net", &["curl", "wget"]),
    ]);
    let a = assign(&pkgs, &o);
    let order: Vec<&str> = a.order().iter().map(String::as_str).collect();
    assert_eq!(
        order,
        [
            "os",
            "python",
            "cuda-runtime",
            "cuda-math",
            "cudnn",
            "nccl",
            "framework",
            "kernel",
            "nvidia-driver",
            "packages",
            "tools",
            "net"
        ]
    );
    assert_eq!(a.component("xz-utils"), Some("tools"));
    assert_eq!(a.component("zstd"), Some("tools"));
    assert_eq!(a.component("libfoo1"), Some("os"));
    assert_eq!(a.component("curl"), Some("net"));
    assert_eq!(a.component("libc6"), Some("os"));
    assert_eq!(a.unused_overrides(), ["wget"]);
    let listed: Vec<(&str, &str)> = a.iter().collect();
    assert_eq!(listed[0], ("curl", "net"));
    assert_eq!(listed.len(), 5);
    // An override can also move a package back to `packages`.
    let a = assign(&pkgs, &overrides(&[("packages", &["libc6"])]));
    assert_eq!(a.component("libc6"), Some("packages"));
    assert_eq!(a.order().len(), 10);
}

#[test]
fn overrides_from_a_profile() {
    let p = crate::profile::parse(
        "name: x\nbase:\n  apt: {suite: bookworm, packages: [xz-utils]}\nlayers:\n  tools: {deb: [xz-utils]}\n",
        "p.yaml",
        std::path::Path::new("/nonexistent"),
        &|_| None,
    )
    .unwrap();
    let o = LayerOverrides::from_profile(&p.layers);
    assert_eq!(o, overrides(&[("tools", &["xz-utils"])]));
    assert!(!o.is_empty());
    let a = assign(&[PackageMeta::named("xz-utils")], &o);
    assert_eq!(a.component("xz-utils"), Some("tools"));
    assert_eq!(a.order().last().map(String::as_str), Some("tools"));
}

#[test]
fn bad_tables_are_refused() {
    let cases = [
        (
            "components:\n  - {name: os, packages: [a]}\n  - {name: python, packages: [a]}\n  - {name: packages}\n",
            "package `a` is listed twice (in `os` and `python`)",
        ),
        (
            "components:\n  - {name: os}\n  - {name: packages}\n  - {name: python}\n",
            "`packages` must be the last component",
        ),
        (
            "components:\n  - {name: os}\n  - {name: packages}\n",
            "component `python` is missing",
        ),
        (
            "components:\n  - {name: Os}\n",
            "`Os` is not a component name (`[a-z0-9-]+`)",
        ),
        (
            "components:\n  - {name: os}\n  - {name: os}\n",
            "component `os` is listed twice",
        ),
        (
            "components:\n  - {name: os, packages: [\"a b\"]}\n",
            "component `os`: `a b` is not a package name or glob",
        ),
    ];
    for (text, want) in cases {
        let e = Table::parse("t.yaml", text).unwrap_err().to_string();
        assert_eq!(e, format!("`t.yaml`: {want}"), "{text}");
    }
    let e = Table::parse("t.yaml", "components: 3\n").unwrap_err();
    assert!(e.to_string().starts_with("Failed to parse `t.yaml`"), "{e}");
}

#[test]
fn globs() {
    for (g, n, want) in [
        ("python3.*", "python3.11", true),
        ("python3.*", "python3.", true),
        ("python3.*", "python3", false),
        ("python3.*", "python3-minimal", false),
        ("libpython3*", "libpython3.11-stdlib", true),
        ("gcc-*-base", "gcc-12-base", true),
        ("gcc-*-base", "gcc-12-base-x", false),
        ("gcc-*-base", "gcc--base", true),
        ("a*b*c", "axxbyybzc", true),
        ("a*b*c", "axxbyy", false),
        ("lib?", "libc", true),
        ("lib?", "lib", false),
        ("*", "", true),
        ("", "", true),
        ("", "a", false),
        ("exact", "exact", true),
        ("exact", "exactly", false),
    ] {
        assert_eq!(glob_match(g, n), want, "{g} {n}");
    }
}

#[test]
fn component_names() {
    assert!(is_component_name("cuda-runtime"));
    assert!(is_component_name("a1"));
    for bad in ["", "A", "a_b", "a.b", "a b", "é"] {
        assert!(!is_component_name(bad), "{bad}");
    }
}

//! Each refusal made from the real kernel's bytes: a `Module.symvers` with one CRC changed, the
//! vermagic of another kernel, a module whose exporter is left out of the set, a module's
//! licence or namespace import changed in its `.modinfo`, a module without its version table.

use gpuimg_kmod::{check, CheckError, Kernel, Module, Refusal, Symvers};

use crate::kernel::{fixture, Fixture};

fn refusals(e: CheckError) -> Vec<Refusal> {
    match e {
        CheckError::Refused { refusals, .. } => refusals,
    }
}

/// The kernel without its modules' exports: `vmlinux` alone.
fn vmlinux_only(f: &Fixture) -> Symvers {
    let mut s = f.symvers.clone();
    s.retain(|e| e.module == "vmlinux");
    s
}

/// `bytes` with every `from` replaced by `to` (same length), at least once.
fn patched(bytes: &[u8], from: &[u8], to: &[u8]) -> Vec<u8> {
    assert_eq!(from.len(), to.len());
    let mut out = bytes.to_vec();
    let mut n = 0;
    let mut i = 0;
    while i + from.len() <= out.len() {
        if &out[i..i + from.len()] == from {
            out[i..i + from.len()].copy_from_slice(to);
            n += 1;
            i += from.len();
        } else {
            i += 1;
        }
    }
    assert!(n > 0, "{:?} not found", String::from_utf8_lossy(from));
    out
}

#[test]
fn one_crc_changed_in_module_symvers_refuses_the_modules_that_use_it_naming_both_crcs() {
    let f = fixture();
    // The symbol of vmlinux that most modules were built against.
    let mut uses = std::collections::BTreeMap::<&str, usize>::new();
    for m in &f.modules {
        for s in m.versions.iter().flatten().map(|(s, _)| s.as_str()) {
            if f.symvers
                .get(s)
                .is_some_and(|e| e.module == "vmlinux" && e.crc.is_some())
            {
                *uses.entry(s).or_default() += 1;
            }
        }
    }
    let (&symbol, &users) = uses.iter().max_by_key(|(_, n)| **n).unwrap();
    assert!(users > 100, "{symbol} is used by {users} modules");
    let theirs = f.symvers.get(symbol).unwrap().crc.unwrap();
    let changed = theirs ^ 0x0102_0304;
    let text = String::from_utf8(f.symvers_text.clone()).unwrap();
    let text: String = text
        .lines()
        .map(|l| match l.split_once('\t') {
            Some((_, rest)) if rest.split('\t').next() == Some(symbol) => {
                format!("0x{changed:08x}\t{rest}\n")
            }
            _ => format!("{l}\n"),
        })
        .collect();
    let symvers = Symvers::parse(text.as_bytes()).unwrap();
    let kernel = Kernel {
        symvers: &symvers,
        ..f.kernel()
    };
    let e = check(&f.modules, &kernel).unwrap_err();
    let message = e.to_string();
    let all = refusals(e);
    assert_eq!(
        all.len(),
        users,
        "one refusal per module that uses it: {message}"
    );
    for r in &all {
        let Refusal::Crc {
            symbol: s,
            module_crc,
            exporter_crc,
            exporter,
            ..
        } = r
        else {
            panic!("{r}");
        };
        assert_eq!(
            (s.as_str(), *module_crc, *exporter_crc, exporter.as_str()),
            (symbol, theirs, changed, "vmlinux")
        );
    }
    // The message names the module, the symbol and both CRCs.
    let Refusal::Crc { module, .. } = &all[0] else {
        unreachable!()
    };
    for part in [
        module.clone(),
        format!("`{symbol}`"),
        format!("0x{theirs:08x}"),
        format!("0x{changed:08x}"),
        f.abi.clone(),
    ] {
        assert!(message.contains(&part), "{part} not in: {message}");
    }
}

#[test]
fn the_vermagic_of_another_kernel_is_refused() {
    let f = fixture();
    let m = &f.modules[..3];
    let other = "6.1.0-0-other-amd64";
    let kernel = Kernel {
        release: other,
        vermagic: None,
        ..f.kernel()
    };
    let all = refusals(check(m, &kernel).unwrap_err());
    assert_eq!(all.len(), 3);
    for (r, module) in all.iter().zip(m) {
        assert_eq!(
            r,
            &Refusal::Vermagic {
                module: module.name.clone(),
                found: f.vermagic().trim_end().to_string(),
                expected: other.to_string(),
            }
        );
    }
    // The right release with another build's flags (no `modversions`) is another kernel too.
    let flags: Vec<&str> = f
        .vermagic()
        .split_whitespace()
        .filter(|w| *w != "modversions")
        .collect();
    let without = flags.join(" ");
    let kernel = Kernel {
        vermagic: Some(&without),
        ..f.kernel()
    };
    let e = check(m, &kernel).unwrap_err().to_string();
    assert!(
        e.contains(&without) && e.contains(f.vermagic().trim_end()),
        "{e}"
    );
    // The whole vermagic compares word by word: its trailing space is no difference.
    let trimmed = f.vermagic().trim_end();
    check(
        m,
        &Kernel {
            vermagic: Some(trimmed),
            ..f.kernel()
        },
    )
    .unwrap();
}

#[test]
fn a_module_needing_another_modules_export_passes_only_with_that_module_in_the_set() {
    let f = fixture();
    let symvers = vmlinux_only(f);
    let kernel = Kernel {
        symvers: &symvers,
        ..f.kernel()
    };
    // The smallest module that depends on exactly one module, which depends on none.
    let (a, b) = f
        .modules
        .iter()
        .zip(&f.files)
        .filter_map(|(a, (_, bytes))| {
            let [b] = &a.modinfo.depends()[..] else {
                return None;
            };
            let b = f.modules.iter().find(|m| &m.name == b)?;
            b.modinfo
                .depends()
                .is_empty()
                .then_some((bytes.len(), a, b))
        })
        .min_by_key(|(len, ..)| *len)
        .map(|(_, a, b)| (a, b))
        .expect("a module depending on one other");
    let facts = check(&[a.clone(), b.clone()], &kernel).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(facts[0].depends, std::slice::from_ref(&b.name));
    // Alone, each symbol it takes from that module is unresolved, and its dependency missing.
    let e = check(std::slice::from_ref(a), &kernel).unwrap_err();
    let all = refusals(e);
    let from_b: Vec<&str> = a
        .undefined
        .iter()
        .filter(|u| b.exports.iter().any(|x| x.symbol == u.symbol))
        .map(|u| u.symbol.as_str())
        .collect();
    assert!(!from_b.is_empty());
    let mut expected = vec![Refusal::Depends {
        module: a.name.clone(),
        needs: b.name.clone(),
    }];
    expected.extend(from_b.iter().map(|s| Refusal::Unresolved {
        module: a.name.clone(),
        symbol: s.to_string(),
    }));
    assert_eq!(all, expected);
    // With the whole kernel's Module.symvers the kernel's copy of that module serves.
    check(std::slice::from_ref(a), &f.kernel()).unwrap();
}

#[test]
fn a_non_gpl_module_using_gpl_only_exports_is_refused() {
    let f = fixture();
    let m = f
        .modules
        .iter()
        .find(|m| {
            m.modinfo.get("license") == Some("GPL")
                && m.undefined.iter().any(|u| {
                    f.symvers
                        .get(&u.symbol)
                        .is_some_and(|e| e.gpl_only && e.module == "vmlinux")
                })
        })
        .unwrap();
    let bytes = patched(f.bytes(&m.name), b"license=GPL\0", b"license=Pro\0");
    let changed = Module::read(&m.file, &bytes).unwrap();
    let all = refusals(check(&[changed], &f.kernel()).unwrap_err());
    let gpl_only: Vec<&str> = m
        .undefined
        .iter()
        .filter(|u| f.symvers.get(&u.symbol).is_some_and(|e| e.gpl_only))
        .map(|u| u.symbol.as_str())
        .collect();
    assert_eq!(all.len(), gpl_only.len());
    for (r, s) in all.iter().zip(gpl_only) {
        let Refusal::GplOnly {
            symbol, license, ..
        } = r
        else {
            panic!("{r}");
        };
        assert_eq!((symbol.as_str(), license.as_str()), (s, "Pro"));
    }
}

#[test]
fn a_module_using_a_namespace_it_does_not_import_is_refused() {
    let f = fixture();
    let m = f
        .modules
        .iter()
        .find(|m| m.modinfo.get("import_ns").is_some())
        .expect("a module importing a namespace");
    let bytes = patched(f.bytes(&m.name), b"\0import_ns=", b"\0import_nx=");
    let changed = Module::read(&m.file, &bytes).unwrap();
    let all = refusals(check(&[changed], &f.kernel()).unwrap_err());
    assert!(!all.is_empty());
    for r in &all {
        let Refusal::Namespace {
            symbol, namespace, ..
        } = r
        else {
            panic!("{r}");
        };
        assert!(m.modinfo.all("import_ns").any(|n| n == namespace), "{r}");
        assert_eq!(
            f.symvers.get(symbol).unwrap().namespace.as_ref(),
            Some(namespace)
        );
    }
}

#[test]
fn a_module_built_without_symbol_crcs_is_refused_by_a_kernel_with_them() {
    let f = fixture();
    let m = &f.modules[0];
    assert!(m.versions.is_some());
    let bytes = patched(f.bytes(&m.name), b"\0__versions\0", b"\0__versionz\0");
    let changed = Module::read(&m.file, &bytes).unwrap();
    assert_eq!(changed.versions, None);
    let all = refusals(check(&[changed], &f.kernel()).unwrap_err());
    assert_eq!(
        all,
        [Refusal::NoVersions {
            module: m.name.clone()
        }]
    );
}

#[test]
fn two_modules_of_one_name_or_one_export_are_refused() {
    let f = fixture();
    let exporter = f.modules.iter().find(|m| !m.exports.is_empty()).unwrap();
    let all = refusals(check(&[exporter.clone(), exporter.clone()], &f.kernel()).unwrap_err());
    assert!(all.contains(&Refusal::DuplicateModule {
        module: exporter.name.clone()
    }));
    let symbol = &exporter.exports[0].symbol;
    assert!(all.contains(&Refusal::DuplicateExport {
        module: exporter.name.clone(),
        symbol: symbol.clone(),
        other: format!("module {} of the set", exporter.name),
    }));
}

#[test]
fn a_gpl_module_may_not_mix_gpl_only_exports_with_a_proprietary_modules_symbols() {
    let f = fixture();
    let symvers = vmlinux_only(f);
    let kernel = Kernel {
        symvers: &symvers,
        ..f.kernel()
    };
    let is_gpl_only = |s: &str| symvers.get(s).is_some_and(|e| e.gpl_only);
    // A module using GPL-only exports of vmlinux and depending on exactly one module (under a
    // `GPL…` licence, depending on none) in an order that refuses it once that module is
    // proprietary: a GPL-only symbol before the first of that module's, or one after it.
    let (a, b, first_gpl, first_b) = f
        .modules
        .iter()
        .filter_map(|a| {
            let [b] = &a.modinfo.depends()[..] else {
                return None;
            };
            let b = f.modules.iter().find(|m| &m.name == b)?;
            if !b.modinfo.depends().is_empty()
                || !b
                    .modinfo
                    .get("license")
                    .is_some_and(|l| l.starts_with("GPL"))
            {
                return None;
            }
            let first_gpl = a.undefined.iter().position(|u| is_gpl_only(&u.symbol))?;
            let first_b = a
                .undefined
                .iter()
                .position(|u| b.exports.iter().any(|x| x.symbol == u.symbol))?;
            let gpl_after = a.undefined[first_b..]
                .iter()
                .any(|u| is_gpl_only(&u.symbol));
            (first_gpl < first_b || gpl_after).then_some((a, b, first_gpl, first_b))
        })
        .next()
        .expect("a GPL module using GPL-only exports and one other module");
    check(&[a.clone(), b.clone()], &kernel).unwrap_or_else(|e| panic!("{e}"));
    let proprietary = patched(f.bytes(&b.name), b"license=GPL", b"license=Pro");
    let proprietary = Module::read(&b.file, &proprietary).unwrap();
    let all = refusals(check(&[a.clone(), proprietary], &kernel).unwrap_err());
    let of_a: Vec<&Refusal> = all
        .iter()
        .filter(|r| r.to_string().starts_with(&format!("{}: ", a.name)))
        .collect();
    let owner = format!("module {} of the set", b.name);
    // What the loader refuses first follows the order it resolves the symbols in.
    let expected = if first_gpl < first_b {
        Refusal::ProprietaryOwner {
            module: a.name.clone(),
            symbol: a.undefined[first_b].symbol.clone(),
            owner,
        }
    } else {
        let after = a.undefined[first_b..]
            .iter()
            .find(|u| is_gpl_only(&u.symbol))
            .unwrap();
        Refusal::GplOnly {
            module: a.name.clone(),
            symbol: after.symbol.clone(),
            license: format!(
                "{}, proprietary since it used {owner}",
                a.modinfo.get("license").unwrap()
            ),
            exporter: "vmlinux".into(),
        }
    };
    assert_eq!(of_a.first(), Some(&&expected), "{all:?}");
    eprintln!("{expected}");
}

//! `strip: [device-code]` and `gpuimg device-code` on real device code, listed before and
//! after by NVIDIA's own `cuobjdump` (the `nvidia-cuda-cuobjdump` wheel), never by gpuimg's
//! reader:
//! - a fixture made with NVIDIA's `ptxas` and `fatbinary` (the `nvidia-cuda-nvcc` wheel) holding
//!   plain, arch-specific (`a`) and family (`f`) cubins and PTX, in two containers of an ELF's
//!   `.nv_fatbin`: pruned for each of several GPUs, exactly the entries the driver's rule
//!   lets that GPU select remain (the rule is written out here, independently); the file size
//!   and every byte outside the section are unchanged; an entry kind gpuimg does not know
//!   leaves the file unmodified;
//! - `libnccl.so.2` from the NCCL wheel, pruned for the H200: only sm_90 remains, as many as
//!   before, size and bytes outside the fatbin sections unchanged;
//! - a build from the real index with NCCL (BSD-3-Clause) and cuRAND (NVIDIA's licence), with
//!   and without `device-code`: every file differs only where the licence table allows it
//!   (libnccl and its RECORD, the metadata), cuRAND's files are byte-identical, the RECORD
//!   row holds the pruned file's hash, and the config's `NVIDIA_REQUIRE_CUDA` says `arch=9.0`.
//!
//! The wheels come through the build host's own pip configuration (as the other index tests).

use crate::common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use common::*;

/// Downloads shared by the tests of this file (kept between runs under the target dir).
fn downloads() -> PathBuf {
    let d = Path::new(env!("CARGO_TARGET_TMPDIR")).join("device-code-wheels");
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// The wheel `spec` (`nvidia-nccl-cu13==2.32.3`) unpacked, through the host's pip.
fn wheel(spec: &str) -> PathBuf {
    let name = spec.split("==").next().unwrap().replace('-', "_");
    let dir = downloads().join(spec.replace("==", "-"));
    if dir.join(".done").exists() {
        return dir;
    }
    let dl = downloads().join("dl");
    let mut pip = Command::new("python3");
    pip.args([
        "-m",
        "pip",
        "download",
        "--no-deps",
        "--only-binary",
        ":all:",
        "-d",
    ])
    .arg(&dl)
    .arg(spec);
    run_ok(&mut pip);
    let whl = std::fs::read_dir(&dl)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            let n = p.file_name().unwrap().to_string_lossy().to_lowercase();
            n.starts_with(&format!("{}-", name.to_lowercase())) && n.ends_with(".whl")
        })
        .max()
        .unwrap_or_else(|| panic!("pip downloaded no wheel for {spec}"));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    run_ok(
        Command::new("unzip")
            .arg("-q")
            .arg(&whl)
            .arg("-d")
            .arg(&dir),
    );
    std::fs::write(dir.join(".done"), b"").unwrap();
    dir
}

/// NVIDIA's tools from their wheels (the same release as each other).
struct Tools {
    ptxas: PathBuf,
    fatbinary: PathBuf,
    cuobjdump: PathBuf,
}

fn tools() -> &'static Tools {
    static T: OnceLock<Tools> = OnceLock::new();
    T.get_or_init(|| {
        require("unzip");
        let nvcc = wheel("nvidia-cuda-nvcc==13.5.37");
        let dump = wheel("nvidia-cuda-cuobjdump==13.5.37");
        let bin = |root: &Path, tool: &str| {
            let p = root.join("nvidia/cu13/bin").join(tool);
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
            p
        };
        Tools {
            ptxas: bin(&nvcc, "ptxas"),
            fatbinary: bin(&nvcc, "fatbinary"),
            cuobjdump: bin(&dump, "cuobjdump"),
        }
    })
}

/// `cuobjdump --list-elf --list-ptx`: one `(kind, target)` per entry, as it names them
/// (`elf sm_90a`, `ptx sm_80`; it prints a family cubin without its `f`).
fn listing(file: &Path) -> Vec<(String, String)> {
    let out = run(Command::new(&tools().cuobjdump)
        .args(["--list-elf", "--list-ptx"])
        .arg(file));
    let text = String::from_utf8_lossy(&out.stdout);
    let mut v: Vec<(String, String)> = text
        .lines()
        .filter_map(|l| {
            let kind = if l.starts_with("ELF file") {
                "elf"
            } else if l.starts_with("PTX file") {
                "ptx"
            } else {
                return None;
            };
            let name = l.rsplit(' ').next()?;
            let target = name.split('.').find(|p| p.starts_with("sm_"))?;
            Some((kind.to_string(), target.to_string()))
        })
        .collect();
    v.sort();
    v
}

fn counts(v: &[(String, String)]) -> BTreeMap<(String, String), usize> {
    let mut m = BTreeMap::new();
    for x in v {
        *m.entry(x.clone()).or_insert(0) += 1;
    }
    m
}

/// The (offset, size) of `file`'s sections named `names`, from binutils' readelf.
fn sections(file: &Path, names: &[&str]) -> Vec<(u64, u64)> {
    let out = run_ok(Command::new("readelf").args(["-SW"]).arg(file));
    let mut v = Vec::new();
    for l in out.lines() {
        let Some(rest) = l.split(']').nth(1) else {
            continue;
        };
        let f: Vec<&str> = rest.split_whitespace().collect();
        if f.len() > 5 && names.contains(&f[0]) {
            let hex = |s: &str| u64::from_str_radix(s, 16).unwrap();
            v.push((hex(f[3]), hex(f[4])));
        }
    }
    v
}

/// The bytes of `a` and `b` are the same outside `ranges`, and so are their sizes.
fn same_outside(a: &Path, b: &Path, ranges: &[(u64, u64)]) {
    let (x, y) = (std::fs::read(a).unwrap(), std::fs::read(b).unwrap());
    assert_eq!(x.len(), y.len(), "the file size changed");
    let mut pos = 0usize;
    let mut ranges = ranges.to_vec();
    ranges.sort();
    for (off, size) in ranges.iter().chain(std::iter::once(&(x.len() as u64, 0))) {
        let off = *off as usize;
        assert!(
            x[pos..off] == y[pos..off],
            "bytes {pos:#x}..{off:#x} outside the fatbin sections changed"
        );
        pos = off + *size as usize;
    }
}

fn gpuimg(sb: &Sandbox) -> Command {
    with_host_index(sb.gpuimg())
}

/// A kernel in PTX, for `ptxas` to compile for each target.
const PTX: &str = ".version 8.0\n.target sm_75\n.address_size 64\n\
.visible .entry add1(.param .u64 p)\n{\n  .reg .b64 %rd<3>;\n  .reg .b32 %r<3>;\n\
  ld.param.u64 %rd1, [p];\n  cvta.to.global.u64 %rd2, %rd1;\n  ld.global.u32 %r1, [%rd2];\n\
  add.s32 %r2, %r1, 1;\n  st.global.u32 [%rd2], %r2;\n  ret;\n}\n";

/// Cubins and PTX (kind, target as fatbinary spells it) in the fixture's first container,
/// and in its second.
const FIRST: &[(&str, &str)] = &[
    ("elf", "80"),
    ("elf", "86"),
    ("elf", "90"),
    ("elf", "90a"),
    ("elf", "100"),
    ("elf", "100a"),
    ("elf", "100f"),
    ("elf", "120"),
    ("ptx", "80"),
    ("ptx", "90a"),
    ("ptx", "120"),
];
const SECOND: &[(&str, &str)] = &[("elf", "75"), ("elf", "90"), ("ptx", "75")];

/// The driver's choice, written out for the test: can a GPU of `cc` (major, minor) select an
/// entry of `kind` for `target` (`90`, `90a`, `100f`)?
fn selectable(kind: &str, target: &str, cc: (u32, u32)) -> bool {
    let (digits, suffix) = match target.strip_suffix('a') {
        Some(d) => (d, "a"),
        None => match target.strip_suffix('f') {
            Some(d) => (d, "f"),
            None => (target, ""),
        },
    };
    let n: u32 = digits.parse().unwrap();
    let (major, minor) = (n / 10, n % 10);
    match (kind, suffix) {
        (_, "a") => cc == (major, minor),
        (_, "f") => cc.0 == major && cc.1 >= minor,
        ("elf", _) => cc.0 == major && cc.1 >= minor,
        _ => cc >= (major, minor),
    }
}

/// A shared object whose `.nv_fatbin` holds two containers made by `fatbinary` from
/// `ptxas` cubins and hand-written PTX.
fn fixture(dir: &Path) -> PathBuf {
    let t = tools();
    write(&dir.join("k.ptx"), PTX);
    let mut fatbins = Vec::new();
    for (i, entries) in [FIRST, SECOND].iter().enumerate() {
        let mut fb = Command::new(&t.fatbinary);
        fb.arg(format!(
            "--create={}",
            dir.join(format!("c{i}.fatbin")).display()
        ))
        .arg("-64");
        for (kind, target) in *entries {
            let src = if *kind == "elf" {
                let out = dir.join(format!("k{i}_{target}.cubin"));
                run_ok(
                    Command::new(&t.ptxas)
                        .args(["-arch", &format!("sm_{target}")])
                        .arg(dir.join("k.ptx"))
                        .arg("-o")
                        .arg(&out),
                );
                out
            } else {
                let out = dir.join(format!("k{i}_{target}.ptx"));
                write(&out, &PTX.replace("sm_75", &format!("sm_{target}")));
                out
            };
            fb.arg(format!(
                "--image3=kind={kind},sm={target},file={}",
                src.display()
            ));
        }
        run_ok(&mut fb);
        fatbins.push(std::fs::read(dir.join(format!("c{i}.fatbin"))).unwrap());
    }
    let mut section = fatbins[0].clone();
    while !section.len().is_multiple_of(8) {
        section.push(0);
    }
    section.extend_from_slice(&fatbins[1]);
    std::fs::write(dir.join("section.bin"), &section).unwrap();
    write(&dir.join("lib.c"), "int answer(void) { return 42; }\n");
    let plain = dir.join("libplain.so");
    run_ok(
        Command::new("gcc")
            .args(["-shared", "-fPIC", "-o"])
            .arg(&plain)
            .arg(dir.join("lib.c")),
    );
    let so = dir.join("libfixture.so");
    run_ok(
        Command::new("objcopy")
            .arg(format!(
                "--add-section=.nv_fatbin={}",
                dir.join("section.bin").display()
            ))
            .arg("--set-section-flags=.nv_fatbin=alloc,readonly")
            .arg("--set-section-alignment=.nv_fatbin=8")
            .arg(&plain)
            .arg(&so),
    );
    so
}

fn prune(sb: &Sandbox, ccs: &[&str], src: &Path, dst: &Path) -> String {
    let mut c = sb.gpuimg();
    c.args(["device-code", "prune"]);
    for cc in ccs {
        c.args(["--for", cc]);
    }
    let out = run(c.arg(src).arg(dst));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn pruning_keeps_exactly_what_each_gpu_can_select_and_nothing_else_moves() {
    require("gcc");
    require("objcopy");
    require("readelf");
    let sb = Sandbox::new();
    let so = fixture(sb.path());
    let all = listing(&so);
    assert_eq!(all.len(), FIRST.len() + SECOND.len(), "{all:?}");
    let fatbin = sections(&so, &[".nv_fatbin"]);
    assert_eq!(fatbin.len(), 1);
    for (ccs, name) in [
        (vec![(9, 0)], "9.0"),
        (vec![(8, 0)], "8.0"),
        (vec![(8, 6)], "8.6"),
        (vec![(10, 3)], "10.3"),
        (vec![(12, 0)], "12.0"),
        (vec![(9, 0), (10, 0)], "9.0+10.0"),
    ] {
        let out = sb.path().join(format!("pruned-{name}.so"));
        let args: Vec<String> = ccs.iter().map(|(a, b)| format!("{a}.{b}")).collect();
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        prune(&sb, &args, &so, &out);
        let mut want: Vec<(String, String)> = FIRST
            .iter()
            .chain(SECOND)
            .filter(|(k, t)| ccs.iter().any(|cc| selectable(k, t, *cc)))
            // cuobjdump names a family cubin without its `f`.
            .map(|(k, t)| (k.to_string(), format!("sm_{}", t.trim_end_matches('f'))))
            .collect();
        want.sort();
        assert_eq!(listing(&out), want, "pruned for {name}");
        same_outside(&so, &out, &fatbin);
    }
    // An entry kind gpuimg does not know: the file is copied as it is, with a warning.
    let mut bytes = std::fs::read(&so).unwrap();
    let (off, _) = fatbin[0];
    // The first entry's kind (after the 16-byte container header).
    bytes[off as usize + 16] = 0x40;
    let odd = sb.path().join("libodd.so");
    std::fs::write(&odd, &bytes).unwrap();
    let out = sb.path().join("odd-pruned.so");
    let msg = prune(&sb, &["9.0"], &odd, &out);
    assert!(
        msg.contains("not understood") && msg.contains("copied unchanged"),
        "{msg}"
    );
    assert_eq!(std::fs::read(&out).unwrap(), bytes, "left unmodified");
    let list = run(sb.gpuimg().args(["device-code", "list"]).arg(&odd));
    assert_eq!(list.status.code(), Some(1), "{list:?}");
    assert!(String::from_utf8_lossy(&list.stderr).contains("entry kind 64"));
}

#[test]
fn libnccl_from_its_wheel_pruned_for_the_h200_keeps_only_sm_90() {
    require("readelf");
    let sb = Sandbox::new();
    let nccl = wheel("nvidia-nccl-cu13==2.32.3").join("nvidia/nccl/lib/libnccl.so.2");
    let before = counts(&listing(&nccl));
    let out = sb.path().join("libnccl.so.2");
    prune(&sb, &["9.0"], &nccl, &out);
    let after = counts(&listing(&out));
    let sm90 = ("elf".to_string(), "sm_90".to_string());
    assert!(before.len() > 3 && before[&sm90] > 0, "{before:?}");
    assert_eq!(
        after,
        BTreeMap::from([(sm90.clone(), before[&sm90])]),
        "only sm_90 cubins, all of them"
    );
    same_outside(
        &nccl,
        &out,
        &sections(&nccl, &[".nv_fatbin", "__nv_relfatbin"]),
    );
    // gpuimg's own listing of the pruned file agrees.
    let json = run_ok(
        sb.gpuimg()
            .args(["device-code", "list", "--json"])
            .arg(&out),
    );
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    let targets: BTreeSet<String> = v["containers"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|c| c["entries"].as_array().unwrap().iter())
        .map(|e| e["target"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(targets, BTreeSet::from(["sm_90".to_string()]));
}

const PROFILE: &str = "name: nccl-h200
base:
  apt:
    mirror: host
    suite: bookworm
    packages: [base-files, base-passwd, libc6, libstdc++6, python3]
host:
  gpus: [H200]
  driver: \">=580\"
stack:
  cuda: \"13.0\"
compat: minor
python:
  packages: [\"nvidia-nccl-cu13==2.32.3\", \"nvidia-curand==10.4.0.35\"]
strip: [docs, man, locales, device-code]
selftest:
  enabled: false
";

/// Every regular file of the image in OCI layout `dir` (umoci unpack): path → bytes' sha256.
fn files(sb: &Sandbox, dir: &Path, name: &str) -> (PathBuf, BTreeMap<String, String>) {
    let bundle = sb.path().join(format!("bundle-{name}"));
    run_ok(
        Command::new("umoci")
            .args(["unpack", "--rootless", "--image"])
            .arg(format!("{}:latest", dir.display()))
            .arg(&bundle),
    );
    let root = bundle.join("rootfs");
    let out = run_ok(Command::new("find").arg(&root).args([
        "-type",
        "f",
        "-exec",
        "sha256sum",
        "{}",
        "+",
    ]));
    let prefix = format!("{}/", root.display());
    let m = out
        .lines()
        .map(|l| {
            let (h, p) = l.split_once("  ").unwrap();
            (p.strip_prefix(&prefix).unwrap().to_string(), h.to_string())
        })
        .collect();
    (root, m)
}

/// A `RECORD` row names the file's sha256 `hex` (as the wheel format writes it: urlsafe
/// base64 without padding).
fn assert_row_hash(row: &str, hex: &str) {
    let b64 = run_ok(Command::new("python3").args([
        "-c",
        &format!(
            "import base64;print(base64.urlsafe_b64encode(bytes.fromhex('{hex}')).rstrip(b'=').decode())"
        ),
    ]));
    assert!(row.contains(&format!("sha256={}", b64.trim())), "{row}");
}

#[test]
fn a_pruned_build_changes_only_what_the_licences_allow() {
    require("umoci");
    let sb = Sandbox::new();
    let pruned_yaml = sb.path().join("pruned.yaml");
    write(&pruned_yaml, PROFILE);
    let plain_yaml = sb.path().join("plain.yaml");
    write(&plain_yaml, &PROFILE.replace(", device-code]", "]"));
    let (a, b) = (sb.path().join("plain"), sb.path().join("pruned"));
    for (yaml, out) in [(&plain_yaml, &a), (&pruned_yaml, &b)] {
        let o = run(gpuimg(&sb)
            .arg("build")
            .arg(yaml)
            .arg("-o")
            .arg(format!("oci:{}", out.display())));
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    }
    let (_, fa) = files(&sb, &a, "plain");
    let (root, fb) = files(&sb, &b, "pruned");
    assert_eq!(
        fa.keys().collect::<Vec<_>>(),
        fb.keys().collect::<Vec<_>>(),
        "the same files"
    );
    let site = "usr/local/lib/python3.11/dist-packages";
    let nccl = format!("{site}/nvidia/nccl/lib/libnccl.so.2");
    let changed: BTreeSet<&str> = fa
        .iter()
        .filter(|(p, h)| fb[*p] != **h)
        .map(|(p, _)| p.as_str())
        .collect();
    assert!(changed.contains(nccl.as_str()), "{changed:?}");
    for p in &changed {
        assert!(
            *p == nccl
                || p.ends_with(".dist-info/RECORD") && p.contains("nccl")
                || p.starts_with("usr/share/gpuimg/")
                || p.starts_with("etc/gpuimg/"),
            "{p} changed, and its licence does not allow it (or it is not device code)"
        );
    }
    // cuRAND (NVIDIA's licence) carries device code, and every file of it is the same.
    let curand: Vec<&String> = fa.keys().filter(|p| p.contains("libcurand")).collect();
    assert!(!curand.is_empty());
    let lib = root.join(curand[0]);
    assert!(!listing(&lib).is_empty(), "cuRAND holds device code");
    for p in &curand {
        assert_eq!(
            fa[*p], fb[*p],
            "{p} is NVIDIA-licensed and must be unmodified"
        );
    }
    // The RECORD row has the pruned file's hash, and cuobjdump sees only sm_90.
    let record = std::fs::read_dir(root.join(site))
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| {
            let n = p.file_name().unwrap().to_string_lossy();
            n.starts_with("nvidia_nccl") && n.ends_with(".dist-info")
        })
        .unwrap()
        .join("RECORD");
    let row = read(&record)
        .lines()
        .find(|l| l.starts_with("nvidia/nccl/lib/libnccl.so.2,"))
        .unwrap()
        .to_string();
    assert_row_hash(&row, &fb[&nccl]);
    let kinds: BTreeSet<(String, String)> = listing(&root.join(&nccl)).into_iter().collect();
    assert_eq!(kinds, BTreeSet::from([("elf".into(), "sm_90".into())]));
    // The config says which GPU the image is for; the size report names the library.
    let info = run_ok(
        gpuimg(&sb)
            .args(["inspect", "--json"])
            .arg(format!("oci:{}", b.display())),
    );
    assert!(info.contains("arch=9.0"), "{info}");
    assert!(info.contains("io.gpuimg.device-code.pruned-for"), "{info}");
    let sizes = run_ok(
        gpuimg(&sb)
            .args(["inspect", "--sizes"])
            .arg(format!("oci:{}", b.display())),
    );
    assert!(
        sizes.contains("DEVICE CODE") && sizes.contains("libnccl.so.2"),
        "{sizes}"
    );

    // With `debug-symbols` too: NCCL (BSD-3-Clause) loses its DWARF and symbol table, and
    // nothing else changes; what the loader and the device code see of it stays the same.
    let stripped_yaml = sb.path().join("stripped.yaml");
    write(
        &stripped_yaml,
        &PROFILE.replace(", device-code]", ", debug-symbols, device-code]"),
    );
    let c = sb.path().join("stripped");
    let o = run(gpuimg(&sb)
        .arg("build")
        .arg(&stripped_yaml)
        .arg("-o")
        .arg(format!("oci:{}", c.display())));
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let (root_c, fc) = files(&sb, &c, "stripped");
    assert_eq!(fb.keys().collect::<Vec<_>>(), fc.keys().collect::<Vec<_>>());
    for (p, h) in &fb {
        if fc[p] != *h {
            assert!(
                *p == nccl
                    || p.ends_with(".dist-info/RECORD") && p.contains("nccl")
                    || p.starts_with("usr/share/gpuimg/")
                    || p.starts_with("etc/gpuimg/"),
                "{p} changed under debug-symbols"
            );
        }
    }
    let (pruned_lib, stripped_lib) = (root.join(&nccl), root_c.join(&nccl));
    let readelf = |args: &[&str], f: &Path| run_ok(Command::new("readelf").args(args).arg(f));
    let before = readelf(&["-SW"], &pruned_lib);
    let after = readelf(&["-SW"], &stripped_lib);
    assert!(
        before.contains(".symtab"),
        "the NCCL wheel's library has a symbol table"
    );
    assert!(
        !after.contains(".symtab") && !after.contains(".debug_"),
        "{after}"
    );
    assert!(
        std::fs::metadata(&stripped_lib).unwrap().len()
            < std::fs::metadata(&pruned_lib).unwrap().len()
    );
    for args in [&["-lW"][..], &["-dW"][..], &["--dyn-syms", "-W"][..]] {
        assert_eq!(
            readelf(args, &pruned_lib),
            readelf(args, &stripped_lib),
            "{args:?}"
        );
    }
    assert_eq!(
        listing(&pruned_lib),
        listing(&stripped_lib),
        "the device code"
    );
    let record_c = root_c.join(record.strip_prefix(&root).unwrap());
    let row = read(&record_c)
        .lines()
        .find(|l| l.starts_with("nvidia/nccl/lib/libnccl.so.2,"))
        .unwrap()
        .to_string();
    assert_row_hash(&row, &fc[&nccl]);
    let sizes = run_ok(
        gpuimg(&sb)
            .args(["inspect", "--sizes"])
            .arg(format!("oci:{}", c.display())),
    );
    assert!(sizes.contains("debug-symbols"), "{sizes}");
}

/// Issue 33, class 12: `device-code` reads only regular files on a real file system (a FIFO
/// would block, `/dev/zero` never ends, procfs is the host's state), replaces an existing
/// destination only with `--force`, and never copies setuid or setgid bits.
#[test]
fn device_code_refuses_special_sources_existing_destinations_and_setuid_bits() {
    use std::os::unix::fs::PermissionsExt;
    let sb = Sandbox::new();
    let fifo = sb.path().join("fifo.so");
    run_ok(Command::new("mkfifo").arg(&fifo));
    let dst = sb.path().join("out.so");
    for (src, says) in [
        (fifo.as_path(), "is a FIFO"),
        (Path::new("/dev/zero"), "is a character device"),
        (Path::new("/proc/self/environ"), "is on procfs"),
    ] {
        for args in [vec!["list"], vec!["prune", "--for", "9.0"]] {
            let mut c = sb.gpuimg();
            c.arg("device-code").args(&args).arg(src);
            if args[0] == "prune" {
                c.arg(&dst);
            }
            let o = run(&mut c);
            let err = String::from_utf8_lossy(&o.stderr);
            assert_eq!(
                o.status.code(),
                Some(2),
                "{args:?} {}: {err}",
                src.display()
            );
            assert!(err.contains(says), "{args:?} {}: {err}", src.display());
            assert_error(&err, &[sb.path()]);
        }
    }
    assert!(!dst.exists(), "nothing written");
    let leftovers: Vec<_> = std::fs::read_dir(sb.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(".tmp"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");

    // A setuid, setgid source: the copy keeps 0755, not 06755.
    let src = sb.path().join("libsuid.so");
    std::fs::write(&src, b"not an ELF file").unwrap();
    std::fs::set_permissions(&src, std::fs::Permissions::from_mode(0o6755)).unwrap();
    let msg = prune(&sb, &["9.0"], &src, &dst);
    assert!(msg.contains("copied unchanged"), "{msg}");
    let mode = std::fs::metadata(&dst).unwrap().permissions().mode() & 0o7777;
    assert_eq!(mode, 0o755);

    // It exists now: replaced only with `--force`.
    std::fs::write(&dst, b"keep me").unwrap();
    let o = run(sb
        .gpuimg()
        .args(["device-code", "prune", "--for", "9.0"])
        .arg(&src)
        .arg(&dst));
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("exists") && err.contains("--force"), "{err}");
    assert_error(&err, &[sb.path()]);
    assert_eq!(std::fs::read(&dst).unwrap(), b"keep me");
    run_ok(
        sb.gpuimg()
            .args(["device-code", "prune", "--force", "--for", "9.0"])
            .arg(&src)
            .arg(&dst),
    );
    assert_eq!(std::fs::read(&dst).unwrap(), b"not an ELF file");
}

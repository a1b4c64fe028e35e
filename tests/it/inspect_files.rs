//! `gpuimg inspect --files` on real images: one built from a fixture apt repository plus
//! `files:` (every packaged path owned by its package, `/bin` paths found under merged-/usr,
//! `files:` paths in layer `files`, the JSON sorted and complete against `umoci unpack`), one
//! from a root filesystem without a dpkg database (owners `-`; the self-test's layers owned by
//! their component), damaged layer blobs (exit 2, one line, nothing on stdout), and each ELF
//! file's machine (a package's library for another machine in a loader directory refused).

use crate::common;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use common::*;
use serde_json::Value;

static FIXTURE: OnceLock<SignedRepo> = OnceLock::new();

const TOOL: &[u8] = b"#!/bin/sh\necho tool\n";

fn fixture() -> &'static SignedRepo {
    FIXTURE.get_or_init(|| {
        let mut tools = pkg("tools", "1.0").field("Depends", "libfix");
        tools.files = vec![
            ("/usr/bin/tool", TOOL, 0o755),
            ("/bin/legacy", b"legacy\n", 0o4755),
            ("/etc/tools.conf", b"conf=1\n", 0o644),
            ("/usr/share/tools/data", b"data\n", 0o644),
        ];
        tools.symlinks = vec![("/usr/bin/tool-link", "tool")];
        tools.hardlinks = vec![("/usr/bin/tool-hard", "/usr/bin/tool")];
        let mut libfix = pkg("libfix", "1.0");
        libfix.files = vec![
            ("/usr/lib/libfix.so.1", b"\x7fELF-not-really\n", 0o644),
            ("/lib/libfix-old", b"old\n", 0o644),
        ];
        libfix.compression = "zstd";
        signed_repo(&[("stable", vec![&tools, &libfix])])
    })
}

/// Build `profile` (written as `p.yaml` in `dir`) into `dir/out`.
fn build(dir: &Sandbox, profile: &str, compression: &str) -> PathBuf {
    write(&dir.join("p.yaml"), profile);
    let out = dir.join("out");
    run_ok(
        dir.gpuimg()
            .env("REPO", &fixture().url)
            .env("SOURCE_DATE_EPOCH", "0")
            .arg("build")
            .arg(dir.join("p.yaml"))
            .arg("-o")
            .arg(&out)
            .args(["--compression", compression]),
    );
    out
}

/// An image of the fixture's `tools` (and `libfix`), with `files:` adding `/opt/app` and
/// replacing the package's `/etc/tools.conf`.
fn apt_image(dir: &Sandbox) -> PathBuf {
    fixture().keyring_into(dir.path());
    write(&dir.join("app/hello.sh"), "echo hello\n");
    write(&dir.join("tools.conf"), "conf=mine\n");
    build(
        dir,
        "name: owners\nbase:\n  apt:\n    mirror: ${REPO}\n    suite: stable\n    packages: [tools]\n    keyring: repo.gpg\nfiles:\n  - {src: ./app, dst: /opt/app, mode: \"0755\"}\n  - {src: ./tools.conf, dst: /etc/tools.conf}\n",
        "gzip",
    )
}

fn listing(sb: &Sandbox, out: &Path) -> Vec<Value> {
    let json = run_ok(sb.gpuimg().args(["inspect", "--files", "--json"]).arg(out));
    let v: Value = serde_json::from_str(&json)
        .unwrap_or_else(|e| panic!("inspect --files --json printed invalid JSON ({e}): {json}"));
    let obj = v.as_object().expect("one JSON object");
    assert_eq!(obj.keys().collect::<Vec<_>>(), ["files"]);
    obj["files"].as_array().expect("files is an array").clone()
}

fn find<'a>(files: &'a [Value], path: &str) -> &'a Value {
    files
        .iter()
        .find(|f| f["path"] == path)
        .unwrap_or_else(|| panic!("`{path}` not listed"))
}

/// Every path under `root`, absolute in the image.
fn walk(root: &Path, rel: &str, out: &mut BTreeSet<String>) {
    for e in std::fs::read_dir(root.join(rel.trim_start_matches('/'))).unwrap() {
        let e = e.unwrap();
        let p = format!("{rel}/{}", e.file_name().to_str().unwrap());
        out.insert(p.clone());
        if e.file_type().unwrap().is_dir() {
            walk(root, &p, out);
        }
    }
}

#[test]
fn every_packaged_path_is_owned_by_its_package_and_files_by_files() {
    require("umoci");
    let t = Sandbox::new();
    let out = apt_image(&t);
    let files = listing(&t, &out);

    // Sorted by path, no duplicates, every field present.
    let paths: Vec<&str> = files.iter().map(|f| f["path"].as_str().unwrap()).collect();
    assert!(
        paths.windows(2).all(|w| w[0] < w[1]),
        "not sorted: {paths:?}"
    );
    for f in &files {
        for k in ["path", "type", "mode", "size", "layer", "owner"] {
            assert!(f.get(k).is_some(), "`{k}` missing in {f}");
        }
    }

    let owned = |path: &str, owner: &str, kind: &str, mode: &str, size: u64| {
        let f = find(&files, path);
        assert_eq!(f["owner"], owner, "{f}");
        assert_eq!(f["type"], kind, "{f}");
        assert_eq!(f["mode"], mode, "{f}");
        assert_eq!(f["size"], size, "{f}");
        let layer = f["layer"].as_str().unwrap();
        assert!(
            !["files", "selftest", "expect"].contains(&layer),
            "`{path}` in layer `{layer}`"
        );
    };
    owned("/usr/bin/tool", "tools", "file", "0755", TOOL.len() as u64);
    // Packaged as /bin/legacy and /lib/libfix-old; the image keeps them under /usr.
    owned("/usr/bin/legacy", "tools", "file", "4755", 7);
    owned("/usr/lib/libfix-old", "libfix", "file", "0644", 4);
    owned("/usr/lib/libfix.so.1", "libfix", "file", "0644", 16);
    owned("/usr/share/tools/data", "tools", "file", "0644", 5);
    owned("/usr/bin/tool-link", "tools", "symlink", "0777", 0);
    owned(
        "/usr/bin/tool-hard",
        "tools",
        "hardlink",
        "0755",
        TOOL.len() as u64,
    );
    assert_eq!(find(&files, "/usr/bin/tool-link")["link"], "tool");
    assert_eq!(find(&files, "/usr/bin/tool-hard")["link"], "/usr/bin/tool");
    assert_eq!(find(&files, "/bin")["type"], "symlink");
    assert!(!paths.contains(&"/bin/legacy"));
    // Directories are shared: both packages list /usr.
    assert_eq!(find(&files, "/usr")["owner"], "libfix, tools");
    assert_eq!(find(&files, "/usr/share/tools")["owner"], "tools");
    // The database itself belongs to no package.
    assert_eq!(find(&files, "/var/lib/dpkg/status")["owner"], Value::Null);
    assert_eq!(
        find(&files, "/var/lib/dpkg/info/tools.list")["owner"],
        Value::Null
    );

    // `files:` entries: layer `files`, also where they replace a packaged file.
    for p in ["/opt/app/hello.sh", "/etc/tools.conf"] {
        let f = find(&files, p);
        assert_eq!(f["layer"], "files", "{f}");
        assert_eq!(f["owner"], "files", "{f}");
    }
    assert_eq!(find(&files, "/etc/tools.conf")["size"], 10);
    assert_eq!(find(&files, "/opt/app")["mode"], "0755");
    assert_eq!(find(&files, "/opt/app")["type"], "dir");

    // Complete: exactly the paths umoci unpacks (umoci checks every digest on the way).
    let bundle = t.path().join("bundle");
    run_ok(
        std::process::Command::new("umoci")
            .args(["unpack", "--rootless", "--image"])
            .arg(format!("{}:latest", out.display()))
            .arg(&bundle),
    );
    let mut unpacked = BTreeSet::new();
    walk(&bundle.join("rootfs"), "", &mut unpacked);
    let listed: BTreeSet<String> = paths.iter().map(|p| p.to_string()).collect();
    assert_eq!(listed, unpacked);

    // The table: a header, one row per path, the path last.
    let table = run_ok(t.gpuimg().args(["inspect", "--files"]).arg(&out));
    let lines: Vec<&str> = table.lines().collect();
    assert_eq!(lines.len(), files.len() + 1);
    let cols = |l: &str| l.split_whitespace().map(str::to_string).collect::<Vec<_>>();
    assert_eq!(
        cols(lines[0]),
        ["MODE", "SIZE", "LAYER", "OWNER", "MACHINE", "PATH"]
    );
    let row = |path: &str| {
        lines
            .iter()
            .find(|l| l.ends_with(&format!(" {path}")) || l.contains(&format!(" {path} ")))
            .map(|l| cols(l))
            .unwrap_or_else(|| panic!("no row for `{path}`:\n{table}"))
    };
    assert_eq!(row("/usr/bin/legacy")[0], "-rwsr-xr-x");
    assert_eq!(row("/usr/bin/legacy")[1], "7");
    assert_eq!(row("/usr/bin/legacy")[3], "tools");
    assert_eq!(row("/opt/app/hello.sh")[2..4], ["files", "files"]);
    assert_eq!(row("/var/lib/dpkg/status")[3], "-");
    assert_eq!(row("/usr/bin/tool-link")[4], "-");
    assert_eq!(
        row("/usr/bin/tool-link")[5..],
        ["/usr/bin/tool-link", "->", "tool"]
    );
}

#[test]
fn an_image_without_a_dpkg_database_has_no_package_owners() {
    let t = Sandbox::new();
    let root = t.path().join("rootfs");
    write(&root.join("etc/passwd"), "root:x:0:0:root:/root:/bin/sh\n");
    write(&root.join("usr/bin/hello"), "hello\n");
    std::os::unix::fs::symlink("usr/bin", root.join("bin")).unwrap();
    // A dpkg-looking file that is no database: still no owners.
    write(
        &root.join("var/lib/dpkg/info/fake.md5sums"),
        "x  /usr/bin/hello\n",
    );
    write(&t.path().join("extra.txt"), "extra\n");
    let out = build(
        &t,
        "name: plain\nbase:\n  rootfs: ./rootfs\nfiles:\n  - {src: ./extra.txt, dst: /opt/extra.txt}\nhost: {gpus: [H200], driver: \">=550\"}\nstack: {cuda: \"12.4\"}\n",
        "zstd",
    );
    let files = listing(&t, &out);
    for p in [
        "/etc/passwd",
        "/usr/bin/hello",
        "/bin",
        "/var/lib/dpkg/info",
    ] {
        assert_eq!(find(&files, p)["owner"], Value::Null, "{p}");
    }
    assert_eq!(find(&files, "/bin")["link"], "usr/bin");
    assert_eq!(find(&files, "/opt/extra.txt")["owner"], "files");
    // The self-test binary and its expectation are in gpuimg's own layers.
    for (p, layer) in [
        ("/usr/local/bin/gpuimg-selftest", "selftest"),
        ("/etc/gpuimg/expect.json", "expect"),
    ] {
        let f = find(&files, p);
        assert_eq!(
            (&f["layer"], &f["owner"]),
            (&layer.into(), &layer.into()),
            "{f}"
        );
    }
    let table = run_ok(t.gpuimg().args(["inspect", "--files"]).arg(&out));
    let hello = table
        .lines()
        .find(|l| l.ends_with(" /usr/bin/hello"))
        .unwrap();
    assert_eq!(hello.split_whitespace().nth(3), Some("-"), "{hello}");
    assert_eq!(
        table.lines().filter(|l| l.contains(" files ")).count(),
        files.iter().filter(|f| f["layer"] == "files").count()
    );
}

/// The layer blobs of the image at `out`, largest first.
fn layer_blobs(out: &Path) -> Vec<PathBuf> {
    let index: Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("index.json")).unwrap()).unwrap();
    let blob = |d: &Value| out.join("blobs/sha256").join(&d.as_str().unwrap()[7..]);
    let manifest: Value =
        serde_json::from_slice(&std::fs::read(blob(&index["manifests"][0]["digest"])).unwrap())
            .unwrap();
    let mut blobs: Vec<PathBuf> = manifest["layers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| blob(&l["digest"]))
        .collect();
    blobs.sort_by_key(|b| std::cmp::Reverse(std::fs::metadata(b).unwrap().len()));
    blobs
}

fn assert_refused(sb: &Sandbox, out: &Path, want: &str) {
    for json in [false, true] {
        let mut c = sb.gpuimg();
        c.args(["inspect", "--files"]).arg(out);
        if json {
            c.arg("--json");
        }
        let r = run(&mut c);
        let stderr = String::from_utf8_lossy(&r.stderr);
        assert_eq!(r.status.code(), Some(2), "{stderr}");
        assert!(r.stdout.is_empty(), "printed despite the damage");
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
        assert!(
            stderr.starts_with("error: ") && stderr.contains(want),
            "{stderr}"
        );
        assert_error(&stderr, &[sb.path()]);
    }
}

#[test]
fn a_damaged_layer_blob_is_refused_in_one_line() {
    let t = Sandbox::new();
    let good = apt_image(&t);
    // One byte flipped in the middle (bad deflate data or wrong content), in the trailer
    // (the tar stream reads fine), or the blob cut short: each is the blob's digest failing.
    for (name, damage) in [
        ("middle", 0usize),
        ("last-byte", 1),
        ("truncated", 2),
        ("small-layer", 3),
    ] {
        let out = t.path().join(format!("damaged-{name}"));
        run_ok(
            std::process::Command::new("cp")
                .arg("-a")
                .arg(&good)
                .arg(&out),
        );
        let blobs = layer_blobs(&out);
        let blob = if damage == 3 {
            blobs.last().unwrap()
        } else {
            &blobs[0]
        };
        let mut b = std::fs::read(blob).unwrap();
        let n = b.len();
        match damage {
            0 | 3 => b[n / 2] ^= 0x55,
            1 => b[n - 1] ^= 1,
            _ => b.truncate(n - 100),
        }
        std::fs::remove_file(blob).unwrap();
        std::fs::write(blob, b).unwrap();
        assert_refused(&t, &out, "does not match its digest: the image is damaged");
    }
    // A missing blob names its path.
    let out = t.path().join("missing");
    run_ok(
        std::process::Command::new("cp")
            .arg("-a")
            .arg(&good)
            .arg(&out),
    );
    let blob = layer_blobs(&out).remove(0);
    std::fs::remove_file(&blob).unwrap();
    assert_refused(&t, &out, &blob.file_name().unwrap().to_string_lossy());
    // The undamaged image still lists.
    assert!(!listing(&t, &good).is_empty());
}

/// The first 64 bytes of a 64-bit little-endian ELF file of type `kind` (2 executable, 3
/// shared object) for `machine` (62 x86-64, 183 aarch64, 243 RISC-V).
const fn elf(machine: u16, kind: u16) -> [u8; 64] {
    let mut b = [0u8; 64];
    b[0] = 0x7f;
    b[1] = b'E';
    b[2] = b'L';
    b[3] = b'F';
    b[4] = 2;
    b[5] = 1;
    b[6] = 1;
    b[16] = kind as u8;
    b[18] = machine as u8;
    b[19] = (machine >> 8) as u8;
    b[20] = 1;
    b
}

static ARM_LIB: [u8; 64] = elf(183, 3);
static X86_PROGRAM: [u8; 64] = elf(62, 2);
static GSP: [u8; 64] = elf(243, 2);

/// Issue 34, item 1: an amd64 image whose package puts an aarch64 library in the loader's
/// multiarch directory is refused (exit 2, one line naming the file, its machine and the
/// platform, nothing written); a package with the GPU's RISC-V firmware builds, and
/// `inspect --files` shows every ELF file's machine (a column, a JSON field).
#[test]
fn elf_files_show_their_machine_and_a_foreign_library_is_refused() {
    let mut lib = pkg("libarm", "1.0");
    lib.files = vec![("/usr/lib/x86_64-linux-gnu/libarm.so.1", &ARM_LIB, 0o644)];
    let mut fw = pkg("gpufw", "1.0");
    fw.files = vec![
        ("/usr/lib/firmware/nvidia/gsp.bin", &GSP, 0o644),
        ("/usr/bin/native", &X86_PROGRAM, 0o755),
    ];
    fw.hardlinks = vec![("/usr/bin/native-too", "/usr/bin/native")];
    let repo = signed_repo(&[("stable", vec![&lib, &fw])]);
    let t = Sandbox::new();
    repo.keyring_into(t.path());
    let profile = |package: &str| {
        format!("name: m\nplatform: linux/amd64\nbase:\n  apt:\n    mirror: ${{REPO}}\n    suite: stable\n    packages: [{package}]\n    keyring: repo.gpg\n")
    };
    write(&t.join("p.yaml"), &profile("libarm"));
    let o = run(t
        .gpuimg()
        .env("REPO", &repo.url)
        .args(["-q", "build"])
        .arg(t.join("p.yaml"))
        .arg("-o")
        .arg(t.join("out")));
    let e = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{e}");
    assert_eq!(e.lines().count(), 1, "{e}");
    assert!(
        e.contains("`/usr/lib/x86_64-linux-gnu/libarm.so.1` is an aarch64 ELF file, but the image's platform is `linux/amd64`"),
        "{e}"
    );
    assert!(!t.join("out").exists());

    write(&t.join("p.yaml"), &profile("gpufw"));
    run_ok(
        t.gpuimg()
            .env("REPO", &repo.url)
            .arg("build")
            .arg(t.join("p.yaml"))
            .arg("-o")
            .arg(t.join("out")),
    );
    let files = listing(&t, &t.join("out"));
    assert_eq!(
        find(&files, "/usr/lib/firmware/nvidia/gsp.bin")["machine"],
        "riscv"
    );
    assert_eq!(find(&files, "/usr/bin/native")["machine"], "x86-64");
    assert_eq!(find(&files, "/usr/bin/native-too")["machine"], "x86-64");
    // Only ELF files have one.
    assert_eq!(find(&files, "/var/lib/dpkg/status").get("machine"), None);
    assert_eq!(find(&files, "/usr/bin").get("machine"), None);
    let table = run_ok(t.gpuimg().args(["inspect", "--files"]).arg(t.join("out")));
    let row = |path: &str| {
        table
            .lines()
            .find(|l| l.ends_with(&format!(" {path}")))
            .map(|l| l.split_whitespace().map(str::to_string).collect::<Vec<_>>())
            .unwrap_or_else(|| panic!("no row for `{path}`:\n{table}"))
    };
    assert_eq!(row("/usr/lib/firmware/nvidia/gsp.bin")[4], "riscv");
    assert_eq!(row("/var/lib/dpkg/status")[4], "-");
}

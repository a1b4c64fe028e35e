//! Hostile profile inputs: special files as `files.src` (never opened, never hang), sources
//! outside the build context, `${VAR}` values that try to add structure, resource limits,
//! duplicate keys, NUL, modes. Each bad input: exit 2, one line naming file:line:col, and
//! nothing written.

use crate::common;

use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

use common::*;

/// Run `cmd`, failing the test if it runs longer than a minute (a FIFO opened for reading
/// would block forever).
fn run_timed(cmd: &mut Command) -> Output {
    run_within(cmd, Duration::from_secs(60))
}

fn build(sb: &Sandbox, dir: &Path, profile: &str, env: &[(&str, &str)]) -> (Output, PathBuf) {
    let p = dir.join("profile.yaml");
    write(&p, profile);
    let out_dir = dir.join("out");
    let mut cmd = sb.gpuimg_with_cache(&dir.join("cache"));
    cmd.arg("build").arg(&p).arg("-o").arg(&out_dir);
    for (k, v) in env {
        cmd.env(k, v);
    }
    (run_timed(&mut cmd), out_dir)
}

/// Build `profile` and assert the failure contract: exit 2, one line that starts with
/// `error: ` and holds `needle`, no library internals, no output. Returns the line.
fn fails(sb: &Sandbox, dir: &Path, profile: &str, env: &[(&str, &str)], needle: &str) -> String {
    let (out, out_dir) = build(sb, dir, profile, env);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(2), "{profile}\nstderr: {stderr}");
    assert_eq!(stderr.lines().count(), 1, "not one line: {stderr}");
    assert!(stderr.starts_with("error: "), "{stderr}");
    assert!(stderr.contains(needle), "expected `{needle}` in: {stderr}");
    assert_error(&stderr, &[sb.path()]);
    for internal in [
        "Budget",
        "DuplicateKeyPolicy",
        "panicked",
        "ScalarBytes",
        "././",
    ] {
        assert!(!stderr.contains(internal), "{stderr}");
    }
    assert!(!out_dir.exists(), "output written despite the error");
    stderr
}

/// Build `profile`; returns the image config and the paths in its files layer.
fn builds(
    sb: &Sandbox,
    dir: &Path,
    profile: &str,
    env: &[(&str, &str)],
) -> (serde_json::Value, Vec<String>) {
    let (out, out_dir) = build(sb, dir, profile, env);
    assert!(
        out.status.success(),
        "{profile}\nstderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let json = run_ok(sb.gpuimg().arg("inspect").arg(&out_dir).arg("--json"));
    let v: serde_json::Value = serde_json::from_str(json.trim()).unwrap();
    let mut paths = Vec::new();
    for l in v["layers"].as_array().unwrap() {
        let hex = l["digest"].as_str().unwrap().trim_start_matches("sha256:");
        let blob = std::fs::File::open(out_dir.join("blobs/sha256").join(hex)).unwrap();
        let mut a = tar::Archive::new(flate2::read::GzDecoder::new(blob));
        for e in a.entries().unwrap() {
            let e = e.unwrap();
            paths.push(e.path().unwrap().display().to_string());
        }
    }
    std::fs::remove_dir_all(&out_dir).unwrap();
    (v["config"].clone(), paths)
}

/// A profile with one `files:` entry, its `src` always at 4:11; no `context:` line for the
/// default context.
fn one_file(src: &str, context: Option<&str>) -> String {
    let context = match context {
        Some(c) => format!("context: {c}"),
        None => "# the default context".to_string(),
    };
    format!("name: demo\n{context}\nfiles:\n  - {{src: \"{src}\", dst: /opt/x}}\n")
}

fn sh(args: &[&str]) {
    run_ok(Command::new(args[0]).args(&args[1..]));
}

#[test]
fn special_files_as_src_are_refused_and_never_opened() {
    let t = Sandbox::new();
    let d = t.path();
    sh(&["mkfifo", &d.join("fifo").display().to_string()]);
    let _sock = std::os::unix::net::UnixListener::bind(d.join("sock")).unwrap();
    sh(&[
        "mknod",
        &d.join("zero").display().to_string(),
        "c",
        "1",
        "5",
    ]);
    sh(&[
        "mknod",
        &d.join("loop").display().to_string(),
        "b",
        "7",
        "0",
    ]);
    symlink("fifo", d.join("link-to-fifo")).unwrap();
    symlink("/dev/null", d.join("link-to-null")).unwrap();
    for (src, context, kind) in [
        ("./fifo", None, "is a FIFO"),
        ("fifo", None, "is a FIFO"),
        ("./link-to-fifo", None, "is a FIFO"),
        ("./sock", None, "is a socket"),
        ("./zero", None, "is a character device"),
        ("./loop", None, "is a block device"),
        ("/dev/zero", Some("/"), "`/dev/zero` is a character device"),
        ("/dev/null", Some("/dev"), "is a character device"),
        ("./link-to-null", Some("/"), "is a character device"),
    ] {
        let e = fails(
            &t,
            d,
            &one_file(src, context),
            &[],
            "profile.yaml:4:11: files.src:",
        );
        assert!(e.contains(kind), "{src}: {e}");
        assert!(
            e.contains("copies only regular files, directories and symlinks"),
            "{e}"
        );
    }
}

#[test]
fn special_files_inside_a_source_directory_are_refused() {
    let t = Sandbox::new();
    let d = t.path();
    for (name, make, kind) in [
        ("fifo", "p", "FIFO"),
        ("deep/er/dev", "c", "character device"),
        ("blk", "b", "block device"),
        ("sock", "s", "socket"),
    ] {
        let data = d.join(format!("data-{make}"));
        write(&data.join("ok.txt"), "fine\n");
        let path = data.join(name);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        let p = path.display().to_string();
        let _sock;
        match make {
            "p" => sh(&["mkfifo", &p]),
            "c" => sh(&["mknod", &p, "c", "1", "3"]),
            "b" => sh(&["mknod", &p, "b", "7", "1"]),
            _ => _sock = std::os::unix::net::UnixListener::bind(&path).unwrap(),
        }
        let e = fails(
            &t,
            d,
            &one_file(&format!("./data-{make}"), None),
            &[],
            "profile.yaml:4:11: files.src:",
        );
        assert!(
            e.contains(&format!("/data-{make}/{name}` is a {kind}")),
            "{e}"
        );
    }
}

#[test]
fn sources_outside_the_context_are_refused() {
    let t = Sandbox::new();
    let ctx = t.path().join("ctx");
    write(&t.path().join("outside/secret"), "no\n");
    write(&ctx.join("sub/in"), "yes\n");
    write(&t.path().join("ctx-sibling/f"), "no\n");
    symlink("../outside/secret", ctx.join("link")).unwrap();
    symlink(t.path().join("outside"), ctx.join("dirlink")).unwrap();
    symlink("/etc", ctx.join("etc")).unwrap();
    let cases = [
        ("/etc/hostname", "."),
        ("../outside/secret", "."),
        ("./sub/../../outside/secret", "."),
        ("./link", "."),
        ("./dirlink/secret", "."),
        ("./dirlink", "."),
        ("./etc/hostname", "."),
        ("../ctx-sibling/f", "."),
        ("./sub/../link", "./sub"),
        ("../ctx/link", "./sub"),
    ];
    for (src, context) in cases {
        let e = fails(
            &t,
            &ctx,
            &one_file(src, Some(context)),
            &[],
            "profile.yaml:4:11: files.src:",
        );
        assert!(e.contains("is outside the build context `"), "{src}: {e}");
        assert!(e.contains("set `context:`"), "{e}");
    }
    // The context itself must exist and be a directory.
    let e = fails(
        &t,
        &ctx,
        &one_file("./sub/in", Some("./nope")),
        &[],
        "profile.yaml:2:10: context:",
    );
    assert!(e.contains("does not exist"), "{e}");
    let e = fails(
        &t,
        &ctx,
        &one_file("./sub/in", Some("./sub/in")),
        &[],
        "profile.yaml:2:10: context:",
    );
    assert!(e.contains("is not a directory"), "{e}");
}

#[test]
fn sources_inside_the_context_build() {
    let t = Sandbox::new();
    let ctx = t.path().join("ctx");
    write(&t.path().join("outside/f"), "outside\n");
    write(&ctx.join("app/run.sh"), "echo hi\n");
    symlink("app/run.sh", ctx.join("inner-link")).unwrap();
    for (src, context) in [
        ("./app/run.sh", None),
        ("app/run.sh", Some(".")),
        ("./inner-link", None),
        ("/etc/hostname", Some("/")),
        ("../outside/f", Some("..")),
        (
            &*t.path().join("outside/f").display().to_string(),
            Some(".."),
        ),
    ] {
        let (_, paths) = builds(&t, &ctx, &one_file(src, context), &[]);
        assert!(paths.iter().any(|p| p == "opt/x"), "{src}: {paths:?}");
    }
    // A directory source keeps its own symlinks as symlinks (not followed, not checked).
    symlink("/etc/shadow", ctx.join("app/shadow-link")).unwrap();
    let (_, paths) = builds(&t, &ctx, &one_file("./app", None), &[]);
    assert!(paths.iter().any(|p| p == "opt/x/shadow-link"), "{paths:?}");
}

const EVIL_FILES: &str = "v\nfiles:\n  - {src: /etc/passwd, dst: /etc/passwd}";

#[test]
fn variable_values_never_become_keys_or_lists() {
    let t = Sandbox::new();
    write(&t.path().join("a"), "a\n");
    let env = [
        ("EVIL", EVIL_FILES),
        ("COLON", "x: y"),
        ("DASH", "- /etc/passwd"),
        ("FLOW", "[a, b]"),
        ("MAP", "{src: /etc/passwd, dst: /p}"),
    ];
    let profile = "name: demo\nfiles:\n  - {src: ./a, dst: /opt/a}\nconfig:\n  user: ${EVIL}\n  workdir: ${COLON}\n  cmd: [\"${DASH}\", \"${FLOW}\"]\n  env:\n    A: ${MAP}\n    B: |\n      ${EVIL}\n  labels: {l: \"${EVIL}\", m: '${COLON}'}\n";
    let (config, paths) = builds(&t, t.path(), profile, &env);
    assert_eq!(paths, ["opt/", "opt/a"], "only the declared file");
    assert_eq!(config["User"], EVIL_FILES);
    assert_eq!(config["WorkingDir"], "x: y");
    assert_eq!(
        config["Cmd"],
        serde_json::json!(["- /etc/passwd", "[a, b]"])
    );
    assert!(config["Env"]
        .as_array()
        .unwrap()
        .contains(&serde_json::json!("A={src: /etc/passwd, dst: /p}")));
    assert!(config["Env"]
        .as_array()
        .unwrap()
        .contains(&serde_json::json!(format!("B={EVIL_FILES}\n"))));
    assert_eq!(config["Labels"]["l"], EVIL_FILES);
    assert_eq!(config["Labels"]["m"], "x: y");

    // Where a value cannot be text of that shape, it is refused where it stands.
    for (profile, needle) in [
        ("name: ${EVIL}\n", "profile.yaml:1:7: name:"),
        (
            "name: demo\nfiles:\n  - src: ./a\n    dst: ${EVIL}\n",
            "profile.yaml:4:10: files.dst: `v\\nfiles:",
        ),
        (
            "name: demo\nstrip: ${DASH}\n",
            "profile.yaml:2:8: strip: Invalid type: string \"- /etc/passwd\", expected a sequence",
        ),
        (
            "name: demo\nfiles: ${MAP}\n",
            "profile.yaml:2:8: files: Invalid type: string",
        ),
        (
            "name: demo\nconfig: ${COLON}\n",
            "profile.yaml:2:9: config: Invalid type: string \"x: y\", expected a mapping of keys",
        ),
        (
            "name: demo\n${COLON}: 1\n",
            "profile.yaml:2:1: Unknown field `x: y`",
        ),
    ] {
        fails(&t, t.path(), profile, &env, needle);
    }
}

#[test]
fn a_sole_reference_types_as_its_value() {
    let t = Sandbox::new();
    let base = "name: demo\nselftest:\n";
    for (n, line) in [
        ("2", "  min-gpus: ${N}\n"),
        ("false", "  enabled: ${N}\n"),
        ("", "  min-gpus: ${N}\n"),
    ] {
        builds(&t, t.path(), &format!("{base}{line}"), &[("N", n)]);
    }
    for (n, line, needle) in [
        (
            "2",
            "  min-gpus: \"${N}\"\n",
            "profile.yaml:3:13: selftest.min-gpus: Invalid type: string \"2\", expected a whole number (0 or more)",
        ),
        ("2", "  min-gpus: '${N}'\n", "Invalid type: string \"2\""),
        ("2", "  min-gpus: ${N}${N}\n", "Invalid type: string \"22\""),
        ("2", "  min-gpus: x${N}\n", "Invalid type: string \"x2\""),
        ("abc", "  min-gpus: ${N}\n", "Invalid type: string \"abc\""),
        ("-1", "  min-gpus: ${N}\n", "Invalid value: integer `-1`"),
        (
            "true",
            "  enabled: \"${N}\"\n",
            "selftest.enabled: Invalid type: string \"true\", expected a boolean",
        ),
    ] {
        fails(&t, t.path(), &format!("{base}{line}"), &[("N", n)], needle);
    }
    // `$${` writes a literal `${`, quoted or not.
    let (config, _) = builds(
        &t,
        t.path(),
        "name: demo\nconfig:\n  user: $${HOME}\n  workdir: \"/a/$${X}/$$5\"\n",
        &[],
    );
    assert_eq!(config["User"], "${HOME}");
    assert_eq!(config["WorkingDir"], "/a/${X}/$$5");
    // Issue 34, item 6: `${VAR:-default}` as the README documents it: the default when the
    // variable is unset or empty, the value otherwise; a bad name still points at itself.
    let (config, _) = builds(
        &t,
        t.path(),
        "name: demo\nconfig:\n  user: ${GPUIMG_NOPE:-1000}\n  workdir: \"/w/${GPUIMG_EMPTY:-e}/${N:-x}\"\n",
        &[("GPUIMG_EMPTY", ""), ("N", "7")],
    );
    assert_eq!(config["User"], "1000");
    assert_eq!(config["WorkingDir"], "/w/e/7");
    fails(
        &t,
        t.path(),
        "name: demo\nconfig:\n  user: ${GPUIMG-NOPE:-1}\n",
        &[],
        "profile.yaml:3:9: config.user: Invalid variable name `GPUIMG-NOPE`",
    );
}

#[test]
fn unset_variables_point_at_the_reference() {
    let t = Sandbox::new();
    for (profile, needle) in [
        (
            "name: demo\nconfig:\n  user: a${GPUIMG_NOPE}\n",
            "profile.yaml:3:10: config.user: Environment variable `GPUIMG_NOPE` is not set",
        ),
        (
            "name: demo\nconfig:\n  cmd: [\"x\", \"y ${GPUIMG_NOPE}\"]\n",
            "profile.yaml:3:17: config.cmd: Environment variable `GPUIMG_NOPE`",
        ),
        (
            "name: demo\nconfig:\n  labels:\n    k: |\n      one\n      two ${GPUIMG_NOPE}\n",
            "profile.yaml:6:11: config.labels.k: Environment variable",
        ),
        (
            "name: demo\nconfig:\n  user: ${GPUIMG OPE}\n",
            "profile.yaml:3:9: config.user: Invalid variable name `GPUIMG OPE`",
        ),
        (
            "name: demo\nconfig:\n  user: x ${GPUIMG\n",
            "profile.yaml:3:11: config.user: Unterminated `${`",
        ),
        (
            "name: demo\nfiles:\n  - {src: ${GPUIMG_NOPE}, dst: /x}\n",
            "must be quoted",
        ),
    ] {
        fails(&t, t.path(), profile, &[], needle);
    }
}

#[test]
fn limits_are_messages_a_user_can_act_on() {
    let t = Sandbox::new();
    let big = "x".repeat(70_000);
    fails(
        &t,
        t.path(),
        "name: demo\nconfig:\n  user: ${BIG}\n",
        &[("BIG", &big)],
        "profile.yaml:3:9: config.user: Profile too large: a value exceeds 65536 bytes",
    );
    fails(
        &t,
        t.path(),
        &format!("name: demo\nconfig:\n  user: \"{big}\"\n"),
        &[],
        "profile.yaml:3:9: config.user: Profile too large: a value exceeds 65536 bytes",
    );
    fails(
        &t,
        t.path(),
        &format!("name: demo\n# {}\n", "y".repeat(2 << 20)),
        &[],
        "is larger than 1048576 bytes",
    );
    let deep = format!(
        "name: demo\nconfig: {}{}\n",
        "[".repeat(200),
        "]".repeat(200)
    );
    fails(
        &t,
        t.path(),
        &deep,
        &[],
        "Profile nested too deeply: more than 64 levels",
    );
    let mut laughs = String::from("name: demo\nx: &a [a, a, a, a, a, a, a, a, a, a]\n");
    for i in 0..7 {
        let prev = if i == 0 {
            "a".to_string()
        } else {
            format!("l{}", i - 1)
        };
        laughs += &format!(
            "l{i}: &l{i} [{}]\n",
            vec![format!("*{prev}"); 10].join(", ")
        );
    }
    fails(
        &t,
        t.path(),
        &laughs,
        &[],
        "Profile too large: more than 100000 values",
    );
}

#[test]
fn duplicate_keys_name_both_places() {
    let t = Sandbox::new();
    for (profile, needle) in [
        (
            "name: demo\nname: other\n",
            "profile.yaml:2:1: Duplicate key `name` (first at 1:1)",
        ),
        (
            "name: demo\nconfig:\n  user: a\n  user: b\n",
            "profile.yaml:4:3: Duplicate key `user` (first at 3:3)",
        ),
        (
            "name: demo\nconfig: {env: {A: 1, A: 2}}\n",
            "profile.yaml:2:22: Duplicate key `A` (first at 2:16)",
        ),
        (
            "name: demo\nfiles:\n  - {src: ./a, dst: /a, src: ./b}\n",
            "profile.yaml:3:25: Duplicate key `src` (first at 3:6)",
        ),
        (
            "name: demo\nconfig:\n  labels:\n    ${K}: 1\n    b: 2\n",
            "profile.yaml:5:5: Duplicate key `b` (first at 4:5)",
        ),
    ] {
        fails(&t, t.path(), profile, &[("K", "b")], needle);
    }
}

#[test]
fn nul_is_refused_where_it_is_written() {
    let t = Sandbox::new();
    write(&t.path().join("a"), "a\n");
    for (profile, needle) in [
        (
            "name: demo\nfiles:\n  - {src: ./a, dst: \"/opt/\\0x\"}\n",
            "profile.yaml:3:21: files.dst: A NUL character",
        ),
        (
            "name: demo\nfiles:\n  - {src: \"./a\\x00\", dst: /x}\n",
            "profile.yaml:3:11: files.src: A NUL character",
        ),
        (
            "name: demo\nfiles:\n  - src: ./a\n    dst: \"/\\u0000\"\n",
            "profile.yaml:4:10: files.dst: A NUL character",
        ),
        (
            "name: demo\nconfig:\n  env: {A: \"\\0\"}\n",
            "profile.yaml:3:12: config.env.A: A NUL character",
        ),
        (
            "name: demo\nconfig:\n  user: \"a\\\n    \\0\"\n",
            "profile.yaml:3:9: config.user: A NUL character",
        ),
    ] {
        fails(&t, t.path(), profile, &[], needle);
    }
    // A raw NUL byte is not YAML at all.
    fails(
        &t,
        t.path(),
        "name: demo\nconfig:\n  user: a\0b\n",
        &[],
        "profile.yaml:3:",
    );
}

#[test]
fn modes_are_three_or_four_octal_digits() {
    let t = Sandbox::new();
    write(&t.path().join("a"), "a\n");
    for bad in [
        "\"+755\"",
        "\"-755\"",
        "\"0o755\"",
        "999",
        "\"07777 7\"",
        "\"\"",
        "75",
        "\"07555\"",
        "0x1ed",
        "\" 755\"",
    ] {
        let profile = format!("name: demo\nfiles:\n  - {{src: ./a, dst: /x, mode: {bad}}}\n");
        let e = fails(
            &t,
            t.path(),
            &profile,
            &[],
            "profile.yaml:3:31: files.mode: `",
        );
        assert!(
            e.contains("is not a mode: write 3 or 4 octal digits, like \"0755\""),
            "{e}"
        );
    }
    for good in ["0755", "\"0644\"", "755", "'4755'"] {
        let profile = format!("name: demo\nfiles:\n  - {{src: ./a, dst: /x, mode: {good}}}\n");
        builds(&t, t.path(), &profile, &[]);
    }
}

#[test]
fn paths_in_messages_are_written_once() {
    // Run from the profile's directory with a relative profile path: the directory is `.`,
    // and `./x` joined to it must read `./x`, not `././x`.
    let t = Sandbox::new();
    write(&t.path().join("a"), "a\n");
    let dir_fifo = t.path().join("d/p");
    std::fs::create_dir_all(t.path().join("d")).unwrap();
    sh(&["mkfifo", &dir_fifo.display().to_string()]);
    for (profile, needle) in [
        (
            "name: demo\nbase:\n  rootfs: ./nope.tar\n",
            "profile.yaml:3:11: base.rootfs: `./nope.tar` does not exist",
        ),
        (
            "name: demo\nfiles:\n  - {src: ./nope, dst: /x}\n",
            "profile.yaml:3:11: files.src: `./nope` does not exist",
        ),
        (
            "name: demo\nfiles:\n  - {src: ././d, dst: /x}\n",
            "profile.yaml:3:11: files.src: `./d/p` is a FIFO",
        ),
        (
            "name: demo\ncontext: ./d\nfiles:\n  - {src: ./a, dst: /x}\n",
            "profile.yaml:4:11: files.src: `./a` is outside the build context `",
        ),
    ] {
        write(&t.path().join("profile.yaml"), profile);
        let out = run_timed(t.gpuimg().current_dir(t.path()).args([
            "build",
            "profile.yaml",
            "-o",
            "out",
        ]));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{stderr}");
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
        assert!(stderr.starts_with(&format!("error: {needle}")), "{stderr}");
        assert!(!stderr.contains("././"), "{stderr}");
        assert!(!t.path().join("out").exists());
    }
}

//! The test support itself: a sandboxed command sees only the sandbox's configuration, cache,
//! home and the default epoch (none of the host's Python index or registry credential
//! settings), whatever the environment of the test run; a failed command's message names the
//! command line, its status, stdout and stderr.

use crate::common;

use std::process::Command;

use common::{run_ok, wrap, Sandbox};

/// The environment a sandboxed binary would get: `env`, run by a shell started in its place.
fn env_of(cmd: &Command) -> Vec<(String, String)> {
    let out = run_ok(&mut wrap(&["sh", "-c", "env", "sh"], cmd));
    out.lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

#[test]
fn sandboxed_commands_see_only_the_sandbox() {
    let sb = Sandbox::new();
    let cache = sb.join("shared-cache");
    for (cmd, want_cache) in [
        (sb.gpuimg(), sb.cache()),
        (sb.selftest(), sb.cache()),
        (sb.gpuimg_with_cache(&cache), cache.clone()),
    ] {
        // Removed explicitly, so that what a developer's shell set cannot leak through.
        for k in ["SOURCE_DATE_EPOCH", "GPUIMG_DEBUG_PANIC", "GPUIMG_RESOLVER"] {
            assert!(
                cmd.get_envs().any(|(n, v)| n == k && v.is_none()),
                "`{k}` is not removed"
            );
        }
        assert_eq!(cmd.get_current_dir(), Some(sb.path()));
        let env = env_of(&cmd);
        // The host's Python index settings never reach a test.
        for k in common::PYTHON_INDEX_VARS {
            assert!(
                env.iter().all(|(n, _)| n != k),
                "`{k}` leaks into the sandbox"
            );
        }
        // Nor do the host's registry credentials.
        for k in common::REGISTRY_AUTH_VARS {
            assert!(
                cmd.get_envs().any(|(n, v)| n == *k && v.is_none()),
                "`{k}` is not removed"
            );
            assert!(
                env.iter().all(|(n, _)| n != k),
                "`{k}` leaks into the sandbox"
            );
        }
        for (k, v) in [("PIP_CONFIG_FILE", "/dev/null"), ("UV_NO_CONFIG", "1")] {
            assert!(
                env.iter().any(|(n, x)| n == k && x == v),
                "`{k}` is not `{v}`"
            );
        }
        let get = |k: &str| {
            env.iter()
                .find(|(n, _)| n == k)
                .map(|(_, v)| v.clone())
                .unwrap_or_else(|| panic!("`{k}` not set: {env:?}"))
        };
        let inside = |k: &str| {
            let v = get(k);
            assert!(
                std::path::Path::new(&v).starts_with(sb.path()),
                "`{k}={v}` is outside the sandbox"
            );
        };
        for k in ["XDG_CONFIG_HOME", "GPUIMG_CACHE", "HOME", "XDG_CACHE_HOME"] {
            inside(k);
        }
        assert_eq!(get("GPUIMG_CACHE"), want_cache.display().to_string());
        assert_eq!(get("XDG_CONFIG_HOME"), sb.config().display().to_string());
        for k in ["SOURCE_DATE_EPOCH", "GPUIMG_DEBUG_PANIC", "GPUIMG_RESOLVER"] {
            assert!(env.iter().all(|(n, _)| n != k), "`{k}` leaked: {env:?}");
        }
    }
    // The sandbox's directory is a valid image reference: lowercase, so podman accepts it.
    let name = sb.path().display().to_string();
    assert_eq!(name, name.to_lowercase());
}

#[test]
fn a_failed_command_names_its_line_status_and_output() {
    let mut cmd = Command::new("sh");
    cmd.args(["-c", "echo to-stdout; echo to-stderr >&2; exit 3"])
        .env("SOME_VAR", "a b");
    let panic = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| run_ok(&mut cmd)))
        .expect_err("a failing command fails the test");
    let msg = panic.downcast_ref::<String>().cloned().unwrap_or_default();
    for want in [
        "`env SOME_VAR='a b' sh -c 'echo to-stdout; echo to-stderr >&2; exit 3'` failed",
        "exit status: 3",
        "--- stdout\nto-stdout\n",
        "--- stderr\nto-stderr\n",
    ] {
        assert!(msg.contains(want), "want {want:?} in:\n{msg}");
    }
    let missing = std::panic::catch_unwind(|| run_ok(&mut Command::new("/nonexistent/tool")))
        .expect_err("a missing program fails the test");
    let msg = missing
        .downcast_ref::<String>()
        .cloned()
        .unwrap_or_default();
    assert!(
        msg.starts_with("failed to start `/nonexistent/tool`: "),
        "{msg}"
    );
}

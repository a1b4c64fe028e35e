//! A DKMS module source's `dkms.conf`, read as data (never sourced by a shell): the package
//! name and version, the kernels it builds for (`BUILD_EXCLUSIVE_KERNEL`, a regular
//! expression over the kernel release; `BUILD_EXCLUSIVE_CONFIG`, kernel options that must be
//! set, or with `!` unset), the `MAKE` command and each built module's name and installed
//! name. Assignments are `NAME="value"` or `NAME[i]="value"`, with `\` line continuations;
//! anything else (comments, shell) is ignored. Must never run or expand the file.

use std::collections::BTreeMap;

/// What a `dkms.conf` states.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DkmsConf {
    pub package_name: Option<String>,
    pub package_version: Option<String>,
    pub build_exclusive_kernel: Option<String>,
    /// `CONFIG_X` (must be set) or `!CONFIG_X` (must not be).
    pub build_exclusive_config: Vec<String>,
    /// `MAKE[0]`, as written (its `${…}` left for the caller).
    pub make: Option<String>,
    /// `BUILT_MODULE_NAME[i]` → `DEST_MODULE_NAME[i]` (the built name where none is given).
    pub modules: Vec<(String, String)>,
    /// The built modules dkms strips of their debug sections before installing them: each
    /// whose `STRIP[i]` (else `STRIP[0]`) is not `no` (dkms's default is to strip).
    pub stripped: Vec<String>,
}

/// Parse `text`.
pub fn parse(text: &str) -> DkmsConf {
    let mut vars: BTreeMap<String, String> = BTreeMap::new();
    let mut logical = String::new();
    for line in text.lines() {
        if let Some(head) = line.strip_suffix('\\') {
            logical.push_str(head);
            logical.push(' ');
            continue;
        }
        logical.push_str(line);
        if let Some((name, value)) = assignment(&logical) {
            vars.insert(name, value);
        }
        logical.clear();
    }
    let get = |k: &str| vars.get(k).cloned();
    let mut modules = Vec::new();
    for i in 0.. {
        let Some(built) = get(&format!("BUILT_MODULE_NAME[{i}]")) else {
            break;
        };
        let dest = get(&format!("DEST_MODULE_NAME[{i}]"))
            .map(|d| substitute(&d, &vars))
            .unwrap_or_else(|| built.clone());
        modules.push((built, dest));
    }
    let stripped = modules
        .iter()
        .enumerate()
        .filter(|(i, _)| {
            get(&format!("STRIP[{i}]"))
                .or_else(|| get("STRIP[0]"))
                .is_none_or(|v| !v.eq_ignore_ascii_case("no"))
        })
        .map(|(_, (built, _))| built.clone())
        .collect();
    DkmsConf {
        package_name: get("PACKAGE_NAME"),
        package_version: get("PACKAGE_VERSION"),
        build_exclusive_kernel: get("BUILD_EXCLUSIVE_KERNEL"),
        build_exclusive_config: get("BUILD_EXCLUSIVE_CONFIG")
            .map(|c| c.split_whitespace().map(str::to_string).collect())
            .unwrap_or_default(),
        make: get("MAKE[0]").or_else(|| get("MAKE")),
        modules,
        stripped,
    }
}

/// `NAME="value"`, `NAME[i]='value'` or `NAME=value` (no spaces), trimmed; `None` otherwise.
fn assignment(line: &str) -> Option<(String, String)> {
    let line = line.trim();
    if line.starts_with('#') {
        return None;
    }
    let (name, value) = line.split_once('=')?;
    let ok = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == '[' || c == ']';
    if name.is_empty() || !name.chars().all(ok) {
        return None;
    }
    let value = value.trim();
    let value = match value.chars().next() {
        Some(q @ ('"' | '\'')) => value.strip_prefix(q)?.rsplit_once(q)?.0,
        _ => value.split_whitespace().next().unwrap_or(""),
    };
    Some((
        name.to_string(),
        value.split_whitespace().collect::<Vec<_>>().join(" "),
    ))
}

/// `$NAME` and `${NAME}` of the file's own plain variables (`$PACKAGE_NAME-drm`).
fn substitute(value: &str, vars: &BTreeMap<String, String>) -> String {
    let mut out = value.to_string();
    for (k, v) in vars.iter().filter(|(k, _)| !k.contains('[')) {
        out = out
            .replace(&format!("${{{k}}}"), v)
            .replace(&format!("${k}"), v);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const DEBIAN_535: &str = r#"# DKMS configuration for the NVIDIA kernel module.  -*- sh -*-

PACKAGE_NAME="nvidia-current-open"
PACKAGE_VERSION="535.261.03"

# Only kernels from 3.10 onwards are supported.
BUILD_EXCLUSIVE_KERNEL="^(3\.[1-9][0-9]|[4-9]\.)"

# The NVIDIA driver does not support real-time kernels.
BUILD_EXCLUSIVE_CONFIG="!CONFIG_PREEMPT_RT !CONFIG_PREEMPT_RT_FULL"

AUTOINSTALL=yes

MAKE[0]="env NV_VERBOSE=1 \
    make ${parallel_jobs+-j$parallel_jobs} modules KERNEL_UNAME=${kernelver}"
CLEAN="true"

BUILT_MODULE_NAME[0]="nvidia"
DEST_MODULE_NAME[0]="$PACKAGE_NAME"
DEST_MODULE_LOCATION[0]="/updates/dkms"

BUILT_MODULE_NAME[1]="nvidia-modeset"
DEST_MODULE_NAME[1]="$PACKAGE_NAME-modeset"
"#;

    #[test]
    fn debians_nvidia_dkms_conf_reads_as_its_facts() {
        let c = parse(DEBIAN_535);
        assert_eq!(c.package_name.as_deref(), Some("nvidia-current-open"));
        assert_eq!(c.package_version.as_deref(), Some("535.261.03"));
        assert_eq!(
            c.build_exclusive_kernel.as_deref(),
            Some(r"^(3\.[1-9][0-9]|[4-9]\.)")
        );
        assert_eq!(
            c.build_exclusive_config,
            ["!CONFIG_PREEMPT_RT", "!CONFIG_PREEMPT_RT_FULL"]
        );
        assert_eq!(
            c.make.as_deref(),
            Some("env NV_VERBOSE=1 make ${parallel_jobs+-j$parallel_jobs} modules KERNEL_UNAME=${kernelver}")
        );
        assert_eq!(
            c.modules,
            [
                ("nvidia".to_string(), "nvidia-current-open".to_string()),
                (
                    "nvidia-modeset".to_string(),
                    "nvidia-current-open-modeset".to_string()
                )
            ]
        );
    }

    #[test]
    fn shell_it_does_not_understand_is_ignored_never_run() {
        let c = parse("if true; then\n  rm -rf /\nfi\n$(touch /x)=1\nPACKAGE_NAME=plain junk\n");
        assert_eq!(c.package_name.as_deref(), Some("plain"));
        assert!(c.modules.is_empty());
    }
}

//! File capabilities that maintainer scripts would set with `setcap` (iputils-ping's postinst:
//! `setcap cap_net_raw+ep /bin/ping`), applied natively as `security.capability` so the layer
//! carries them. Only literal `setcap CAPS PATH` commands are honoured; anything with shell
//! expansion is ignored. Must never run package code.

use std::collections::BTreeMap;
use std::path::Path;

use gpuimg_store::confined::Root;

/// Capability names in kernel bit order (`include/uapi/linux/capability.h`).
const CAPS: [&str; 41] = [
    "chown",
    "dac_override",
    "dac_read_search",
    "fowner",
    "fsetid",
    "kill",
    "setgid",
    "setuid",
    "setpcap",
    "linux_immutable",
    "net_bind_service",
    "net_broadcast",
    "net_admin",
    "net_raw",
    "ipc_lock",
    "ipc_owner",
    "sys_module",
    "sys_rawio",
    "sys_chroot",
    "sys_ptrace",
    "sys_pacct",
    "sys_admin",
    "sys_boot",
    "sys_nice",
    "sys_resource",
    "sys_time",
    "sys_tty_config",
    "mknod",
    "lease",
    "audit_write",
    "audit_control",
    "setfcap",
    "mac_override",
    "mac_admin",
    "syslog",
    "wake_alarm",
    "block_suspend",
    "audit_read",
    "perfmon",
    "bpf",
    "checkpoint_restore",
];

/// One file's capability sets.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct FileCaps {
    pub permitted: u64,
    pub inheritable: u64,
    pub effective: bool,
}

impl FileCaps {
    /// `struct vfs_cap_data`, revision 2 (what `setcap` writes without a namespace root id).
    pub fn encode(&self) -> Vec<u8> {
        const VFS_CAP_REVISION_2: u32 = 0x0200_0000;
        let magic = VFS_CAP_REVISION_2 | u32::from(self.effective);
        let mut out = Vec::with_capacity(20);
        for v in [
            magic,
            self.permitted as u32,
            self.inheritable as u32,
            (self.permitted >> 32) as u32,
            (self.inheritable >> 32) as u32,
        ] {
            out.extend_from_slice(&v.to_le_bytes());
        }
        out
    }
}

/// Parse `cap_a,cap_b+ep` (libcap's text form: clauses `caplist op flags…`, ops `+ - =`).
pub fn parse(text: &str) -> Option<FileCaps> {
    let mut caps = FileCaps::default();
    let mut effective = 0u64;
    for clause in text.split_whitespace() {
        let at = clause.find(['+', '-', '='])?;
        let (list, mut ops) = clause.split_at(at);
        let mut mask = 0u64;
        for name in list.split(',').filter(|n| !n.is_empty()) {
            let name = name.to_ascii_lowercase();
            if name == "all" {
                mask |= (1u64 << CAPS.len()) - 1;
                continue;
            }
            let bare = name.strip_prefix("cap_")?;
            mask |= 1u64 << CAPS.iter().position(|c| *c == bare)?;
        }
        if list.is_empty() {
            // `=ep` alone means every capability.
            mask = (1u64 << CAPS.len()) - 1;
        }
        while !ops.is_empty() {
            let op = ops.chars().next()?;
            let rest = &ops[1..];
            let end = rest.find(['+', '-', '=']).unwrap_or(rest.len());
            let flags = &rest[..end];
            if flags.chars().any(|c| !"eip".contains(c)) {
                return None;
            }
            if op == '=' {
                caps.permitted &= !mask;
                caps.inheritable &= !mask;
                effective &= !mask;
            }
            for f in flags.chars() {
                let set = match f {
                    'p' => &mut caps.permitted,
                    'i' => &mut caps.inheritable,
                    _ => &mut effective,
                };
                if op == '-' {
                    *set &= !mask;
                } else {
                    *set |= mask;
                }
            }
            ops = &rest[end..];
        }
    }
    caps.effective = effective != 0;
    Some(caps)
}

/// Literal `setcap CAPS PATH [CAPS PATH…]` commands in the scripts: path → capabilities.
pub fn from_scripts(postinsts: &BTreeMap<String, String>) -> BTreeMap<String, FileCaps> {
    let mut out = BTreeMap::new();
    for script in postinsts.values() {
        let joined = script.replace("\\\n", " ");
        for line in joined.lines() {
            let line = line.split('#').next().unwrap_or("");
            for cmd in line.split([';', '&', '|']) {
                let words: Vec<&str> = cmd.split_whitespace().collect();
                let Some(i) = words
                    .iter()
                    .position(|w| *w == "setcap" || w.ends_with("/setcap"))
                else {
                    continue;
                };
                let mut args = words[i + 1..].iter().filter(|w| !w.starts_with('-'));
                while let (Some(caps), Some(path)) = (args.next(), args.next()) {
                    let literal = |w: &str| !w.contains(['$', '"', '\'', '`', '*', '?']);
                    if !literal(caps) || !literal(path) || !path.starts_with('/') {
                        break;
                    }
                    match parse(caps) {
                        Some(c) => {
                            out.insert(path.to_string(), c);
                        }
                        None => break,
                    }
                }
            }
        }
    }
    out
}

/// Apply the scripts' capabilities to the unpacked files; returns a line per file, and a
/// warning per capability that could not be applied.
pub fn apply(root: &Root, postinsts: &BTreeMap<String, String>) -> (Vec<String>, Vec<String>) {
    let (mut done, mut warnings) = (Vec::new(), Vec::new());
    for (path, caps) in from_scripts(postinsts) {
        let p = Path::new(&path);
        if !matches!(root.symlink_metadata(p), Ok(Some(m)) if m.is_regular()) {
            continue;
        }
        match root.set_xattr(p, "security.capability", &caps.encode()) {
            Ok(()) => done.push(format!("{path}: file capabilities")),
            Err(e) => warnings.push(format!(
                "Failed to set the file capabilities of `{path}` that its package's script sets ({e}); the image's `{path}` has none"
            )),
        }
    }
    (done, warnings)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_libcap_text() {
        let c = parse("cap_net_raw+ep").unwrap();
        assert_eq!(c.permitted, 1 << 13);
        assert!(c.effective);
        assert_eq!(
            c.encode(),
            [1, 0, 0, 2, 0, 0x20, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]
        );
        let c = parse("cap_net_admin,cap_net_raw=p").unwrap();
        assert_eq!(c.permitted, (1 << 12) | (1 << 13));
        assert!(!c.effective);
        let c = parse("cap_checkpoint_restore+eip").unwrap();
        assert_eq!(c.permitted, 1 << 40);
        assert_eq!(c.inheritable, 1 << 40);
        assert_eq!(c.encode()[12..16], [0, 1, 0, 0]);
        assert!(parse("cap_bogus+ep").is_none());
        assert!(parse("cap_net_raw+x").is_none());
        assert!(parse("cap_net_raw").is_none());
    }

    #[test]
    fn finds_literal_setcap_commands_only() {
        let mut s = BTreeMap::new();
        s.insert(
            "iputils-ping".to_string(),
            "if command -v setcap > /dev/null; then\n    if setcap cap_net_raw+ep /bin/ping; then\n        chmod u-s /bin/ping\n    fi\nfi\n".to_string(),
        );
        s.insert(
            "other".to_string(),
            "setcap \"$CAPS\" /usr/bin/x\n/sbin/setcap -q cap_ipc_lock+ep /usr/bin/y # comment\nsetcap cap_sys_nice+ep $BIN\n".to_string(),
        );
        let found = from_scripts(&s);
        let paths: Vec<&str> = found.keys().map(String::as_str).collect();
        assert_eq!(paths, ["/bin/ping", "/usr/bin/y"]);
        assert_eq!(found["/usr/bin/y"].permitted, 1 << 14);
    }
}

//! What the skipped maintainer scripts would have done for a root that boots (a node, a
//! `PackagesSpec` with `system: true`), beyond the fix-ups every image gets: system users and
//! groups (`system_users`), enabled units (`system_units`), and the node-specific state left
//! unwritten so that every node makes its own at first boot:
//!
//! - `/etc/machine-id` an empty file: machine-id(5) asks for an empty file in a generic image;
//!   absent or `uninitialized` would make systemd treat each boot as the first and run
//!   `preset-all` (enabling every unit Debian's presets do not disable); empty, it generates an
//!   id at boot without that.
//! - `/etc/hostname` empty (cloud-init or DHCP names the node).
//! - No SSH host keys, no `/var/lib/systemd/random-seed`, no `/var/lib/dbus/machine-id`: the
//!   scripts that make them (`ssh-keygen`, the seed service, `dbus-uuidgen`) never run here
//!   and nothing here writes them (cloud-init makes the host keys per instance).
//!
//! Runs after the fix-ups (it reads `/etc/passwd` and `/etc/group` as they leave them). Off
//! for containers: a container image's bytes do not change. Must never run package code.

use std::collections::BTreeMap;
use std::path::Path;

use crate::{system_units, system_users, AptError};
use gpuimg_store::confined::Root;

/// Files this step writes empty (root-relative).
pub const EMPTY_FILES: [&str; 2] = ["etc/machine-id", "etc/hostname"];

/// Apply everything for a booted root; returns (a line per action, warnings).
/// `epoch`: SOURCE_DATE_EPOCH, for the shadow files' `lastchg`.
/// `installed`: the package names (`systemd` ships the `systemctl` that makes presets count).
pub fn apply(
    root: &Root,
    installed: &[&str],
    postinsts: &BTreeMap<String, String>,
    epoch: u64,
) -> Result<(Vec<String>, Vec<String>), AptError> {
    let (mut done, mut warnings) = system_users::apply(root, postinsts, epoch)?;
    let has_systemctl = installed.contains(&"systemd");
    let (units, unit_warnings) = system_units::apply(root, postinsts, has_systemctl)?;
    done.extend(units);
    warnings.extend(unit_warnings);
    for (f, mode) in EMPTY_FILES.iter().zip([0o444, 0o644]) {
        let p = Path::new(f);
        root.create_dir_all(Path::new("etc"))
            .map_err(AptError::staged("create", "etc"))?;
        root.write(p, b"", mode)
            .map_err(AptError::staged("write", f))?;
        done.push(format!("/{f} empty"));
    }
    Ok((done, warnings))
}

/// The paths the system step reads (as dpkg lists them): a replayed package keeps their bytes.
pub fn reads(path: &str) -> bool {
    let Some(rel) = path.strip_prefix('/') else {
        return false;
    };
    system_users::SYSUSERS_DIRS
        .iter()
        .chain(&system_units::UNIT_DIRS)
        .chain(&system_units::PRESET_DIRS)
        .any(|d| rel.strip_prefix(d).is_some_and(|r| r.starts_with('/')))
}

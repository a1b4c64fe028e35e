//! A dpkg `status` file read for what it says is installed (a rootfs base's
//! `var/lib/dpkg/status`, for the image's Python): (name, version) pairs, nothing else.

use crate::control;

/// The (name, version) of every package a dpkg `status` file says is installed (`Status:
/// install ok installed`), in file order; paragraphs that do not parse are skipped.
pub fn installed_packages(status: &str) -> Vec<(String, String)> {
    control::paragraphs(status)
        .filter_map(Result::ok)
        .filter(|p| {
            p.get("Status")
                .is_some_and(|s| s.split_whitespace().last() == Some("installed"))
        })
        .filter_map(|p| Some((p.get("Package")?.to_string(), p.get("Version")?.to_string())))
        .collect()
}

#[cfg(test)]
mod tests {
    #[test]
    fn only_installed_packages_are_listed() {
        let status = "Package: libc6\nStatus: install ok installed\nVersion: 2.36-9\n\n\
                      Package: gone\nStatus: deinstall ok config-files\nVersion: 1\n\n\
                      Package: python3.11\nStatus: install ok installed\nArchitecture: amd64\nVersion: 3.11.2-6\n";
        assert_eq!(
            super::installed_packages(status),
            [
                ("libc6".to_string(), "2.36-9".to_string()),
                ("python3.11".to_string(), "3.11.2-6".to_string())
            ]
        );
    }
}

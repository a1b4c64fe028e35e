//! The profile's sections as the plain specs `sources` take: one conversion per spec, so that
//! `sources` never import the profile's types (`gpuimg_apt::PackagesSpec` from `base.apt`,
//! `files::FileSpec` from `files:`, `pypi::RequestSpec` from `python:`, [`Architecture`] from
//! `platform:`).
//!
//! Must never read a file or decide anything: values are carried over as validated, paths
//! resolved against the profile's directory the way the profile resolves them.

use std::path::Path;

use crate::profile::{AptSpec, FileEntry, FindLink, Platform, Profile};
use crate::sources::files::FileSpec;
use crate::sources::Architecture;
use gpuimg_apt::{Mirror, PackagesSpec, RepoSpec};
use gpuimg_pypi::{FindLinkSpec, RequestSpec};

/// The image's architecture.
pub fn architecture(platform: &Platform) -> Architecture {
    Architecture::new(platform.architecture.clone())
}

/// `base.apt`, keyrings resolved against `profile_dir`.
pub fn apt_packages(spec: &AptSpec, profile_dir: &Path) -> PackagesSpec {
    let keyring = |k: &Option<crate::profile::Located<String>>| {
        k.as_ref()
            .map(|p| crate::profile::resolve_path(profile_dir, &p.value))
    };
    PackagesSpec {
        mirror: match spec.mirror.value.as_str() {
            "host" => Mirror::Host,
            url => Mirror::Url(url.to_string()),
        },
        suite: spec.suite.value.clone(),
        components: spec.components.clone(),
        keyring: keyring(&spec.keyring),
        trusted: spec.trusted,
        essential: spec.essential,
        packages: spec.packages.iter().map(|p| p.value.clone()).collect(),
        repositories: spec
            .repositories
            .iter()
            .map(|r| RepoSpec {
                url: r.value.url.value.clone(),
                suite: r.value.suite.value.clone(),
                components: r.value.components.clone(),
                keyring: keyring(&r.value.keyring),
                trusted: r.value.trusted,
            })
            .collect(),
        // A container's root; the node build (a host profile) asks for a booted one.
        system: false,
    }
}

/// `files:`, in profile order.
pub fn files(entries: &[FileEntry]) -> Vec<FileSpec> {
    entries
        .iter()
        .map(|f| FileSpec {
            src: f.src.clone(),
            dst: f.dst.clone(),
            mode: f.mode,
        })
        .collect()
}

/// `python:` (`None` without it), each requirement with where the profile writes it.
pub fn python_request(profile: &Profile) -> Option<RequestSpec> {
    let py = profile.python.as_ref()?;
    let at =
        |l: &crate::profile::Located<String>| format!("{}:{}:{}", profile.file, l.line, l.column);
    Some(RequestSpec {
        packages: py
            .packages
            .iter()
            .map(|p| (p.value.clone(), at(p)))
            .collect(),
        requirements: py.requirements.as_ref().map(|(_, path)| path.clone()),
        context: py.context.clone(),
        index: py.index.as_ref().map(|i| i.value.clone()),
        extra_indexes: py
            .extra_indexes
            .iter()
            .map(|(name, u)| (name.clone(), u.value.clone()))
            .collect(),
        find_links: py
            .find_links
            .iter()
            .map(|f| match f {
                FindLink::Url(u) => FindLinkSpec::Url(u.value.clone()),
                FindLink::Dir(d) => FindLinkSpec::Dir(d.clone()),
            })
            .collect(),
        dir: profile.dir.clone(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load(yaml: &str, dir: &Path) -> Profile {
        crate::profile::parse(yaml, "p.yaml", dir, &|_| None).unwrap()
    }

    #[test]
    fn base_apt_becomes_a_packages_spec_with_keyrings_resolved() {
        let dir = tempfile::tempdir().unwrap();
        let p = load(
            "name: t\nplatform: linux/arm64\nbase:\n  apt:\n    mirror: http://m.invalid/debian/\n    suite: bookworm\n    keyring: keys/d.gpg\n    essential: true\n    packages: [libc6, \"python3 | python3-minimal\"]\n    repositories:\n      - url: http://v.invalid/repo\n        suite: ./\n        trusted: true\n",
            dir.path(),
        );
        let crate::profile::Base::Apt(spec) = &p.base else {
            panic!("{:?}", p.base)
        };
        let got = apt_packages(spec, dir.path());
        assert_eq!(got.mirror, Mirror::Url("http://m.invalid/debian/".into()));
        assert_eq!(got.suite, "bookworm");
        assert_eq!(got.components, ["main"]);
        assert_eq!(got.keyring, Some(dir.path().join("keys/d.gpg")));
        assert!(got.essential && !got.trusted);
        assert_eq!(got.packages, ["libc6", "python3 | python3-minimal"]);
        assert_eq!(
            got.repositories,
            [RepoSpec {
                url: "http://v.invalid/repo".into(),
                suite: "./".into(),
                components: Vec::new(),
                keyring: None,
                trusted: true,
            }]
        );
        assert_eq!(architecture(&p.platform).debian(), "arm64");
        let host = load("name: t\nbase:\n  apt:\n    suite: bookworm\n", dir.path());
        let crate::profile::Base::Apt(spec) = &host.base else {
            panic!("{:?}", host.base)
        };
        assert_eq!(apt_packages(spec, dir.path()).mirror, Mirror::Host);
    }

    #[test]
    fn python_becomes_a_request_spec_with_each_requirement_placed() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("wheels")).unwrap();
        let p = load(
            "name: t\npython:\n  packages: [\"requests>=2\"]\n  index: https://i.invalid/simple\n  extra-indexes: [\"cu=https://x.invalid/cu\"]\n  find-links: [wheels, \"https://l.invalid/links\"]\n",
            dir.path(),
        );
        let got = python_request(&p).unwrap();
        assert_eq!(
            got.packages,
            [("requests>=2".to_string(), "p.yaml:3:14".to_string())]
        );
        assert_eq!(got.index.as_deref(), Some("https://i.invalid/simple"));
        assert_eq!(
            got.extra_indexes,
            [("cu".to_string(), "https://x.invalid/cu".to_string())]
        );
        assert_eq!(got.find_links.len(), 2);
        assert!(matches!(&got.find_links[0], FindLinkSpec::Dir(d) if d.ends_with("wheels")));
        assert_eq!(
            got.find_links[1],
            FindLinkSpec::Url("https://l.invalid/links".into())
        );
        assert!(python_request(&load("name: t\n", dir.path())).is_none());
    }
}

//! Where each file of a wheel goes in the image: the installation scheme of the image's
//! interpreter, from [`ImagePython`] (never from the build host's `sysconfig`).
//!
//! Debian's `posix_local` scheme, which pip uses there: purelib and platlib are both the
//! site directory (`/usr/local/lib/python3.X/dist-packages`), scripts the scripts directory
//! (`/usr/local/bin`), data its parent (`/usr/local`), headers
//! `<data>/include/python3.X/<project>`. Paths here are relative to the image root, without
//! a leading `/`, as `Tree` keeps them.

use gpuimg_pypi::ImagePython;

/// The image directories a wheel installs into.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Scheme {
    /// purelib and platlib.
    pub site: String,
    pub scripts: String,
    pub data: String,
    /// Headers go to `<include>/<project>/`.
    pub include: String,
    /// The image's interpreter, absolute, for `#!` lines.
    pub interpreter: String,
}

/// What an installed file is, for what happens to it after extraction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// In the site directory (a `.py` there may be compiled).
    Lib,
    /// In the scripts directory: always executable, `#!python` rewritten.
    Script,
    /// Headers and data.
    Other,
}

/// Where one archive path goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Placed {
    pub dest: String,
    pub role: Role,
}

impl Scheme {
    /// The scheme of `python`; its paths must be absolute and clean.
    pub fn of(python: &ImagePython) -> Result<Scheme, String> {
        let site = image_dir(&python.site_dir, "site directory")?;
        let scripts = image_dir(&python.scripts_dir, "scripts directory")?;
        let data = match scripts.rsplit_once('/') {
            Some((parent, _)) => parent.to_string(),
            None => {
                return Err(format!(
                    "scripts directory `{}` has no parent",
                    python.scripts_dir
                ))
            }
        };
        image_dir(&python.interpreter, "interpreter")?;
        let (major, minor) = python.version;
        Ok(Scheme {
            include: format!("{data}/include/python{major}.{minor}"),
            site,
            scripts,
            data,
            interpreter: python.interpreter.clone(),
        })
    }

    /// Where the archive path `path` (already checked safe: relative, no `..`) goes, given the
    /// wheel's `.data` directory name and normalised project name; `Ok(None)` for a bare
    /// `.data` or scheme directory, `Err` for an unknown `.data` scheme.
    pub fn place(
        &self,
        path: &str,
        data_dir: &str,
        project: &str,
    ) -> Result<Option<Placed>, &'static str> {
        let Some(rest) = path
            .strip_prefix(data_dir)
            .and_then(|r| r.strip_prefix('/'))
        else {
            return Ok(Some(Placed {
                dest: format!("{}/{path}", self.site),
                role: Role::Lib,
            }));
        };
        let (scheme, inner) = rest.split_once('/').unwrap_or((rest, ""));
        if inner.is_empty() {
            return match scheme {
                "" | "purelib" | "platlib" | "scripts" | "headers" | "data" => Ok(None),
                _ => Err("is in an unknown `.data` scheme (the wheel spec knows purelib, platlib, scripts, headers and data)"),
            };
        }
        let (dest, role) = match scheme {
            "purelib" | "platlib" => (format!("{}/{inner}", self.site), Role::Lib),
            "scripts" => (format!("{}/{inner}", self.scripts), Role::Script),
            "headers" => (format!("{}/{project}/{inner}", self.include), Role::Other),
            "data" => (format!("{}/{inner}", self.data), Role::Other),
            _ => return Err("is in an unknown `.data` scheme (the wheel spec knows purelib, platlib, scripts, headers and data)"),
        };
        Ok(Some(Placed { dest, role }))
    }

    /// `dest` as RECORD names it: relative to the site directory (`../../../bin/x` for a
    /// script), as pip writes it.
    pub fn record_path(&self, dest: &str) -> String {
        relative(&self.site, dest)
    }
}

/// An absolute, clean image path as a tree path (no leading `/`).
fn image_dir(p: &str, what: &str) -> Result<String, String> {
    let rel = p
        .strip_prefix('/')
        .ok_or_else(|| format!("the {what} `{p}` is not absolute"))?;
    if rel.is_empty()
        || rel
            .split('/')
            .any(|c| c.is_empty() || c == "." || c == "..")
    {
        return Err(format!("the {what} `{p}` is not a clean path"));
    }
    Ok(rel.to_string())
}

/// The path of `to` relative to the directory `from` (both relative to one root).
pub fn relative(from: &str, to: &str) -> String {
    let f: Vec<&str> = from.split('/').filter(|c| !c.is_empty()).collect();
    let t: Vec<&str> = to.split('/').filter(|c| !c.is_empty()).collect();
    let common = f.iter().zip(&t).take_while(|(a, b)| a == b).count();
    let mut parts: Vec<&str> = vec![".."; f.len() - common];
    parts.extend(&t[common..]);
    parts.join("/")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bookworm() -> ImagePython {
        ImagePython {
            version: (3, 11),
            full_version: "3.11.2".into(),
            interpreter: "/usr/bin/python3.11".into(),
            site_dir: "/usr/local/lib/python3.11/dist-packages".into(),
            scripts_dir: "/usr/local/bin".into(),
            glibc: (2, 36),
            machine: "x86_64".into(),
        }
    }

    #[test]
    fn every_scheme_goes_where_debian_pip_puts_it() {
        let s = Scheme::of(&bookworm()).unwrap();
        let d = "pkg-1.0.data";
        let place = |p: &str| s.place(p, d, "pkg").unwrap().map(|p| (p.dest, p.role));
        let site = "usr/local/lib/python3.11/dist-packages";
        assert_eq!(
            place("pkg/a.py"),
            Some((format!("{site}/pkg/a.py"), Role::Lib))
        );
        assert_eq!(
            place("pkg-1.0.dist-info/METADATA"),
            Some((format!("{site}/pkg-1.0.dist-info/METADATA"), Role::Lib))
        );
        assert_eq!(
            place("pkg-1.0.data/platlib/x.so"),
            Some((format!("{site}/x.so"), Role::Lib))
        );
        assert_eq!(
            place("pkg-1.0.data/purelib/y/z.py"),
            Some((format!("{site}/y/z.py"), Role::Lib))
        );
        assert_eq!(
            place("pkg-1.0.data/scripts/tool"),
            Some(("usr/local/bin/tool".into(), Role::Script))
        );
        assert_eq!(
            place("pkg-1.0.data/headers/pkg.h"),
            Some(("usr/local/include/python3.11/pkg/pkg.h".into(), Role::Other))
        );
        assert_eq!(
            place("pkg-1.0.data/data/share/man/man1/tool.1"),
            Some(("usr/local/share/man/man1/tool.1".into(), Role::Other))
        );
        assert_eq!(place("pkg-1.0.data/scripts"), None);
        assert_eq!(place("pkg-1.0.data/"), None);
        assert!(s.place("pkg-1.0.data/etc/passwd", d, "pkg").is_err());
        assert!(s.place("pkg-1.0.data/etc", d, "pkg").is_err());
        assert_eq!(
            place("pkg-1.0.datax/f"),
            Some((format!("{site}/pkg-1.0.datax/f"), Role::Lib)),
            "only the wheel's own .data directory is special"
        );
    }

    #[test]
    fn record_paths_are_relative_to_the_site_directory() {
        let s = Scheme::of(&bookworm()).unwrap();
        assert_eq!(
            s.record_path("usr/local/lib/python3.11/dist-packages/pkg/a.py"),
            "pkg/a.py"
        );
        assert_eq!(s.record_path("usr/local/bin/tool"), "../../../bin/tool");
        assert_eq!(
            s.record_path("usr/local/include/python3.11/pkg/pkg.h"),
            "../../../include/python3.11/pkg/pkg.h"
        );
        assert_eq!(relative("a/b", "c"), "../../c");
    }

    #[test]
    fn paths_that_are_not_absolute_and_clean_are_refused() {
        for (site, scripts, interp) in [
            ("usr/lib", "/usr/local/bin", "/usr/bin/python3"),
            ("/usr/../lib", "/usr/local/bin", "/usr/bin/python3"),
            ("/usr/lib", "/bin", "/usr/bin/python3"),
            ("/usr/lib", "/usr/local/bin", "python3"),
        ] {
            let mut p = bookworm();
            p.site_dir = site.into();
            p.scripts_dir = scripts.into();
            p.interpreter = interp.into();
            assert!(Scheme::of(&p).is_err(), "{site} {scripts} {interp}");
        }
    }
}

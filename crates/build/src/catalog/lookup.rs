//! Lookups over the merged catalog: GPUs by name or alias, the closest GPU name, sources,
//! the driver branch of a version, the cuDNN record that covers a pinned version.

use gpuimg_expect::version::Version;

use super::{Catalog, CcSupport, CudaFamily, CudnnRelease, DriverBranch, Gpu, Source, System};

/// `"H100 SXM"`, `"h100-sxm"` and `"H100_SXM"` name the same GPU.
fn norm(s: &str) -> String {
    s.chars()
        .filter(|c| !matches!(c, ' ' | '-' | '_'))
        .flat_map(char::to_lowercase)
        .collect()
}

impl Catalog {
    /// A GPU by name or alias (case, spaces, `-` and `_` ignored).
    pub fn gpu(&self, name: &str) -> Option<&Gpu> {
        let n = norm(name);
        self.gpus
            .iter()
            .find(|g| norm(&g.name) == n || g.aliases.iter().any(|a| norm(a) == n))
    }

    /// A GPU system by name or alias (as [`Catalog::gpu`] matches).
    pub fn system(&self, name: &str) -> Option<&System> {
        let n = norm(name);
        self.systems
            .iter()
            .find(|s| norm(&s.name) == n || s.aliases.iter().any(|a| norm(a) == n))
    }

    /// The catalog name closest to `name` (for "did you mean").
    pub fn closest_gpu(&self, name: &str) -> Option<&str> {
        let n = norm(name);
        self.gpus
            .iter()
            .flat_map(|g| {
                std::iter::once((g, &g.name)).chain(g.aliases.iter().map(move |a| (g, a)))
            })
            .map(|(g, a)| (g, strsim::normalized_damerau_levenshtein(&n, &norm(a))))
            .filter(|(_, s)| *s >= 0.4)
            .max_by(|a, b| a.1.total_cmp(&b.1))
            .map(|(g, _)| g.name.as_str())
    }

    pub fn source(&self, id: &str) -> Option<&Source> {
        self.sources.iter().find(|s| s.id == id)
    }

    pub fn family(&self, major: u64) -> Option<&CudaFamily> {
        self.cuda_families.iter().find(|f| f.major == major)
    }

    pub fn cc_support(&self, cc: &Version) -> Option<&CcSupport> {
        self.compute_capabilities.iter().find(|s| &s.cc == cc)
    }

    /// The branch a driver version belongs to (the newest branch not above it).
    pub fn branch_of(&self, driver: &Version) -> Option<&DriverBranch> {
        self.drivers
            .iter()
            .rev()
            .find(|b| driver.major() >= b.branch)
    }

    /// The version where the branch after `b` starts (none: `b` is the newest).
    pub fn next_branch(&self, b: &DriverBranch) -> Option<u64> {
        self.drivers
            .iter()
            .map(|d| d.branch)
            .find(|x| *x > b.branch)
    }

    /// The cuDNN record for `version`: the same version, or the longest record that is a prefix of it.
    pub fn cudnn_record(&self, version: &Version) -> Option<&CudnnRelease> {
        self.cudnn
            .iter()
            .filter(|r| {
                version.starts_with(&r.version)
                    && r.version.fields().len() <= version.fields().len()
            })
            .max_by_key(|r| r.version.fields().len())
    }
}

//! The image's platform against the GPUs it must run on: a GPU that comes only with one CPU
//! architecture (the catalog's `cpu`: GH200, GB200, GB300, GB10 are arm64) cannot run an image
//! built for another, whatever the stack.
//!
//! A GPU without `cpu` runs with any platform; a request without a platform (`catalog why`)
//! checks nothing. Pure: reads the request only.

use gpuimg_expect::ImagePlatform;

use super::fact::{Conflict, Fact};
use super::request::Request;

/// Every listed GPU's hosts can run an image for the request's platform, or the conflict
/// naming the GPUs that cannot (each with its source) and the platform.
pub(super) fn gpus_fit(req: &Request) -> Result<(), Conflict> {
    let Some(platform) = &req.platform else {
        return Ok(());
    };
    let mut facts: Vec<Fact> = Vec::new();
    let mut names: Vec<&str> = Vec::new();
    for gpu in req.gpus.iter().filter_map(|g| g.gpu()) {
        let Some(cpu) = gpu.cpu.as_ref().filter(|c| c.arch != platform.architecture) else {
            continue;
        };
        facts.push(
            Fact::new(
                format!("{} comes only in {} hosts", gpu.name, cpu.arch),
                &cpu.source,
            )
            .unverified_if(gpu.unverified.iter().any(|u| u == "cpu")),
        );
        names.push(&gpu.name);
    }
    if names.is_empty() {
        return Ok(());
    }
    facts.push(Fact::profile(format!("platform is `{platform}`")));
    Err(Conflict::new(
        facts,
        format!("{} cannot run an image for {platform}", names.join(" and ")),
    ))
}

/// The platforms (the request's OS, each listed GPU's CPU architecture) that a hint may offer
/// instead of the request's, in the order the GPUs are listed.
pub(super) fn alternatives(req: &Request) -> Vec<ImagePlatform> {
    let Some(platform) = &req.platform else {
        return Vec::new();
    };
    let mut out: Vec<ImagePlatform> = Vec::new();
    for cpu in req.gpus.iter().filter_map(|g| g.gpu()?.cpu.as_ref()) {
        let p = ImagePlatform {
            os: platform.os.clone(),
            architecture: cpu.arch.clone(),
        };
        if p != *platform && !out.contains(&p) {
            out.push(p);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use crate::catalog::Catalog;
    use crate::resolve::{lookup_gpu, resolve_request, Request, ResolveError};
    use gpuimg_expect::ImagePlatform;

    fn request(c: &Catalog, gpus: &[&str], arch: Option<&str>) -> Request {
        Request {
            gpus: gpus
                .iter()
                .map(|g| lookup_gpu(c, g).expect("a catalog GPU"))
                .collect(),
            platform: arch.map(|a| ImagePlatform {
                os: "linux".into(),
                architecture: a.into(),
            }),
            ..Request::default()
        }
    }

    fn no(c: &Catalog, req: &Request) -> String {
        match resolve_request(req, c) {
            Err(ResolveError::Incompatible(e)) => e.to_string(),
            other => panic!("want a no, got {other:?}"),
        }
    }

    #[test]
    fn a_grace_gpu_on_amd64_is_a_no_with_the_fact_its_source_and_the_platform_that_works() {
        let c = Catalog::embedded().expect("embedded catalog");
        assert_eq!(
            no(&c, &request(&c, &["GH200"], Some("amd64"))),
            "nothing in the catalog satisfies GPUs GH200 with platform `linux/amd64`\n  \
             - the host: GH200 comes only in arm64 hosts [nv-gh200]; platform is `linux/amd64` \
             [profile]; so GH200 cannot run an image for linux/amd64\n\
             hint: `platform: linux/arm64` would work"
        );
        for gpu in ["GH200", "GB200", "GB300", "GB10"] {
            assert!(
                resolve_request(&request(&c, &[gpu], Some("arm64")), &c).is_ok(),
                "{gpu} on arm64"
            );
            let said = no(&c, &request(&c, &[gpu], Some("amd64")));
            assert!(
                said.contains(&format!("{gpu} comes only in arm64 hosts")),
                "{said}"
            );
        }
    }

    #[test]
    fn a_mixed_list_names_only_the_grace_gpu() {
        let c = Catalog::embedded().expect("embedded catalog");
        let said = no(&c, &request(&c, &["H100", "GH200"], Some("amd64")));
        assert_eq!(
            said,
            "nothing in the catalog satisfies GPUs H100, GH200 with platform `linux/amd64`\n  \
             - the host: GH200 comes only in arm64 hosts [nv-gh200]; platform is `linux/amd64` \
             [profile]; so GH200 cannot run an image for linux/amd64\n\
             hint: `platform: linux/arm64` would work\n\
             hint: leaving `GH200` out of host.gpus would work"
        );
        // Two Grace GPUs are named together.
        let said = no(&c, &request(&c, &["GB200", "H200", "GH200"], Some("amd64")));
        assert!(
            said.contains("so GB200 and GH200 cannot run an image for linux/amd64"),
            "{said}"
        );
    }

    #[test]
    fn gpus_without_a_cpu_and_requests_without_a_platform_are_not_checked() {
        let c = Catalog::embedded().expect("embedded catalog");
        for arch in ["amd64", "arm64"] {
            let r = resolve_request(&request(&c, &["H100", "H200", "B200"], Some(arch)), &c);
            assert!(r.is_ok(), "{arch}: {r:?}");
        }
        // `catalog why` asks without a platform.
        assert!(resolve_request(&request(&c, &["GH200"], None), &c).is_ok());
    }
}

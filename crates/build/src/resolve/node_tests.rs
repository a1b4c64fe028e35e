//! The node resolver on an offer written here (the shape of bookworm + bookworm-security: the
//! open source older than the proprietary one, two 6.1 cloud kernels on either side of the
//! `pci_resize_resource` change) and the embedded catalog: known build failures refuse a
//! kernel × source pair with their sources, a version pin takes the newest kernel none rules
//! out, `any` gives way to the flavour that builds for the newest kernel; and the rules'
//! verdicts as `catalog check-host` reads them.

use std::convert::Infallible;

use super::*;
use crate::catalog::Catalog;
use crate::resolve::node_rules::Rule;

fn offer(name: &str, version: &str, depends: &[&str]) -> NodeOffer {
    NodeOffer {
        name: name.into(),
        version: version.into(),
        upstream: crate::lock::upstream_release(version),
        depends: depends.iter().map(|d| d.to_string()).collect(),
    }
}

/// Newest first per name, as the caller gives them.
fn bookworm() -> Vec<NodeOffer> {
    let mut v = vec![
        offer(OPEN_SOURCE, "535.261.03-1", &[]),
        offer(PROPRIETARY_SOURCE, "535.309.01-0+deb12u1", &[]),
        offer(PROPRIETARY_SOURCE, "535.261.03-1", &[]),
        offer(USER_SPACE, "535.309.01-0+deb12u1", &[]),
        offer(USER_SPACE, "535.261.03-1", &[]),
        offer(GSP_FIRMWARE, "535.309.01-0+deb12u1", &[]),
        offer(GSP_FIRMWARE, "535.261.03-1", &[]),
        offer(
            "linux-image-cloud-amd64",
            "6.1.192-3",
            &["linux-image-6.1.0-57-cloud-amd64"],
        ),
    ];
    for (abi, deb) in [
        ("6.1.0-57-cloud-amd64", "6.1.192-3"),
        ("6.1.0-50-cloud-amd64", "6.1.176-1"),
    ] {
        v.push(offer(&format!("linux-image-{abi}"), deb, &[]));
        v.push(offer(&format!("linux-headers-{abi}"), deb, &[]));
    }
    v
}

fn request<'a>(
    catalog: &'a Catalog,
    offered: &'a [NodeOffer],
    gpu: &str,
    module: KernelModule,
    kernel: KernelPin,
) -> NodeRequest<'a> {
    NodeRequest {
        catalog,
        gpus: vec![catalog.gpu(gpu).unwrap()],
        driver: None,
        kernel,
        module,
        offered,
        system: None,
    }
}

fn six_one() -> KernelPin {
    KernelPin::Version {
        constraint: "6.1".parse().unwrap(),
        text: "6.1".into(),
        flavour: "cloud-amd64".into(),
    }
}

fn resolve(req: &NodeRequest<'_>) -> Result<NodeResolution, Explanation> {
    pick(req, |d| {
        Ok::<_, Infallible>(Exclusive {
            source: format!("{} {}'s dkms.conf", d.source, d.source_version),
            ..Exclusive::default()
        })
    })
    .unwrap()
}

fn text(facts: &[Fact]) -> String {
    facts
        .iter()
        .map(Fact::render)
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn a_known_build_failure_refuses_an_exact_kernel_citing_its_sources() {
    let c = Catalog::embedded().unwrap();
    let offered = bookworm();
    let req = request(
        &c,
        &offered,
        "H100",
        KernelModule::Open,
        KernelPin::Abi("6.1.0-57-cloud-amd64".into()),
    );
    let no = resolve(&req).unwrap_err();
    assert!(no.summary.contains("6.1.0-57-cloud-amd64"), "{no:?}");
    let [reason] = no.reasons.as_slice() else {
        panic!("{no:?}")
    };
    let facts = text(&reason.facts);
    assert!(
        facts.contains("`nvidia-open-kernel-dkms` 535.261.03 does not compile against Linux")
            && facts.contains("pci_resize_resource")
            && facts.contains("`6.1.0-57-cloud-amd64` (Linux 6.1.192)"),
        "{facts}"
    );
    let cited = &reason.facts.last().unwrap().sources;
    for id in ["gpuimg-node-build-measured", "nv-ogkm-1272", "flatcar-4205"] {
        assert!(cited.iter().any(|s| s == id), "{cited:?}");
    }
    // The proprietary source is not covered: the same kernel resolves.
    let req = request(
        &c,
        &offered,
        "H100",
        KernelModule::Proprietary,
        KernelPin::Abi("6.1.0-57-cloud-amd64".into()),
    );
    let node = resolve(&req).unwrap();
    assert_eq!(node.source_version, "535.309.01-0+deb12u1");
    assert!(node.passed_over.is_empty());
}

#[test]
fn a_version_pin_takes_the_newest_kernel_no_failure_rules_out_and_says_why() {
    let c = Catalog::embedded().unwrap();
    let offered = bookworm();
    let req = request(&c, &offered, "H100", KernelModule::Open, six_one());
    let node = resolve(&req).unwrap();
    assert_eq!(
        (node.kernel_abi.as_str(), node.source.as_str()),
        ("6.1.0-50-cloud-amd64", OPEN_SOURCE)
    );
    let facts = text(&node.passed_over);
    assert!(
        facts.contains("`6.1.0-57-cloud-amd64` (Linux 6.1.192)")
            && facts.contains("does not compile"),
        "{facts}"
    );
}

#[test]
fn any_gives_way_to_the_flavour_that_builds_for_the_newest_kernel() {
    let c = Catalog::embedded().unwrap();
    let offered = bookworm();
    let req = request(&c, &offered, "H100", KernelModule::Any, six_one());
    let node = resolve(&req).unwrap();
    assert_eq!(node.flavour, ModuleFlavour::Proprietary);
    assert_eq!(node.kernel_abi, "6.1.0-57-cloud-amd64");
    assert_eq!(node.source_version, "535.309.01-0+deb12u1");
    let facts = text(&node.passed_over);
    assert!(
        facts.starts_with("`kernel_module: any`: the proprietary module builds for `6.1.0-57-cloud-amd64`, newer than `6.1.0-50-cloud-amd64`")
            && facts.contains("does not compile"),
        "{facts}"
    );
    // Where every kernel the pin admits is out for the open module, `any` takes the other.
    let only_new: Vec<NodeOffer> = offered
        .iter()
        .filter(|o| !o.name.contains("6.1.0-50"))
        .cloned()
        .collect();
    let req = request(&c, &only_new, "H100", KernelModule::Any, six_one());
    assert_eq!(resolve(&req).unwrap().flavour, ModuleFlavour::Proprietary);
    // The open module pinned: "no", naming the source's failure for each kernel.
    let req = request(&c, &only_new, "H100", KernelModule::Open, six_one());
    let no = resolve(&req).unwrap_err();
    assert_eq!(
        no.reasons[0].candidate,
        "nvidia-open-kernel-dkms 535.261.03-1 on a `cloud-amd64` kernel `6.1`"
    );
    assert!(no.reasons[0].because.contains("does not compile"), "{no:?}");
}

#[test]
fn a_kernel_the_repositories_lack_is_one_reason_not_one_per_driver() {
    let c = Catalog::embedded().unwrap();
    let offered = bookworm();
    let req = request(
        &c,
        &offered,
        "V100",
        KernelModule::Any,
        KernelPin::Abi("6.1.0-999-cloud-amd64".into()),
    );
    let no = resolve(&req).unwrap_err();
    assert_eq!(no.reasons.len(), 1, "{no:?}");
    assert!(no.reasons[0].because.contains("no such `linux-image-"));
}

#[test]
fn the_driver_rules_are_the_ones_check_host_reads() {
    let c = Catalog::embedded().unwrap();
    let offered = bookworm();
    // V100 on the open module: the GPU's rule, as before.
    let req = request(&c, &offered, "V100", KernelModule::Open, six_one());
    let no = resolve(&req).unwrap_err();
    assert!(
        no.reasons[0]
            .because
            .contains("V100 is driven by the proprietary module only"),
        "{no:?}"
    );
    // A running host's subject: every rule that applies, held or not.
    let h100 = c.gpu("H100").unwrap();
    let gpus = [h100];
    let v: Version = "535.261.03".parse().unwrap();
    let up: Version = "6.1.192".parse().unwrap();
    let s = Subject {
        driver: &v,
        flavour: ModuleFlavour::Open,
        gpus: &gpus,
        kernel: Some(Kernel {
            release: "6.1.0-57-cloud-amd64",
            upstream: Some(&up),
        }),
    };
    let got: Vec<(Rule, bool)> = node_rules::verdicts(&c, &s)
        .iter()
        .map(|x| (x.rule, x.holds))
        .collect();
    assert_eq!(
        got,
        [
            (Rule::GpuModule, true),
            (Rule::GpuMinDriver, true),
            (Rule::GpuOpenMinDriver, true),
            (Rule::BranchMinKernel, true),
            (Rule::KnownBuildFailure, false),
        ]
    );
    // A kernel without its upstream version (Ubuntu's `uname -r`): the branch minimum from
    // the release's numbers, known failures not decided.
    let s = Subject {
        kernel: Some(Kernel {
            release: "3.2.0-60-generic",
            upstream: None,
        }),
        ..s
    };
    let got: Vec<(Rule, bool)> = node_rules::verdicts(&c, &s)
        .iter()
        .filter(|x| x.rule.of_kernel())
        .map(|x| (x.rule, x.holds))
        .collect();
    assert_eq!(
        got,
        [
            (Rule::BranchMinKernel, false),
            (Rule::KnownBuildFailure, true)
        ]
    );
}

#[test]
fn an_nvswitch_system_needs_the_fabric_manager_at_the_drivers_version() {
    let catalog = Catalog::embedded().unwrap();
    let hgx = catalog.system("HGX H100 8-GPU").unwrap();
    let mut offered = bookworm();
    let mut req = request(
        &catalog,
        &offered,
        "H100",
        KernelModule::Proprietary,
        six_one(),
    );
    req.system = Some(hgx);
    // Debian has no fabric manager: a "no" naming it, the system's fact cited.
    let no = resolve(&req).unwrap_err().to_string();
    assert!(no.contains("nvidia-fabricmanager-535"), "{no}");
    assert!(no.contains("NVSwitch"), "{no}");
    assert!(no.contains("nv-fm-guide"), "{no}");
    // Offered only for another driver: still no; at exactly the driver's version: taken.
    offered.push(offer("nvidia-fabricmanager-535", "535.288.01-1", &[]));
    let mut req = request(
        &catalog,
        &offered,
        "H100",
        KernelModule::Proprietary,
        six_one(),
    );
    req.system = Some(hgx);
    assert!(resolve(&req).is_err());
    offered.insert(0, offer("nvidia-fabricmanager-535", "535.309.01-1", &[]));
    let mut req = request(
        &catalog,
        &offered,
        "H100",
        KernelModule::Proprietary,
        six_one(),
    );
    req.system = Some(hgx);
    let node = resolve(&req).unwrap();
    assert_eq!(
        node.fabric_manager,
        Some(("nvidia-fabricmanager-535".into(), "535.309.01-1".into()))
    );
    // Without the system, no fabric manager is asked for.
    let req = request(
        &catalog,
        &offered,
        "H100",
        KernelModule::Proprietary,
        six_one(),
    );
    assert_eq!(resolve(&req).unwrap().fabric_manager, None);
}

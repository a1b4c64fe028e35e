//! NVML's and CUDA's views of each GPU, cross-checked: one `nvml-cuda[…]` check per device.
//!
//! Pure (measurements and environment in, checks out). A CUDA device is matched to an NVML GPU
//! by UUID (`cuDeviceGetUuid_v2` bytes against `nvmlDeviceGetUUID`), to a MIG device by its
//! `MIG-` UUID, and only when no UUID matches, by PCI bus id (`cuDeviceGetPCIBusId` against
//! `nvmlDeviceGetPciInfo_v3`). A matched pair must agree on:
//! - the name (a MIG device's CUDA name may also be the parent's name with a MIG suffix);
//! - the compute capability (a MIG device has its parent's);
//! - the total memory, within [`MEMORY_TOLERANCE_PERCENT`] % of NVML's value or
//!   [`MEMORY_TOLERANCE_MIB`] MiB, whichever is larger: CUDA's total leaves out what the driver
//!   reserves (about 0.5 % on an H100 or H200, a few hundred MiB on small cards), while a wrong
//!   device differs by many GiB. A MIG device is compared with the MIG device's memory.
//!
//! A disagreement fails and names both values. A GPU that one API shows and the other does not
//! fails too, except an NVML GPU hidden from CUDA by `CUDA_VISIBLE_DEVICES` (a warning) and a
//! GPU in MIG mode, whose MIG devices CUDA may enumerate only in part (one per process).
//! When `nvmlInit` or `cuInit` did not succeed there is nothing to compare: one `not-measured`
//! check says which.

use std::collections::BTreeMap;

use super::cause;
use super::check::{Check, Status};
use super::data::{CudaDeviceResult, GpuInfo, Measurements, MigDevice};

/// Memory tolerance, percent of NVML's total (see the module doc).
pub const MEMORY_TOLERANCE_PERCENT: u64 = 3;
/// Memory tolerance floor in MiB (see the module doc).
pub const MEMORY_TOLERANCE_MIB: u64 = 1024;

/// `dddd:bb:dd.f` in lower-case hex from NVML's (`00000000:19:00.0`) or CUDA's (`0000:19:00.0`)
/// spelling; `None` for anything else.
pub fn normalize_pci_bus_id(s: &str) -> Option<String> {
    let s = s.trim();
    let (rest, function) = s.rsplit_once('.')?;
    let parts: Vec<&str> = rest.split(':').collect();
    let (domain, bus, device) = match parts.as_slice() {
        [d, b, dev] => (*d, *b, *dev),
        [b, dev] => ("0", *b, *dev),
        _ => return None,
    };
    let hex = |t: &str, max: u64| {
        (!t.is_empty() && t.len() <= 8)
            .then(|| u64::from_str_radix(t, 16).ok())
            .flatten()
            .filter(|v| *v <= max)
    };
    Some(format!(
        "{:04x}:{:02x}:{:02x}.{:x}",
        hex(domain, 0xffff_ffff)?,
        hex(bus, 0xff)?,
        hex(device, 0x1f)?,
        hex(function, 0x7)?
    ))
}

/// The 32 hex digits of a `GPU-…` / `MIG-…` UUID, lower-case, without dashes.
fn uuid_body(s: &str) -> String {
    let t = s
        .strip_prefix("GPU-")
        .or_else(|| s.strip_prefix("MIG-"))
        .unwrap_or(s);
    t.chars()
        .filter(|c| *c != '-')
        .map(|c| c.to_ascii_lowercase())
        .collect()
}

fn same_uuid(a: &str, b: &str) -> bool {
    let (a, b) = (uuid_body(a), uuid_body(b));
    !a.is_empty() && a == b
}

/// Give a CUDA device whose UUID bytes are an NVML MIG device's the `MIG-` spelling.
pub fn respell_mig_uuids(m: &mut Measurements) {
    for d in &mut m.cuda_devices {
        let mig = m
            .gpus
            .iter()
            .flat_map(|g| &g.mig_devices)
            .find(|x| x.uuid.starts_with("MIG-") && same_uuid(&x.uuid, &d.uuid));
        if let Some(x) = mig {
            d.uuid = x.uuid.clone();
        }
    }
}

/// Whether two totals agree within the stated tolerance.
pub fn memory_agrees(nvml_mib: u64, cuda_mib: u64) -> bool {
    let margin = (nvml_mib * MEMORY_TOLERANCE_PERCENT / 100).max(MEMORY_TOLERANCE_MIB);
    nvml_mib.abs_diff(cuda_mib) <= margin
}

/// How a CUDA device was paired with an NVML GPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MatchedBy {
    Uuid,
    MigUuid,
    PciBusId,
}

impl MatchedBy {
    fn as_str(self) -> &'static str {
        match self {
            MatchedBy::Uuid => "by UUID",
            MatchedBy::MigUuid => "by MIG UUID",
            MatchedBy::PciBusId => "by PCI bus id",
        }
    }
}

/// One CUDA device and what NVML says about it.
#[derive(Debug, Clone, Copy)]
pub struct Pair<'a> {
    pub gpu: &'a GpuInfo,
    pub mig: Option<&'a MigDevice>,
    pub cuda: &'a CudaDeviceResult,
    pub by: MatchedBy,
}

/// Pair every CUDA device with an NVML GPU (or MIG device); the unmatched CUDA devices second.
pub fn pair<'a>(
    gpus: &'a [GpuInfo],
    cuda: &'a [CudaDeviceResult],
) -> (Vec<Pair<'a>>, Vec<&'a CudaDeviceResult>) {
    let mut pairs = Vec::new();
    let mut unmatched = Vec::new();
    let mut pending = Vec::new();
    for d in cuda {
        if let Some(g) = gpus.iter().find(|g| same_uuid(&g.uuid, &d.uuid)) {
            pairs.push(Pair {
                gpu: g,
                mig: None,
                cuda: d,
                by: MatchedBy::Uuid,
            });
            continue;
        }
        let mig = gpus.iter().find_map(|g| {
            g.mig_devices
                .iter()
                .find(|x| same_uuid(&x.uuid, &d.uuid))
                .map(|x| (g, x))
        });
        match mig {
            Some((g, x)) => pairs.push(Pair {
                gpu: g,
                mig: Some(x),
                cuda: d,
                by: MatchedBy::MigUuid,
            }),
            None => pending.push(d),
        }
    }
    for d in pending {
        let taken = |g: &GpuInfo| {
            g.mig_enabled != Some(true) && pairs.iter().any(|p| std::ptr::eq(p.gpu, g))
        };
        let by_bus = d.pci_bus_id.as_ref().and_then(|bus| {
            gpus.iter()
                .find(|g| g.pci_bus_id.as_ref() == Some(bus) && !taken(g))
        });
        match by_bus {
            Some(g) => {
                // A MIG parent with one MIG device: that is the one CUDA shows.
                let mig = match g.mig_devices.as_slice() {
                    [only] if g.mig_enabled == Some(true) => Some(only),
                    _ => None,
                };
                pairs.push(Pair {
                    gpu: g,
                    mig,
                    cuda: d,
                    by: MatchedBy::PciBusId,
                });
            }
            None => unmatched.push(d),
        }
    }
    (pairs, unmatched)
}

fn gib(mib: u64) -> String {
    format!("{mib} MiB ({:.1} GiB)", mib as f64 / 1024.0)
}

fn or_unknown(s: &str) -> &str {
    if s.is_empty() {
        "?"
    } else {
        s
    }
}

fn names_agree(p: &Pair<'_>) -> bool {
    let norm = |s: &str| s.split_whitespace().collect::<Vec<_>>().join(" ");
    let (cuda, parent) = (norm(&p.cuda.name), norm(&p.gpu.name));
    if cuda == parent {
        return true;
    }
    let is_mig = p.mig.is_some() || p.gpu.mig_enabled == Some(true);
    is_mig && (p.mig.is_some_and(|x| norm(&x.name) == cuda) || cuda.starts_with(&parent))
}

/// The check of one matched pair.
fn compare(p: &Pair<'_>) -> Check {
    let g = p.gpu;
    let d = p.cuda;
    let (name, who) = match (p.mig, g.mig_enabled == Some(true)) {
        (Some(x), _) => (
            format!("nvml-cuda[{}/mig{}]", g.index, x.index),
            format!("GPU {} MIG {} ({})", g.index, x.index, x.uuid),
        ),
        (None, true) => (
            format!("nvml-cuda[{}/cuda{}]", g.index, d.ordinal),
            format!("GPU {} ({}), CUDA device {}", g.index, g.uuid, d.ordinal),
        ),
        (None, false) => (
            format!("nvml-cuda[{}]", g.index),
            format!("GPU {} ({})", g.index, or_unknown(&g.uuid)),
        ),
    };
    // The memory to compare with: the MIG device's, or the whole GPU's; unknown for a MIG
    // parent whose instance is not known.
    let nvml_mem = match (p.mig, g.mig_enabled == Some(true)) {
        (Some(x), _) => Some(x.memory_total_mib),
        (None, true) => None,
        (None, false) => Some(g.memory_total_mib),
    }
    .filter(|mib| *mib > 0);
    let mut differ = Vec::new();
    let mut unknown = Vec::new();
    if g.name.is_empty() || d.name.is_empty() {
        unknown.push("name");
    } else if !names_agree(p) {
        differ.push(format!(
            "NVML says name `{}`, CUDA says `{}`",
            p.mig.map_or(g.name.as_str(), |x| x.name.as_str()),
            d.name
        ));
    }
    if g.compute_capability.is_empty() || d.compute_capability.is_empty() {
        unknown.push("compute capability");
    } else if g.compute_capability != d.compute_capability {
        differ.push(format!(
            "NVML says compute capability {}, CUDA says {}",
            g.compute_capability, d.compute_capability
        ));
    }
    match (nvml_mem, d.memory_total_mib) {
        (Some(n), Some(c)) if !memory_agrees(n, c) => differ.push(format!(
            "NVML says {}, CUDA says {} (tolerance {MEMORY_TOLERANCE_PERCENT} % or {MEMORY_TOLERANCE_MIB} MiB)",
            gib(n),
            gib(c)
        )),
        (Some(_), Some(_)) => {}
        _ => unknown.push("memory"),
    }
    if p.by == MatchedBy::PciBusId
        && p.mig.is_none()
        && g.mig_enabled != Some(true)
        && !g.uuid.is_empty()
        && !d.uuid.is_empty()
    {
        differ.push(format!("NVML says UUID {}, CUDA says {}", g.uuid, d.uuid));
    }
    let mem = |v: Option<u64>| v.map_or("? MiB".to_string(), |m| format!("{m} MiB"));
    let c = Check::new(
        name,
        if differ.is_empty() {
            Status::Pass
        } else {
            Status::Fail
        },
    )
    .expected(format!(
        "NVML: {}, cc {}, {}",
        or_unknown(p.mig.map_or(g.name.as_str(), |x| x.name.as_str())),
        or_unknown(&g.compute_capability),
        mem(nvml_mem)
    ))
    .measured(format!(
        "CUDA {}: {}, cc {}, {}, {}",
        d.ordinal,
        or_unknown(&d.name),
        or_unknown(&d.compute_capability),
        mem(d.memory_total_mib),
        p.by.as_str()
    ));
    let not_compared = if unknown.is_empty() {
        String::new()
    } else {
        format!(" ({} not compared: not reported)", unknown.join(", "))
    };
    if differ.is_empty() {
        c.detail(format!(
            "{who}: NVML and CUDA agree{not_compared}; memory tolerance {MEMORY_TOLERANCE_PERCENT} % or {MEMORY_TOLERANCE_MIB} MiB"
        ))
    } else {
        c.detail(format!("{who}: {}{not_compared}", differ.join("; ")))
    }
}

/// Every `nvml-cuda[…]` check, in NVML order, then CUDA devices NVML does not show.
pub fn crosscheck(m: &Measurements, env: &BTreeMap<String, String>) -> Vec<Check> {
    if let Some(why) = cause::cuda(m).or_else(|| cause::nvml(m)) {
        return vec![Check::not_measured("nvml-cuda", why)];
    }
    let (pairs, unmatched) = pair(&m.gpus, &m.cuda_devices);
    let mut out = Vec::new();
    for g in &m.gpus {
        let mine: Vec<&Pair<'_>> = pairs.iter().filter(|p| std::ptr::eq(p.gpu, g)).collect();
        if mine.is_empty() {
            out.push(unseen_by_cuda(g, env));
        }
        out.extend(mine.iter().map(|p| compare(p)));
    }
    for d in unmatched {
        out.push(
            Check::new(format!("nvml-cuda[cuda{}]", d.ordinal), Status::Fail)
                .expected("a GPU NVML shows")
                .measured(format!(
                    "CUDA {}: {} ({}, bus {})",
                    d.ordinal,
                    or_unknown(&d.name),
                    or_unknown(&d.uuid),
                    d.pci_bus_id.as_deref().unwrap_or("?")
                ))
                .detail(format!(
                    "CUDA shows device {} ({}) but NVML shows no GPU with its UUID or PCI bus id",
                    d.ordinal,
                    or_unknown(&d.uuid)
                )),
        );
    }
    out
}

/// The check of an NVML GPU that no CUDA device matched.
fn unseen_by_cuda(g: &GpuInfo, env: &BTreeMap<String, String>) -> Check {
    let name = format!("nvml-cuda[{}]", g.index);
    let expected = format!("GPU {} ({}) visible to CUDA", g.index, or_unknown(&g.uuid));
    if g.mig_enabled == Some(true) {
        let detail = if g.mig_devices.is_empty() {
            "MIG mode is on and the GPU has no MIG devices: CUDA cannot run work on it".to_string()
        } else {
            format!(
                "MIG mode is on: CUDA enumerates none of its {} MIG device(s) in this process (it shows at most one); nothing to compare",
                g.mig_devices.len()
            )
        };
        let status = if g.mig_devices.is_empty() {
            Status::Warn
        } else {
            Status::Skip
        };
        return Check::new(name, status)
            .expected(expected)
            .measured("MIG mode on")
            .detail(detail);
    }
    let c = Check::new(name, Status::Fail)
        .expected(expected)
        .measured("not visible to CUDA");
    match env.get("CUDA_VISIBLE_DEVICES") {
        Some(v) => {
            let mut c = c.detail(format!(
                "NVML shows GPU {} ({}); CUDA_VISIBLE_DEVICES=`{v}` hides it from CUDA",
                g.index,
                or_unknown(&g.uuid)
            ));
            c.status = Status::Warn;
            c
        }
        None => c.detail(format!(
            "NVML shows GPU {} ({}, bus {}) but CUDA shows no device with its UUID or PCI bus id",
            g.index,
            or_unknown(&g.uuid),
            g.pci_bus_id.as_deref().unwrap_or("?")
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mig_bytes_get_the_mig_spelling_and_others_keep_theirs() {
        let mut m = Measurements::default();
        m.gpus.push(GpuInfo {
            uuid: "GPU-aaaaaaaa-0000-0000-0000-000000000000".into(),
            mig_enabled: Some(true),
            mig_devices: vec![MigDevice {
                uuid: "MIG-7d3a9b4e-1c2f-5a6b-8c9d-0e1f2a3b4c5d".into(),
                ..MigDevice::default()
            }],
            ..GpuInfo::default()
        });
        for (cuda, want) in [
            (
                "GPU-7D3A9B4E-1c2f-5a6b-8c9d-0e1f2a3b4c5d",
                "MIG-7d3a9b4e-1c2f-5a6b-8c9d-0e1f2a3b4c5d",
            ),
            (
                "GPU-aaaaaaaa-0000-0000-0000-000000000000",
                "GPU-aaaaaaaa-0000-0000-0000-000000000000",
            ),
            (
                "GPU-bbbbbbbb-0000-0000-0000-000000000000",
                "GPU-bbbbbbbb-0000-0000-0000-000000000000",
            ),
        ] {
            m.cuda_devices = vec![CudaDeviceResult {
                uuid: cuda.into(),
                ..CudaDeviceResult::default()
            }];
            respell_mig_uuids(&mut m);
            assert_eq!(m.cuda_devices[0].uuid, want);
        }
        assert!(!same_uuid("", ""));
        assert!(same_uuid("GPU-AB-cd", "MIG-abcd"));
    }
}

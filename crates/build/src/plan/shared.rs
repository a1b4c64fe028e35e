//! The jobs several plans have in common: a build of one profile for several platforms, or
//! over layers another build also makes, runs a job once where the keys are equal (equal keys
//! mean equal bytes). Jobs keyed only by their tree when written are never shared up front.
//! Pure: reads plans, decides nothing else.

use std::collections::BTreeMap;

use super::Plan;
use gpuimg_store::digest::Digest;

/// Each key that more than one of `plans` has, with the (plan, layer) indices that use it.
pub fn shared_jobs(plans: &[&Plan]) -> BTreeMap<Digest, Vec<(usize, usize)>> {
    let mut by_key: BTreeMap<Digest, Vec<(usize, usize)>> = BTreeMap::new();
    for (p, plan) in plans.iter().enumerate() {
        for (l, job) in plan.layers.iter().enumerate() {
            if let Some(k) = job.key {
                by_key.entry(k).or_default().push((p, l));
            }
        }
    }
    by_key.retain(|_, users| {
        let first = users.first().map(|u| u.0);
        users.iter().any(|u| Some(u.0) != first)
    });
    by_key
}

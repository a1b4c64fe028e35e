//! The search: newest-first over each component's candidates, in a fixed order (frameworks,
//! CUDA, cuDNN, NCCL, Python), checking every fact as soon as its components are picked.
//!
//! The first complete pick is the answer (newest framework, then newest CUDA, ...). For each
//! candidate of the first component it records the first conflict met below it: that list is
//! the explanation when nothing works. Pure: no I/O.

use crate::catalog::CudnnRelease;
use gpuimg_expect::version::Constraint;

use super::checks::Ctx;
use super::fact::{Conflict, Fact};
use super::host::{host_range, HostRange};
use super::pick::{CudnnPick, Pick};
use super::request::Component;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Var {
    Pytorch,
    Tensorflow,
    Jax,
    Cuda,
    Cudnn,
    Nccl,
    Python,
}

const ORDER: [Var; 7] = [
    Var::Pytorch,
    Var::Tensorflow,
    Var::Jax,
    Var::Cuda,
    Var::Cudnn,
    Var::Nccl,
    Var::Python,
];

pub(super) struct Found<'c> {
    pub pick: Pick<'c>,
    pub host: HostRange,
    pub relied: Vec<Fact>,
}

pub(super) enum Outcome<'c> {
    Found(Box<Found<'c>>),
    /// Every candidate of the first component, with the first conflict found below it.
    NotFound(Vec<(String, Conflict)>),
}

pub(super) struct Search<'c> {
    pub ctx: Ctx<'c>,
}

impl<'c> Search<'c> {
    fn listed(&self, c: Component) -> bool {
        self.ctx.req.stack.contains_key(&c)
    }

    fn any_framework(&self) -> bool {
        self.listed(Component::Pytorch)
            || self.listed(Component::Tensorflow)
            || self.listed(Component::Jax)
    }

    fn active(&self, v: Var) -> bool {
        match v {
            Var::Pytorch => self.listed(Component::Pytorch),
            Var::Tensorflow => self.listed(Component::Tensorflow),
            Var::Jax => self.listed(Component::Jax),
            Var::Cuda => {
                self.any_framework()
                    || self.listed(Component::Cuda)
                    || self.listed(Component::Cudnn)
                    || self.listed(Component::Nccl)
            }
            Var::Cudnn => {
                self.listed(Component::Cudnn)
                    || self.listed(Component::Tensorflow)
                    || self.listed(Component::Jax)
                    || self.listed(Component::Pytorch)
            }
            Var::Nccl => {
                self.listed(Component::Nccl)
                    || self.listed(Component::Tensorflow)
                    || self.listed(Component::Jax)
                    || self.listed(Component::Pytorch)
            }
            Var::Python => self.any_framework() || self.listed(Component::Python),
        }
    }

    fn wants(&self, c: Component, v: &gpuimg_expect::version::Version) -> bool {
        self.ctx.req.stack.get(&c).is_none_or(|k| k.matches(v))
    }

    /// Candidates for `var` given the pick so far, newest first; `[None]`-like empty pick when inactive.
    fn candidates(&self, var: Var, pick: &Pick<'c>) -> Vec<Pick<'c>> {
        let cat = self.ctx.cat;
        if !self.active(var) {
            return vec![*pick];
        }
        match var {
            Var::Pytorch => cat
                .pytorch
                .iter()
                .filter(|r| self.wants(Component::Pytorch, &r.version))
                .flat_map(|r| {
                    // The variant the default package index serves first (a plain
                    // `torch==X` installs it), then the others, newest CUDA first.
                    let mut vs: Vec<_> = r.variants.iter().collect();
                    vs.sort_by(|a, b| b.pypi.cmp(&a.pypi).then_with(|| b.cuda.cmp(&a.cuda)));
                    vs.into_iter().map(move |v| Pick {
                        pytorch: Some((r, v)),
                        ..*pick
                    })
                })
                .collect(),
            Var::Tensorflow => cat
                .tensorflow
                .iter()
                .filter(|r| self.wants(Component::Tensorflow, &r.version))
                .map(|r| Pick {
                    tensorflow: Some(r),
                    ..*pick
                })
                .collect(),
            Var::Jax => cat
                .jax
                .iter()
                .filter(|r| self.wants(Component::Jax, &r.version))
                .flat_map(|r| {
                    let mut vs: Vec<_> = r.variants.iter().collect();
                    vs.sort_by(|a, b| b.name.cmp(&a.name));
                    vs.into_iter().map(move |v| Pick {
                        jax: Some((r, v)),
                        ..*pick
                    })
                })
                .collect(),
            Var::Cuda => cat
                .cuda
                .iter()
                .filter(|t| self.wants(Component::Cuda, &t.version))
                .filter(|t| {
                    pick.pytorch
                        .is_none_or(|(_, v)| t.version.starts_with(&v.cuda))
                })
                .filter(|t| pick.tensorflow.is_none_or(|r| r.cuda.matches(&t.version)))
                .filter(|t| pick.jax.is_none_or(|(_, v)| v.cuda.matches(&t.version)))
                .map(|t| Pick {
                    cuda: Some(t),
                    ..*pick
                })
                .collect(),
            Var::Cudnn => {
                if let Some(pin) = pick.pytorch.and_then(|(_, v)| v.cudnn.as_ref()) {
                    return match cat.cudnn_record(pin) {
                        Some(record) => vec![Pick {
                            cudnn: Some(CudnnPick {
                                version: pin,
                                record,
                                build: None,
                            }),
                            ..*pick
                        }],
                        None => vec![],
                    };
                }
                if !(self.listed(Component::Cudnn)
                    || self.listed(Component::Tensorflow)
                    || self.listed(Component::Jax))
                {
                    return vec![*pick];
                }
                cat.cudnn
                    .iter()
                    .filter(|r| self.wants(Component::Cudnn, &r.version))
                    .filter(|r| pick.tensorflow.is_none_or(|t| t.cudnn.matches(&r.version)))
                    .filter(|r| pick.jax.is_none_or(|(_, v)| v.cudnn.matches(&r.version)))
                    .map(|r: &'c CudnnRelease| Pick {
                        cudnn: Some(CudnnPick {
                            version: &r.version,
                            record: r,
                            build: None,
                        }),
                        ..*pick
                    })
                    .collect()
            }
            Var::Nccl => {
                if let Some(pin) = pick.pytorch.and_then(|(_, v)| v.nccl.as_ref()) {
                    return cat
                        .nccl
                        .iter()
                        .filter(|n| &n.version == pin)
                        .map(|n| Pick {
                            nccl: Some(n),
                            ..*pick
                        })
                        .collect();
                }
                if !(self.listed(Component::Nccl)
                    || self.listed(Component::Tensorflow)
                    || self.listed(Component::Jax))
                {
                    return vec![*pick];
                }
                cat.nccl
                    .iter()
                    .filter(|n| self.wants(Component::Nccl, &n.version))
                    .filter(|n| {
                        pick.tensorflow
                            .is_none_or(|t| t.nccl.as_ref().is_none_or(|c| c.matches(&n.version)))
                    })
                    .filter(|n| pick.jax.is_none_or(|(_, v)| v.nccl.matches(&n.version)))
                    .map(|n| Pick {
                        nccl: Some(n),
                        ..*pick
                    })
                    .collect()
            }
            Var::Python => cat
                .python
                .iter()
                .filter(|p| self.wants(Component::Python, &p.version))
                .map(|p| Pick {
                    python: Some(p),
                    ..*pick
                })
                .collect(),
        }
    }

    /// Runs the checks that `var` joining the pick brings in; may fill in the cuDNN build.
    fn check(
        &self,
        var: Var,
        pick: &mut Pick<'c>,
        relied: &mut Vec<Fact>,
    ) -> Result<Option<HostRange>, Conflict> {
        let c = &self.ctx;
        match var {
            Var::Pytorch => c.pytorch(pick, relied)?,
            Var::Tensorflow => c.tensorflow(pick)?,
            Var::Jax => c.jax(pick)?,
            Var::Cuda => c.cuda(pick, relied)?,
            Var::Cudnn => c.cudnn(pick, relied)?,
            Var::Nccl => c.nccl(pick, relied)?,
            Var::Python => c.python(pick)?,
        }
        if matches!(var, Var::Jax | Var::Cuda | Var::Cudnn) {
            return host_range(c.cat, c.req, pick, relied).map(Some);
        }
        Ok(None)
    }

    pub fn run(&self) -> Outcome<'c> {
        let mut relied = Vec::new();
        let base = Pick::default();
        if let Err(c) = host_range(self.ctx.cat, self.ctx.req, &base, &mut relied) {
            return Outcome::NotFound(vec![("the host".into(), c)]);
        }
        let vars: Vec<Var> = ORDER.iter().copied().filter(|v| self.active(*v)).collect();
        let Some(&top) = vars.first() else {
            return match host_range(self.ctx.cat, self.ctx.req, &base, &mut relied) {
                Ok(host) => Outcome::Found(Box::new(Found {
                    pick: base,
                    host,
                    relied,
                })),
                Err(c) => Outcome::NotFound(vec![("the host".into(), c)]),
            };
        };
        let mut fails = Vec::new();
        for mut cand in self.candidates(top, &base) {
            let label = label(top, &cand);
            let mut first: Option<Conflict> = None;
            let mut relied = Vec::new();
            match self.check(top, &mut cand, &mut relied) {
                Err(c) => first = Some(c),
                Ok(_) => {
                    if let Some(found) = self.dfs(&vars[1..], cand, &mut first) {
                        return Outcome::Found(Box::new(found));
                    }
                }
            }
            fails.push((
                label,
                first.unwrap_or_else(|| Conflict::new(vec![], "no candidates below it")),
            ));
        }
        if fails.is_empty() {
            fails.push(("the catalog".into(), self.no_candidates(top)));
        }
        Outcome::NotFound(fails)
    }

    fn dfs(&self, vars: &[Var], pick: Pick<'c>, first: &mut Option<Conflict>) -> Option<Found<'c>> {
        let Some((&var, rest)) = vars.split_first() else {
            let mut relied = Vec::new();
            let mut p = pick;
            // Final pass: collect every unverified fact the answer relies on.
            for v in ORDER {
                if let Err(c) = self.check(v, &mut p, &mut relied) {
                    first.get_or_insert(c);
                    return None;
                }
            }
            return match host_range(self.ctx.cat, self.ctx.req, &p, &mut relied) {
                Ok(host) => Some(Found {
                    pick: p,
                    host,
                    relied,
                }),
                Err(c) => {
                    first.get_or_insert(c);
                    None
                }
            };
        };
        let cands = self.candidates(var, &pick);
        if cands.is_empty() && first.is_none() {
            *first = Some(self.no_candidates(var));
        }
        for mut cand in cands {
            let mut scratch = Vec::new();
            match self.check(var, &mut cand, &mut scratch) {
                Err(c) => {
                    first.get_or_insert(c);
                }
                Ok(_) => {
                    if let Some(f) = self.dfs(rest, cand, first) {
                        return Some(f);
                    }
                }
            }
        }
        None
    }

    fn no_candidates(&self, var: Var) -> Conflict {
        let comp = match var {
            Var::Pytorch => Component::Pytorch,
            Var::Tensorflow => Component::Tensorflow,
            Var::Jax => Component::Jax,
            Var::Cuda => Component::Cuda,
            Var::Cudnn => Component::Cudnn,
            Var::Nccl => Component::Nccl,
            Var::Python => Component::Python,
        };
        let want = self
            .ctx
            .req
            .stack
            .get(&comp)
            .cloned()
            .unwrap_or_else(Constraint::any);
        Conflict::new(
            vec![self.ctx.req.stack_fact(comp, &want)],
            format!("the catalog has no {comp} release matching `{want}`"),
        )
    }
}

fn label(var: Var, p: &Pick) -> String {
    match var {
        Var::Pytorch => p
            .pytorch
            .map(|(r, v)| format!("pytorch {} ({})", r.version, v.name)),
        Var::Tensorflow => p.tensorflow.map(|r| format!("tensorflow {}", r.version)),
        Var::Jax => p
            .jax
            .map(|(r, v)| format!("jax {} ({})", r.version, v.name)),
        Var::Cuda => p.cuda.map(|t| format!("CUDA {}", t.version)),
        Var::Cudnn => p.cudnn.map(|c| format!("cuDNN {}", c.version)),
        Var::Nccl => p.nccl.map(|n| format!("NCCL {}", n.version)),
        Var::Python => p.python.map(|x| format!("Python {}", x.version)),
    }
    .unwrap_or_default()
}
